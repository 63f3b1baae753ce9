"""A hand-driven cluster of RaftNodes for scenario tests: messages are delivered only when the
test says so, so each paper scenario can be staged exactly."""

from __future__ import annotations

import random
from collections.abc import Callable

from impl.raft.messages import Entry, HardState, InitialState, Message, MsgType, Snapshot
from impl.raft.node import Config, RaftNode, Ready
from impl.raft.storage import MemStorage

CFG = Config(election_tick=10, heartbeat_tick=1, pre_vote=True, check_quorum=True)


def log_of(terms: list[int]) -> tuple[Entry, ...]:
    """Entries 1..n with the given terms (data names index and term for readable failures)."""
    return tuple(Entry(i + 1, t, 1, f"{i + 1}@{t}".encode()) for i, t in enumerate(terms))


class Cluster:
    def __init__(
        self,
        n: int = 3,
        logs: dict[int, list[int]] | None = None,
        terms: dict[int, int] | None = None,
        config: Config = CFG,
        seed: int = 0,
    ) -> None:
        self.ids = list(range(1, n + 1))
        self.config = config
        self.rng = random.Random(seed)
        self.storages = {i: MemStorage() for i in self.ids}
        self.nodes: dict[int, RaftNode] = {}
        self.applied: dict[int, list[Entry]] = {i: [] for i in self.ids}
        self.outbox: list[Message] = []
        self.dropped: set[tuple[int, int]] = set()
        logs = logs or {}
        terms = terms or {}
        for i in self.ids:
            ents = log_of(logs.get(i, []))
            term = terms.get(i, ents[-1].term if ents else 0)
            init = InitialState(HardState(term, 0, 0), Snapshot(), ents)
            self.storages[i].write(init.hard_state, None, ents)
            self.storages[i].sync()
            self.nodes[i] = RaftNode(i, self.ids, init, random.Random(seed * 100 + i), config)

    def restart(self, i: int) -> None:
        self.nodes[i] = RaftNode(
            i, self.ids, self.storages[i].load(), random.Random(self.rng.random()), self.config
        )

    def process(self, i: int) -> Ready | None:
        n = self.nodes[i]
        if not n.has_ready():
            return None
        rd = n.ready()
        st = self.storages[i]
        st.write(rd.hard_state, rd.snapshot, rd.entries, rd.compacted)
        st.sync()
        self.outbox.extend(rd.early_messages + rd.messages)
        self.applied[i].extend(rd.committed_entries)
        n.advance(rd)
        return rd

    def process_all(self) -> None:
        for i in self.ids:
            self.process(i)

    def deliver(
        self, keep: Callable[[Message], bool] = lambda m: True, max_rounds: int = 1000
    ) -> int:
        """Deliver messages until none are left; returns how many were delivered."""
        count = 0
        for _ in range(max_rounds):
            self.process_all()
            if not self.outbox:
                return count
            batch, self.outbox = self.outbox, []
            for m in batch:
                if (m.frm, m.to) in self.dropped or not keep(m):
                    continue
                self.nodes[m.to].step(m)
                count += 1
        raise AssertionError("messages did not settle")

    def cut(self, a: int, b: int) -> None:
        self.dropped |= {(a, b), (b, a)}

    def isolate(self, a: int) -> None:
        for b in self.ids:
            if b != a:
                self.cut(a, b)

    def heal(self) -> None:
        self.dropped.clear()

    def campaign(self, i: int) -> None:
        """Make node i time out now (with pre-vote if configured) and settle."""
        n = self.nodes[i]
        for _ in range(n.randomized_timeout - n.election_elapsed):
            n.tick()
        self.deliver()

    def tick_all(self, ticks: int, deliver: bool = True) -> None:
        for _ in range(ticks):
            for n in self.nodes.values():
                n.tick()
            if deliver:
                self.deliver()

    def terms(self, i: int) -> list[int]:
        log = self.nodes[i].log
        return [e.term for e in log.entries]

    def msgs_of(self, typ: MsgType) -> list[Message]:
        return [m for m in self.outbox if m.type is typ]
