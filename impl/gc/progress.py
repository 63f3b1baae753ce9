"""Progress on stderr while Spark runs: polls the status tracker (and the round's journal)
from a thread; lines for logs, a tqdm bar at a terminal."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from epochgc.impl.progress import Reporter
from epochgc.impl.store.base import ObjectStore, StoreError


class StageProgress:
    """`with StageProgress(sc, "listing", say):` prints "listing: 3/8 tasks" as it moves."""

    def __init__(
        self, sc: Any, label: str, say: Callable[[str], None] | None, interval: float = 2.0
    ) -> None:
        self.sc, self.label, self.say, self.interval = sc, label, say, interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> StageProgress:
        if self.say is not None:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        assert self.say is not None
        last = ""
        tracker = self.sc.statusTracker()
        while not self._stop.wait(self.interval):
            done, total = _active_tasks(tracker)
            line = f"{self.label}: {done}/{total} tasks done" if total else ""
            if line and line != last:
                self.say(line)
                last = line


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
    """`with RoundBar(sc, label, reporter, journal):` draws one tqdm bar while the stage
    runs: tasks done of the stage's tasks (the total Spark knows, so tqdm's ETA is by
    tasks), and, for a round that deletes, the keys deleted so far and keys/s, summed from
    the `deleted` count of each batch's `done` in the round's journal (each read once; the
    journal is what the round counts anyway, `impl/gc/journal.py`)."""

    def __init__(self, sc: Any, label: str, reporter: Reporter,
                 journal: tuple[Callable[[], ObjectStore], str] | None = None,
                 interval: float = 1.0) -> None:
        self.sc, self.label, self.reporter, self.journal = sc, label, reporter, journal
        self.interval = interval
        self.deleted = 0
        self._seen: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bar: Any = None
        self._t0 = 0.0
        self._store: ObjectStore | None = None

    def __enter__(self) -> RoundBar:
        self._t0 = time.monotonic()
        self._bar = self.reporter.bar(self.label, unit="task")
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with contextlib.suppress(StoreError, OSError, ValueError):
            self._poll_journal()  # the last batches, so the bar ends on the round's count
        self._draw(self._last_job())
        self._bar.close()
        if self._store is not None:
            self._store.close()

    def _run(self) -> None:
        tracker = self.sc.statusTracker()
        while not self._stop.wait(self.interval):
            done, total = _active_tasks(tracker)
            with contextlib.suppress(StoreError, OSError, ValueError):
                self._poll_journal()  # progress is advisory: a failed look is skipped
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

    def _poll_journal(self) -> None:
        if self.journal is None:
            return
        open_store, prefix = self.journal
        if self._store is None:
            self._store = open_store()
        for obj in self._store.list_all(prefix):
            if obj.key.endswith(".done.json") and obj.key not in self._seen:
                doc = json.loads(self._store.get(obj.key))
                self._seen.add(obj.key)
                self.deleted += int(doc.get("deleted", 0))

    def _draw(self, tasks: tuple[int, int] | None) -> None:
        if tasks is not None:
            self._bar.total = tasks[1]
            self._bar.n = tasks[0]
        if self.journal is not None:
            rate = self.deleted / max(time.monotonic() - self._t0, 1e-9)
            self._bar.set_postfix_str(f"{self.deleted:,} keys deleted, {rate:,.0f} keys/s",
                                      refresh=False)
        self._bar.refresh()


def stage_progress(sc: Any, label: str, say: Callable[[str], None] | None,
                   journal: tuple[Callable[[], ObjectStore], str] | None = None
                   ) -> RoundBar | StageProgress:
    """A bar when `say` is a Reporter with bars on (a terminal, not --quiet), else the
    lines of StageProgress (logs, tests)."""
    if isinstance(say, Reporter) and say.bars:
        return RoundBar(sc, label, say, journal)
    return StageProgress(sc, label, say)
