"""Progress on stderr while Spark runs: tasks done from Spark's status tracker, keys
listed and deleted from the tasks' beacons (`impl.gc.beacon`); lines for logs, a tqdm bar
at a terminal. No store request is made for progress."""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from epochgc.impl.gc.beacon import BeaconListener
from epochgc.impl.gc.executors import ExecutorWait, executor_count
from epochgc.impl.gc.ticker import Ticker
from epochgc.impl.progress import Reporter


def counts_text(counts: tuple[int, int], deletes: bool, seconds: float,
                rate: bool = True) -> str:
    """"12,000 keys listed, 4,000 deleted, 800 keys/s" from a listener's (listed, deleted)
    totals; a stage that does not delete says "12,000 keys listed, 2,400 keys/s": the rate
    is of what the stage is there for. Without `rate`, no rate (nothing moves)."""
    listed, deleted = counts
    text = f"{listed:,} key{'' if listed == 1 else 's'} listed"
    if deletes:
        text += f", {deleted:,} deleted"
    if not rate:
        return text
    per_s = (deleted if deletes else listed) / max(seconds, 1e-9)
    return f"{text}, {per_s:,.0f} keys/s"


def eta_text(tasks: tuple[int, int], seconds: float) -> str | None:
    """"ETA 1m 20s (by tasks)": the time left if the tasks not done take as long as the
    done ones took on average; None before the first task is done and once all are (no
    total of keys is known before the listing ends: the ETA is by tasks, the only total
    Spark knows)."""
    done, total = tasks
    if done <= 0 or total <= 0 or done >= total:
        return None  # nothing to estimate from, or nothing left (issue 41 F5: no "ETA 0s")
    left = seconds * (total - done) / done
    return f"ETA {_short(left)} (by tasks)"


def _short(seconds: float) -> str:
    """`1h 5m`, `4m 10s`, `12s`: the two largest units."""
    s = max(0, round(seconds))
    parts = [(s // 3600, "h"), (s % 3600 // 60, "m"), (s % 60, "s")]
    return " ".join([f"{n}{u}" for n, u in parts if n][:2]) or "0s"


# After this long with no task done and no key counted, a line says so instead of an ETA.
STILL_AFTER_S = 20.0


def progress_line(label: str, tasks: tuple[int, int], counts: tuple[int, int] | None,
                  deletes: bool, seconds: float, still_s: float = 0.0,
                  stopped: bool = False) -> str:
    """"gc: listing: 3/8 tasks done, 12,000 keys listed, 2,400 keys/s, ETA 40s (by
    tasks)" (`counts`: the listener's totals, None without one). `still_s`: how long
    nothing has moved; from `STILL_AFTER_S` on, "no progress for 40s" takes the ETA's place
    (newuser11 M14: a store gone silent showed a growing ETA for 2.5 minutes, read as
    "slow"). `stopped`: the round was asked to stop: "stopped, 4/4 tasks ended", no ETA
    (newuser12 P12: "4/4 tasks done" after a SIGTERM read as a finished listing; a task
    told to stop ends early and Spark counts it completed)."""
    if stopped:
        line = f"{label}: stopped, {tasks[0]}/{tasks[1]} tasks ended"
    else:
        line = f"{label}: {tasks[0]}/{tasks[1]} tasks done"
    still = not stopped and still_s >= STILL_AFTER_S
    if counts is not None:
        # No rate while nothing moves (newuser13 Q9: "1,479 deleted, 20 keys/s, no progress
        # for 58s": the average since the start, read as a current rate), nor once stopped
        # (newuser15 S7: it only fell, 11, 9, 8 keys/s, while the stopped round waited).
        line += ", " + counts_text(counts, deletes, seconds, rate=not (still or stopped))
    if stopped:
        return line
    if still:
        return f"{line}, no progress for {_short(still_s)}"
    # No key listed yet (newuser5 G7: "1/4 tasks done, 0 keys listed, ..., ETA 25s"): the
    # tasks done had empty prefixes, which says nothing of how long the others take.
    eta = None if counts is not None and counts[0] == 0 else eta_text(tasks, seconds)
    return line if eta is None else f"{line}, {eta}"


class LineCadence:
    """When a log (stderr not a terminal) gets a progress line: at the first poll that
    sees tasks, whenever the tasks done change, and every `every_s` seconds otherwise (an
    operator tailing the log sees the counts move; issue 41: 30 s and only on a change
    left a 40-60 s round with 2-3 lines, the last one 30 s stale). `due(now, tasks)` says
    whether to write one now, and counts it written."""

    def __init__(self, every_s: float = 10.0) -> None:
        self.every_s = every_s
        self._at: float | None = None
        self._tasks: tuple[int, int] | None = None

    def due(self, now: float, tasks: tuple[int, int]) -> bool:
        if self._at is not None and tasks == self._tasks and now - self._at < self.every_s:
            return False
        self._at, self._tasks = now, tasks
        return True


# How long a poll that saw a task finish waits for the counts already sent (`_settled`).
SYNC_LIMIT_S = 2.0


def _settled(listener: BeaconListener | None, done: int, seen_done: int) -> None:
    """A task that finished sent its last counts before it ended (`Beacon.__exit__`), but
    the listener's thread may not have read them yet when Spark's tracker says it is done
    (newuser11 M15: "1/4 tasks done, 0 keys listed"): once more tasks are done than last
    seen, wait for what reached the listener's socket (`BeaconListener.sync`, bounded)."""
    if listener is not None and done > seen_done:
        listener.sync(SYNC_LIMIT_S)


class StageProgress:
    """`with StageProgress(sc, "listing", say, listener):` writes `progress_line`s (tasks
    done, keys listed and deleted, keys/s, an ETA by tasks) at `LineCadence`'s times,
    polling Spark's status tracker every `interval` seconds; once `stopped()` (the round
    was asked to stop), the lines say so."""

    def __init__(
        self, sc: Any, label: str, say: Callable[[str], None] | None,
        listener: BeaconListener | None = None, deletes: bool = False,
        interval: float = 2.0, every_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        stopped: Callable[[], bool] = lambda: False,
    ) -> None:
        self.sc, self.label, self.say, self.listener = sc, label, say, listener
        self.deletes, self.clock, self.stopped = deletes, clock, stopped
        self._cadence = LineCadence(every_s)
        self._ticker = Ticker(interval, self._tick, "epochgc-progress")
        self._t0 = 0.0
        self._seen = 0  # the stage's tasks, as of the last line written (0: none written)
        self._moved: tuple[object, float] | None = None  # (tasks and counts, when they moved)
        self._done = 0  # tasks done as of the last poll
        self._said: str | None = None  # the last line returned

    def __enter__(self) -> StageProgress:
        self._t0 = self.clock()
        if self.say is not None:
            self._tracker = self.sc.statusTracker()
            self._wait = _executor_wait(self.sc, self.clock)
            self._ticker.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._ticker.stop()
        if t is None and self.say is not None:
            line = self.last_line()
            if line is not None:
                self.say(line)

    def _tick(self) -> None:
        assert self.say is not None
        line = self.poll(_active_tasks(self._tracker))
        if line is not None:
            self.say(line)
        waiting = self._wait.poll()
        if waiting is not None:
            self.say(waiting)

    def last_line(self) -> str | None:
        """The line for a stage that ended without an error (its action returned: every
        task of it finished), if any line was written: the counts at the end, no ETA. The
        last periodic line may be up to `every_s` old (issue 41 F5: "8,000 deleted ...
        ETA 16s" was the last word of a round that had deleted all 8,000)."""
        total = self._seen
        if not total:
            return None
        if self.listener is not None:
            self.listener.sync()  # the tasks' last counts
        counts = self.listener.totals() if self.listener is not None else None
        stopped = self.stopped()
        return self._once(progress_line(self.label, (total, total), counts, self.deletes,
                                        self.clock() - self._t0, stopped=stopped), stopped)

    def poll(self, tasks: tuple[int, int]) -> str | None:
        """The line to write for a poll that saw `tasks` (done, total) now, if one is due
        (none while no stage runs)."""
        if not tasks[1]:
            return None
        _settled(self.listener, tasks[0], self._done)
        self._done = tasks[0]
        now = self.clock()
        counts = self.listener.totals() if self.listener is not None else None
        still_s = self._still(now, (tasks, counts))  # each poll: when they last moved
        if not self._cadence.due(now, tasks):
            return None
        self._seen = tasks[1]
        stopped = self.stopped()
        return self._once(progress_line(self.label, tasks, counts, self.deletes,
                                        now - self._t0, still_s, stopped), stopped)

    def _once(self, line: str, stopped: bool) -> str | None:
        """`line`, unless the round is stopped and it is the line said last: a stopped
        line has no rate and no ETA, so it changes only when the tasks ended or the counts
        do (newuser15 S7: "stopped, 2/4 tasks ended, ..." every 10 s, for 30 s). Running,
        the periodic line stays (an operator tailing the log sees it is alive)."""
        if stopped and line == self._said:
            return None
        self._said = line
        return line

    def _still(self, now: float, state: object) -> float:
        """How long `state` (tasks done, counts) has been as it is now."""
        if self._moved is None or self._moved[0] != state:
            self._moved = (state, now)
        return now - self._moved[1]


def _executor_wait(sc: Any, clock: Callable[[], float]) -> ExecutorWait:
    """The stage's watch for a master that gives it no executor (newuser9 K2)."""
    return ExecutorWait(str(sc.master), lambda: executor_count(sc), clock)


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
                 interval: float = 1.0, stopped: Callable[[], bool] = lambda: False) -> None:
        self.sc, self.label, self.reporter, self.listener = sc, label, reporter, listener
        self.deletes = deletes
        # A stop requested (a signal, a pause, the deadline): the bar stays as it stood.
        # Tasks told to stop end early and count as completed, so it ran on to "100% 4/4"
        # after a Ctrl-C, which reads as finished (newuser8 I9).
        self.stopped = stopped
        self._ticker = Ticker(interval, self._tick, "epochgc-progress")
        self._bar: Any = None
        self._t0 = 0.0
        self._done = 0  # tasks done as of the last tick

    def __enter__(self) -> RoundBar:
        self._t0 = time.monotonic()
        self._bar = self.reporter.bar(self.label, unit="task")
        self._tracker = self.sc.statusTracker()
        self._wait = _executor_wait(self.sc, time.monotonic)
        self._ticker.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._ticker.stop()
        if not self.stopped():
            if self.listener is not None:
                self.listener.sync()  # the tasks' last counts: the bar ends on the round's
            self._draw(self._last_job())
        self._bar.close()

    def _tick(self) -> None:
        if self.stopped():
            return
        done, total = _active_tasks(self._tracker)
        _settled(self.listener, done, self._done)
        self._done = done
        self._draw((done, total) if total else None)
        waiting = self._wait.poll()
        if waiting is not None:
            self.reporter(waiting)  # above the bar

    def _last_job(self) -> tuple[int, int] | None:
        """Tasks done of the stage's last job (a stage shorter than one poll was never
        seen active)."""
        tracker = self.sc.statusTracker()
        # The job group the stage runs in (the round's own since rev38s finding 4; None:
        # the jobs of no group, PySpark's `getJobIdsForGroup(None)`).
        jobs = tracker.getJobIdsForGroup(self.sc.getLocalProperty("spark.jobGroup.id"))
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
                   listener: BeaconListener | None = None, deletes: bool = False,
                   stopped: Callable[[], bool] = lambda: False) -> RoundBar | StageProgress:
    """A bar when `say` is a Reporter with bars on (a terminal, not --quiet), else the
    lines of StageProgress (logs, tests). `listener`: the tasks' counts; `deletes`: the
    stage deletes (its counts and rate include deletions); `stopped`: whether the round
    was asked to stop (the bar then stays as it stood)."""
    if isinstance(say, Reporter) and say.bars:
        return RoundBar(sc, label, say, listener, deletes, stopped=stopped)
    return StageProgress(sc, label, say, listener, deletes, stopped=stopped)
