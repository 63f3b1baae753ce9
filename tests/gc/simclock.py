"""A simulated clock for code that runs threads and waits (the driver's watch): real
threads take turns, one at a time, and time moves only when the one running sleeps, to
the earliest wake-up (ties in the order the sleeps were made). What the threads see is
then the same on every run, however loaded the machine: no test waits real time, and no
outcome depends on how the OS schedules them.

Every thread that takes part is made by `spawn` (or is the one that made the clock), and
blocks only in `sleep` (a thread blocked elsewhere, on a lock another holds across a
sleep, stalls the rest: `StuckError` after `stuck_s` of real time). `release` ends the
simulation: from then on `sleep` returns at once and the threads run freely, so that
they can be joined."""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable


class StuckError(RuntimeError):
    """No thread ran the simulation on for `stuck_s` of real time."""


class SimClock:
    def __init__(self, start: float = 1000.0, stuck_s: float = 120.0) -> None:
        self.t = start
        self.stuck_s = stuck_s
        self._cv = threading.Condition()
        self._queue: list[tuple[float, int, int]] = []  # (wake at, order, thread's token)
        self._order = itertools.count()
        self._tokens = itertools.count(1)
        self._turn = 0  # whose turn it is; 0: the thread that made the clock
        self._free = False
        self._mine = threading.local()
        self._mine.token = 0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        """Let the others run until `s` of simulated time has passed."""
        with self._cv:
            if self._free:
                return
            me = self._mine.token
            heapq.heappush(self._queue, (self.t + max(0.0, s), next(self._order), me))
            self._hand_on()
            self._await(me)

    def spawn(self, run: Callable[[], None], name: str) -> threading.Thread:
        """A thread that takes part: it first runs once the caller sleeps."""
        with self._cv:
            token = next(self._tokens)
            heapq.heappush(self._queue, (self.t, next(self._order), token))

        def body() -> None:
            self._mine.token = token
            with self._cv:
                self._await(token)
            try:
                run()
            finally:
                with self._cv:
                    if not self._free and self._queue:
                        self._hand_on()

        thread = threading.Thread(target=body, name=name, daemon=True)
        thread.start()
        return thread

    def release(self) -> None:
        """End the simulation: every thread runs on freely, `sleep` returns at once."""
        with self._cv:
            self._free = True
            self._cv.notify_all()

    def _hand_on(self) -> None:
        wake, _, token = heapq.heappop(self._queue)
        self.t = max(self.t, wake)
        self._turn = token
        self._cv.notify_all()

    def _await(self, token: int) -> None:
        while not self._free and self._turn != token:
            if not self._cv.wait(self.stuck_s):
                self._free = True  # let every thread go, then fail this one
                self._cv.notify_all()
                raise StuckError(f"no thread ran for {self.stuck_s:g} s (at t={self.t:g})")
