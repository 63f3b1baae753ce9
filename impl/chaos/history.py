"""The run's history a person can read: one timestamped line per event (faults, heals,
crashes, restarts, acknowledged batches, GC rounds, check results)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

# Echoed at most once per this many seconds each (all go to history.txt): a store fault
# makes every producer's every attempt fail, 77 lines in one 15 s fault (issue 41).
NOISY = frozenset({"batch not acknowledged"})
REPEAT_WINDOW_S = 5.0


def _value(v: object) -> str:
    """A field as a person reads it: `kill 2, pause 1`, `1,2`, not a Python repr."""
    if isinstance(v, dict):
        return ",".join(f"{k}:{_value(x)}" for k, x in v.items()) or "-"
    if isinstance(v, list | tuple | set | frozenset):
        items = sorted(v, key=str) if isinstance(v, set | frozenset) else list(v)
        return ",".join(_value(x) for x in items) or "-"
    return str(v)


class History:
    def __init__(self, path: Path, echo: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._clock = clock
        self._t0 = clock()
        self._echo = echo
        self._f: TextIO = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._echoed_at: dict[str, float] = {}  # a noisy event: when it was last echoed
        self._held: dict[str, int] = {}  # ... and how many since were not

    def __call__(self, what: str, **fields: object) -> None:
        extra = " ".join(f"{k}={_value(v)}" for k, v in fields.items())
        now = self._clock()
        line = f"{now - self._t0:8.2f}s  {what}" + (f"  {extra}" if extra else "")
        self._f.write(line + "\n")
        self._f.flush()
        if self._echo is None:
            return
        if what in NOISY:
            last = self._echoed_at.get(what)
            if last is not None and now - last < REPEAT_WINDOW_S:
                self._held[what] = self._held.get(what, 0) + 1
                return
            self._echoed_at[what] = now
            held = self._held.pop(what, 0)
            if held:
                line += f"  (and {held} more since, in {self.path.name})"
        self._echo(line)

    def close(self) -> None:
        if self._echo is not None:
            for what, held in sorted(self._held.items()):
                self._echo(f"{self._clock() - self._t0:8.2f}s  {what}: {held} more not shown "
                           f"(in {self.path.name})")
        self._held.clear()
        self._f.close()
