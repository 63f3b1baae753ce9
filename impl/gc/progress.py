"""Progress lines on stderr while Spark runs: polls the status tracker from a thread."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any


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
            done = total = 0
            for sid in tracker.getActiveStageIds():
                info = tracker.getStageInfo(sid)
                if info is not None:
                    done += info.numCompletedTasks
                    total += info.numTasks
            line = f"{self.label}: {done}/{total} tasks done" if total else ""
            if line and line != last:
                self.say(line)
                last = line
