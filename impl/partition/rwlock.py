"""An asyncio reader/writer lock, FIFO-fair, with downgrade from exclusive to shared.

Fair so that a fence waiting to slide the window is not starved by a stream of in-window
fences; downgrade so that the fence that slid the window keeps it from sliding again under
its own replicate (it then holds a shared lock like any in-window fence).

Acquiring a free lock completes without suspending, which is what lets the first of several
concurrent same-epoch fences slide the window before the others decide.
"""

from __future__ import annotations

import asyncio
from collections import deque

SHARED = "shared"
EXCLUSIVE = "exclusive"


class RWLock:
    def __init__(self) -> None:
        self._readers = 0
        self._writer = False
        self._waiters: deque[tuple[str, asyncio.Future[None]]] = deque()
        self.exclusive_acquisitions = 0  # for tests and metrics

    @property
    def readers(self) -> int:
        return self._readers

    @property
    def writer(self) -> bool:
        return self._writer

    def _can_grant(self, mode: str) -> bool:
        if mode == SHARED:
            return not self._writer
        return not self._writer and self._readers == 0

    def try_acquire(self, mode: str) -> bool:
        """Take the lock now if it can be granted without waiting (FIFO: nobody queued
        ahead); True if taken. Never suspends."""
        if not self._waiters and self._can_grant(mode):
            self._grant(mode)
            return True
        return False

    async def acquire(self, mode: str) -> None:
        if self.try_acquire(mode):
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((mode, fut))
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release(mode)  # granted just as we were cancelled: give it back
            else:
                self._waiters = deque(w for w in self._waiters if w[1] is not fut)
                self._wake()
            raise

    def _grant(self, mode: str) -> None:
        if mode == SHARED:
            self._readers += 1
        else:
            self._writer = True
            self.exclusive_acquisitions += 1

    def release(self, mode: str) -> None:
        if mode == SHARED:
            if self._readers <= 0:
                raise RuntimeError("release of a shared lock that is not held")
            self._readers -= 1
        else:
            if not self._writer:
                raise RuntimeError("release of an exclusive lock that is not held")
            self._writer = False
        self._wake()

    def downgrade(self) -> None:
        """Exclusive -> shared without letting another writer in between."""
        if not self._writer:
            raise RuntimeError("downgrade without holding the exclusive lock")
        self._writer = False
        self._readers += 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            mode, fut = self._waiters[0]
            if fut.done():  # cancelled waiter
                self._waiters.popleft()
                continue
            if not self._can_grant(mode):
                return
            self._waiters.popleft()
            self._grant(mode)
            fut.set_result(None)
            if mode == EXCLUSIVE:
                return
