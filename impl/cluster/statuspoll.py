"""Every node's latest `status`, each node asked again as soon as it has answered, none
waiting for another.

Asked one after another, a node that accepts and never answers (SIGSTOPped: the kernel
still completes its handshakes) held the others' answers for its whole read bound
(client.QUICK_S, 10 s), which was all of `barrier`'s default `--wait` (newuser10 L1: every
partition said `missing`, exit 1, though the barrier was applied everywhere in a second)."""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType
from typing import Any

from epochgc.impl.cluster.client import ProcClusterAccess

PAUSE_S = 0.2  # between one node's answer and the next question to it


class StatusPoll:
    """`latest[n]`: node n's last `status` data (None: its last request failed); a node
    absent from it has not answered yet. Use as `async with`: the requests stop at exit."""

    def __init__(self, access: ProcClusterAccess, ids: list[int]) -> None:
        self.access = access
        self.ids = list(ids)
        self.latest: dict[int, dict[str, Any] | None] = {}
        self._answered = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> StatusPoll:
        self._tasks = [asyncio.create_task(self._ask(n)) for n in self.ids]
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _ask(self, nid: int) -> None:
        while True:
            self.latest[nid] = (await self.access.call(nid, op="status")).get("data")
            self._answered.set()
            await asyncio.sleep(PAUSE_S)

    async def next_answer(self, within_s: float | None) -> None:
        """Until some node answers (or fails) again, at most `within_s` seconds (None: no
        bound of its own; each request has its own)."""
        self._answered.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(None if within_s is None else max(0.0, within_s)):
                await self._answered.wait()

    def each_concluded(self) -> bool:
        """Every node has answered, or failed, at least once."""
        return len(self.latest) == len(self.ids)

    def unanswered(self) -> list[int]:
        """The nodes with no answer to show: none yet, or the last request failed."""
        return [n for n in self.ids if self.latest.get(n) is None]
