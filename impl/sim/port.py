"""The simulator's RaftPort: proposals become futures on the SimLoop; a crashed node's
outstanding futures fail (their fate is unknown, exactly as for a killed process)."""

from __future__ import annotations

import asyncio
from typing import Any

from epochgc.impl.raft.host import LeadershipLost, MultiRaftHost, Proposal, StateMachine
from epochgc.impl.raft.messages import ENTRY_NORMAL
from epochgc.impl.raft.node import NotLeader
from epochgc.impl.sim.loop import SimLoop
from epochgc.impl.sim.network import BrokerSimulator


class SimRaftPort:
    def __init__(self, sim: BrokerSimulator, nid: int, host: MultiRaftHost, loop: SimLoop):
        self.sim = sim
        self.node_id = nid
        self.host = host
        self.loop = loop
        self._pending: set[asyncio.Future[Any]] = set()

    @property
    def alive(self) -> bool:
        return self.sim.nodes[self.node_id].host is self.host

    def add_group(self, group_id: int, sm: StateMachine) -> None:
        if self.alive:
            self.sim.add_group(self.node_id, group_id, sm)

    def remove_group(self, group_id: int) -> None:
        if self.alive:
            self.sim.remove_group(self.node_id, group_id)

    def removed(self, group_id: int) -> bool:
        return group_id in self.sim.nodes[self.node_id].removed

    def propose(
        self, group_id: int, data: bytes, entry_type: int = ENTRY_NORMAL,
        expected_term: int | None = None,
    ) -> asyncio.Future[Any]:
        if not self.alive:
            raise NotLeader(0)
        p = self.sim.propose(self.node_id, data, group_id, expected_term, entry_type)
        fut: asyncio.Future[Any] = self.loop.create_future()
        self._pending.add(fut)
        fut.add_done_callback(self._pending.discard)

        def settle(done: Proposal) -> None:
            if fut.done():
                return
            if done.error is None:
                fut.set_result(done.result)
            else:
                fut.set_exception(done.error)

        p.on_done(settle)
        return fut

    def fail_all(self) -> None:
        for fut in list(self._pending):
            if not fut.done():
                fut.set_exception(LeadershipLost("node crashed"))

    def is_leader(self, group_id: int) -> bool:
        return self.alive and group_id in self.host.groups and self.host.is_leader(group_id)

    def leader(self, group_id: int) -> int:
        return self.host.leader(group_id) if group_id in self.host.groups else 0

    def term(self, group_id: int) -> int:
        return self.host.term(group_id) if group_id in self.host.groups else 0

    def transfer_leadership(self, group_id: int, target: int) -> None:
        self.sim.transfer_leadership(self.node_id, target, group_id)

    def compact(self, group_id: int, index: int, data: bytes) -> None:
        self.host.compact(group_id, index, data)
        self.host.process_ready()
