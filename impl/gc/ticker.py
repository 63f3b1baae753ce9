"""A function called every `interval` seconds on a daemon thread (the progress display's
polls and the tasks' beacons)."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Ticker:
    """`t = Ticker(interval, tick, name); t.start(); ...; t.stop()`: `tick()` runs every
    `interval` seconds between the two; stop() returns once the thread has ended (a tick
    under way finishes first)."""

    def __init__(self, interval: float, tick: Callable[[], None], name: str) -> None:
        self.interval, self.tick = interval, tick
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.tick()
