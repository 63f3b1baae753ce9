"""The Raft operations a broker uses, as one small protocol both worlds provide: `RaftServer`
(asyncio TCP + DiskStorage) satisfies it as is; the simulator's port lives in impl/sim."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from epochgc.impl.raft.host import MultiRaftHost, StateMachine

T = TypeVar("T")

class IoRunner(Protocol):
    """Run a blocking store call: in a thread pool on a real loop, inline in the simulator
    (so the simulated world stays deterministic)."""

    def __call__(self, fn: Callable[[], T]) -> Awaitable[T]: ...


class RaftPort(Protocol):
    node_id: int
    host: MultiRaftHost

    def add_group(self, group_id: int, sm: StateMachine) -> None: ...

    def remove_group(self, group_id: int) -> None:
        """Stop the group and drop its storage for good (its partition was deleted)."""
        ...

    def removed(self, group_id: int) -> bool:
        """Was the group removed on this node (durably, across restarts)?"""
        ...

    def propose(
        self, group_id: int, data: bytes, entry_type: int = 1, expected_term: int | None = None
    ) -> asyncio.Future[Any]: ...

    def is_leader(self, group_id: int) -> bool: ...

    def leader(self, group_id: int) -> int: ...

    def term(self, group_id: int) -> int: ...

    def transfer_leadership(self, group_id: int, target: int) -> None: ...

    def compact(self, group_id: int, index: int, data: bytes) -> None: ...


class GroupHandle:
    """A RaftPort bound to one group: the fence's `GroupRaft`."""

    def __init__(self, port: RaftPort, group: int) -> None:
        self.port = port
        self.group = group

    def propose(self, data: bytes, expected_term: int | None) -> asyncio.Future[Any]:
        return self.port.propose(self.group, data, expected_term=expected_term)

    def term(self) -> int:
        return self.port.term(self.group)

    def is_leader(self) -> bool:
        return self.port.is_leader(self.group)

    def leader(self) -> int:
        return self.port.leader(self.group)


async def thread_io(fn: Callable[[], T]) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, fn)


async def inline_io(fn: Callable[[], T]) -> T:
    return fn()
