"""The run's history a person can read: one timestamped line per event (faults, heals,
crashes, restarts, acknowledged batches, GC rounds, check results)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO


class History:
    def __init__(self, path: Path, echo: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._clock = clock
        self._t0 = clock()
        self._echo = echo
        self._f: TextIO = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def __call__(self, what: str, **fields: object) -> None:
        extra = " ".join(f"{k}={v}" for k, v in fields.items())
        line = f"{self._clock() - self._t0:8.2f}s  {what}" + (f"  {extra}" if extra else "")
        self._f.write(line + "\n")
        self._f.flush()
        if self._echo is not None:
            self._echo(line)

    def close(self) -> None:
        self._f.close()
