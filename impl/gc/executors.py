"""A round whose Spark master gives it no executor says so (newuser9 K2): a standalone master
with no worker (or none with enough free cores and memory) takes the job and waits for
ever, and the round printed only "0/20 tasks done" every 10 s, holding its lease. Spark's
own word for it ("Initial job has not accepted any resources; check your cluster UI to
ensure that workers are registered and have sufficient resources", TaskSchedulerImpl) is a
WARN line of the log the job hides.

Executors are counted from Spark's block managers: `SparkContext.getExecutorMemoryStatus`
("Return a map from the block manager to the max memory available for caching and the
remaining memory available for caching", one entry per executor plus the driver's,
SparkContext.scala 4.3.0). A local master (`local`, `local[N]`, `local[N,F]`) runs its
tasks in the driver and never registers an executor: not watched.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

# When the line comes: after this long with none registered, then at most every
# `EVERY_S`. The environment variable is the tests' short setting.
AFTER_ENV = "EPOCHGC_GC_NO_EXECUTOR_AFTER_S"
AFTER_S = 60.0
EVERY_S = 300.0


def executor_count(sc: Any) -> int:
    """Executors registered with `sc` now (the driver's own block manager not counted)."""
    return max(0, int(sc._jsc.sc().getExecutorMemoryStatus().size()) - 1)


def watched(master: str) -> bool:
    """Whether a master's tasks need executors that register (not a local master)."""
    return not (master == "local" or master.startswith("local["))


class ExecutorWait:
    """`poll()` (every progress tick) returns the line to write, if one is due: the first
    after `after_s` with no executor, then every `every_s` while there is still none; none
    ever again once one has registered. The clock is the progress display's."""

    def __init__(self, master: str, count: Callable[[], int], clock: Callable[[], float],
                 after_s: float | None = None, every_s: float = EVERY_S) -> None:
        self.master, self.count, self.clock = master, count, clock
        self.after_s = after_s if after_s is not None else float(
            os.environ.get(AFTER_ENV) or AFTER_S)
        self.every_s = every_s
        self._t0 = clock()
        self._said_at: float | None = None
        self._seen = not watched(master)  # an executor has registered (or none is needed)

    def poll(self) -> str | None:
        if self._seen:
            return None
        now = self.clock()
        waited = now - self._t0
        if waited < self.after_s:
            return None
        if self._said_at is not None and now - self._said_at < self.every_s:
            return None
        if self.count() > 0:
            self._seen = True
            return None
        self._said_at = now
        return (f"gc: no Spark executor has registered after {waited:.0f} s on "
                f"{self.master}: check that the master has a worker with enough free cores "
                "and memory for an executor (the tasks wait until one registers; "
                "--spark-log shows Spark's own log)")
