"""A deterministic asyncio event loop driven by the simulator's logical clock.

Only what tasks, futures, locks and `asyncio.sleep`/timeouts need: call_soon, call_at/
call_later on logical time, create_task/create_future. No I/O, no threads, no wall clock:
`drain()` runs ready callbacks in FIFO order, `fire_due(now)` runs timers due by `now`.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
from asyncio import events
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class SimLoop(asyncio.AbstractEventLoop):
    def __init__(self) -> None:
        self._now = 0.0
        self._ready: deque[asyncio.Handle] = deque()
        self._timers: list[tuple[float, int, asyncio.TimerHandle]] = []
        self._seq = 0
        self._closed = False
        self.errors: list[dict[str, Any]] = []

    # ---- clock and scheduling ------------------------------------------------------------

    def time(self) -> float:
        return self._now

    def set_time(self, now: float) -> None:
        if now > self._now:  # never backwards (a comparison: max() was 1% of a step)
            self._now = now

    def call_soon(  # type: ignore[override]
        self,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        h = asyncio.Handle(callback, args, self, context)
        self._ready.append(h)
        return h

    def call_soon_threadsafe(  # type: ignore[override]
        self,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        return self.call_soon(callback, *args, context=context)

    def call_at(  # type: ignore[override]
        self,
        when: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        h = asyncio.TimerHandle(when, callback, args, self, context)
        self._seq += 1
        heapq.heappush(self._timers, (when, self._seq, h))
        return h

    def call_later(  # type: ignore[override]
        self,
        delay: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        return self.call_at(self._now + delay, callback, *args, context=context)

    def _timer_handle_cancelled(self, handle: asyncio.TimerHandle) -> None:
        pass  # cancelled timers are skipped when popped

    def next_timer(self) -> float | None:
        while self._timers and self._timers[0][2].cancelled():
            heapq.heappop(self._timers)
        return self._timers[0][0] if self._timers else None

    def fire_due(self) -> int:
        n = 0
        timers, now = self._timers, self._now
        while timers and timers[0][0] <= now:
            _, _, h = heapq.heappop(timers)
            if not h.cancelled():
                self._ready.append(h)
                n += 1
        return n

    def drain(self, limit: int = 1_000_000) -> int:
        """Run ready callbacks (and those they schedule) until none is left."""
        if not self._ready:
            return 0  # the common case between simulator events: no loop switch at all
        n = 0
        old = events._get_running_loop()
        events._set_running_loop(self)
        try:
            while self._ready:
                h = self._ready.popleft()
                if not h.cancelled():
                    h._run()
                n += 1
                if n >= limit:
                    raise RuntimeError("SimLoop.drain: callbacks keep scheduling callbacks")
        finally:
            events._set_running_loop(old)
        return n

    # ---- futures and tasks ---------------------------------------------------------------

    def create_future(self) -> asyncio.Future[Any]:
        return asyncio.Future(loop=self)

    def create_task(  # type: ignore[override]
        self,
        coro: Coroutine[Any, Any, T],
        *,
        name: str | None = None,
        context: contextvars.Context | None = None,
    ) -> asyncio.Task[T]:
        return asyncio.Task(coro, loop=self, name=name, context=context)

    def get_debug(self) -> bool:
        return False

    def is_running(self) -> bool:
        return events._get_running_loop() is self

    def is_closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._closed = True

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        self.errors.append(context)

    def default_exception_handler(self, context: dict[str, Any]) -> None:
        self.errors.append(context)
