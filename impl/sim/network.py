"""The Raft core's Simulator carrying brokers instead of its digest state machine: no
digest groups; every time a node (re)starts, its broker adds its own groups (the controller
and, as partitions are created, partition groups) through the simulator's `on_start` hook.
Everything else (network, MemStorage or DiskStorage disks, crashes, cuts, trace digest, Raft
invariants) is the real simulator's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from epochgc.impl.raft.host import MultiRaftHost
from epochgc.impl.raft.sim import Simulator

NodeFactory = Callable[["BrokerSimulator", int, MultiRaftHost], None]


class BrokerSimulator(Simulator):
    def __init__(self, node_factory: NodeFactory, **kwargs: Any) -> None:
        def on_start(sim: Simulator, nid: int, host: MultiRaftHost) -> None:
            assert isinstance(sim, BrokerSimulator)
            node_factory(sim, nid, host)

        super().__init__(groups=(), on_start=on_start, **kwargs)
