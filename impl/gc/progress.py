"""Progress on stderr while Spark runs: tasks done from Spark's status tracker, keys
listed and deleted from the tasks' beacons (`impl.gc.beacon`); lines for logs, a tqdm bar
at a terminal. No store request is made for progress."""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from epochgc.impl.gc.beacon import BeaconListener
from epochgc.impl.gc.ticker import Ticker
from epochgc.impl.progress import Reporter


def counts_text(counts: tuple[int, int], deletes: bool, seconds: float) -> str:
    """"12,000 keys listed, 4,000 deleted, 800 keys/s" from a listener's (listed, deleted)
    totals; a stage that does not delete says "12,000 keys listed, 2,400 keys/s": the rate
    is of what the stage is there for."""
    listed, deleted = counts
    rate = (deleted if deletes else listed) / max(seconds, 1e-9)
    text = f"{listed:,} key{'' if listed == 1 else 's'} listed"
    if deletes:
        text += f", {deleted:,} deleted"
    return f"{text}, {rate:,.0f} keys/s"


class StageProgress:
    """`with StageProgress(sc, "listing", say, listener):` says "listing: 3/8 tasks done,
    12,000 keys listed, ..." when the tasks done change, and the counts at most every
    `quiet_s` seconds otherwise (a scheduler's log gets a line per change of tasks, not a
    line per poll)."""

    def __init__(
        self, sc: Any, label: str, say: Callable[[str], None] | None,
        listener: BeaconListener | None = None, deletes: bool = False,
        interval: float = 2.0, quiet_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sc, self.label, self.say, self.listener = sc, label, say, listener
        self.deletes, self.quiet_s, self.clock = deletes, quiet_s, clock
        self._ticker = Ticker(interval, self._tick, "epochgc-progress")
        self._t0 = self._last_said = 0.0
        self._last: tuple[tuple[int, int], tuple[int, int] | None] | None = None

    def __enter__(self) -> StageProgress:
        if self.say is not None:
            self._t0 = self._last_said = self.clock()
            self._tracker = self.sc.statusTracker()
            self._ticker.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._ticker.stop()

    def _tick(self) -> None:
        assert self.say is not None
        tasks = _active_tasks(self._tracker)
        if not tasks[1]:
            return
        now = self.clock()
        counts = self.listener.totals() if self.listener is not None else None
        if self._last is not None and tasks == self._last[0] and (
                counts == self._last[1] or now - self._last_said < self.quiet_s):
            return
        line = f"{self.label}: {tasks[0]}/{tasks[1]} tasks done"
        if counts is not None:
            line += ", " + counts_text(counts, self.deletes, now - self._t0)
        self.say(line)
        self._last, self._last_said = (tasks, counts), now


def _active_tasks(tracker: Any) -> tuple[int, int]:
    """(tasks done, tasks) over the stages Spark runs now."""
    done = total = 0
    for sid in tracker.getActiveStageIds():
        info = tracker.getStageInfo(sid)
        if info is not None:
            done += info.numCompletedTasks
            total += info.numTasks
    return done, total


class RoundBar:
    """`with RoundBar(sc, label, reporter, listener):` draws one tqdm bar while the stage
    runs: tasks done of the stage's tasks (the total Spark knows, so tqdm's ETA is by
    tasks), and the keys listed (and deleted, for a round that deletes) so far with
    keys/s, from the tasks' beacons."""

    def __init__(self, sc: Any, label: str, reporter: Reporter,
                 listener: BeaconListener | None = None, deletes: bool = False,
                 interval: float = 1.0) -> None:
        self.sc, self.label, self.reporter, self.listener = sc, label, reporter, listener
        self.deletes = deletes
        self._ticker = Ticker(interval, self._tick, "epochgc-progress")
        self._bar: Any = None
        self._t0 = 0.0

    def __enter__(self) -> RoundBar:
        self._t0 = time.monotonic()
        self._bar = self.reporter.bar(self.label, unit="task")
        self._tracker = self.sc.statusTracker()
        self._ticker.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._ticker.stop()
        if self.listener is not None:
            self.listener.sync()  # the tasks' last counts, so the bar ends on the round's
        self._draw(self._last_job())
        self._bar.close()

    def _tick(self) -> None:
        done, total = _active_tasks(self._tracker)
        self._draw((done, total) if total else None)

    def _last_job(self) -> tuple[int, int] | None:
        """Tasks done of the stage's last job (a stage shorter than one poll was never
        seen active)."""
        tracker = self.sc.statusTracker()
        jobs = tracker.getJobIdsForGroup()
        info = tracker.getJobInfo(max(jobs)) if jobs else None
        if info is None:
            return None
        stages = [tracker.getStageInfo(s) for s in info.stageIds]
        done = sum(s.numCompletedTasks for s in stages if s is not None)
        total = sum(s.numTasks for s in stages if s is not None)
        return (done, total) if total else None

    def _draw(self, tasks: tuple[int, int] | None) -> None:
        if tasks is not None:
            self._bar.total = tasks[1]
            self._bar.n = tasks[0]
        if self.listener is not None:
            self._bar.set_postfix_str(counts_text(self.listener.totals(), self.deletes,
                                                  time.monotonic() - self._t0), refresh=False)
        self._bar.refresh()


def stage_progress(sc: Any, label: str, say: Callable[[str], None] | None,
                   listener: BeaconListener | None = None, deletes: bool = False
                   ) -> RoundBar | StageProgress:
    """A bar when `say` is a Reporter with bars on (a terminal, not --quiet), else the
    lines of StageProgress (logs, tests). `listener`: the tasks' counts; `deletes`: the
    stage deletes (its counts and rate include deletions)."""
    if isinstance(say, Reporter) and say.bars:
        return RoundBar(sc, label, say, listener, deletes)
    return StageProgress(sc, label, say, listener, deletes)
