"""The Raft core's Simulator, carrying brokers instead of its digest state machine.

WORKAROUND (impl/raft is not ours to edit): `Simulator` builds a `DigestStateMachine` per
group from a fixed group list, so this subclass overrides `_start` to let a node factory add
its own groups (the broker adds the controller and, as partitions are created, partition
groups), and `check` to look only at groups every live node hosts. Everything else (network,
MemStorage disks, crashes, cuts, trace digest, Raft invariants) is the real simulator's.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from impl.raft.host import MultiRaftHost, Proposal, StateMachine
from impl.raft.sim import Simulator
from impl.raft.storage import MemStorage

NodeFactory = Callable[["BrokerSimulator", int, MultiRaftHost], None]


class BrokerSimulator(Simulator):
    def __init__(self, node_factory: NodeFactory, **kwargs: Any) -> None:
        self.node_factory = node_factory
        super().__init__(groups=(), **kwargs)

    def _start(self, nid: int) -> None:
        sn = self.nodes[nid]
        sn.incarnation += 1
        host = MultiRaftHost(
            nid,
            self._sender(nid),
            random.Random(self.rng.getrandbits(64)),
            self.config,
            self.snapshot_interval,
        )
        sn.host = host
        sn.sms.clear()
        self._record(b"U", nid)
        self._push(self.now + 1 + self.rng.randrange(self.tick_interval), 0, nid, sn.incarnation, 0)
        self.node_factory(self, nid, host)
        host.process_ready()

    def add_group(self, nid: int, group: int, sm: StateMachine) -> None:
        """Add (or recover, after a restart) one group on a node from its simulated disk."""
        sn = self.nodes[nid]
        assert sn.host is not None
        storage = sn.storages.setdefault(group, MemStorage())
        sn.host.add_group(group, self.ids, storage, sm)
        if group not in self.group_ids:
            self.group_ids.append(group)
            self.group_ids.sort()

    def check(self, touched: int | None = None) -> None:
        assert self.checker is not None
        for g in self.group_ids:
            live = {
                nid: (sn.incarnation, sn.host.groups[g].node)
                for nid, sn in self.nodes.items()
                if sn.host is not None and g in sn.host.groups
            }
            self.checker.check(g, live)

    def next_event_time(self) -> int | None:
        return self._events[0][0] if self._events else None

    def propose_typed(
        self, nid: int, data: bytes, group: int, entry_type: int, expected_term: int | None
    ) -> Proposal:
        host = self._host(nid)
        p = host.propose(group, data, entry_type, expected_term)
        p.on_done(self._on_done(data))
        self._record(b"P", nid, group, p.index, p.term)
        host.process_ready()
        return p
