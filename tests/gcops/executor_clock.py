"""A clock that is NOW on the GC driver and 1000 s later once shipped to a Spark worker
(its own module: the workers import it, and nothing else of the tests)."""

from __future__ import annotations

from typing import Any

from tests.gc.helpers import NOW


class ExecutorClock:
    """A task's re-read then finds every report older than the max age (300 s): every
    partition without a fresh report, the round blocked; the driver's watch, on NOW, sees
    a healthy cluster."""

    def __init__(self) -> None:
        self.shipped = False

    def __call__(self) -> float:
        return NOW + 1000.0 if self.shipped else NOW

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.shipped = True
