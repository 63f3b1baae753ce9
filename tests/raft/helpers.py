"""A hand-driven cluster of RaftNodes for scenario tests: messages are delivered only when the
test says so, so each paper scenario can be staged exactly."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator

from epochgc.impl.raft.messages import Entry, HardState, InitialState, Message, MsgType, Snapshot
from epochgc.impl.raft.node import Config, ProposalRefused, RaftNode, Ready
from epochgc.impl.raft.sim import Simulator
from epochgc.impl.raft.simtypes import Faults
from epochgc.impl.raft.storage import MemStorage

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


def faulty_run(seed: int, steps: int, disk: bool = False) -> Iterator[Simulator]:
    """A seeded simulator run of two groups under every network fault, with crashes (some
    between write and sync), restarts, proposals, compactions, isolation and healing between
    events; yields the simulator after each event, and closes it at the end."""
    r = random.Random(seed)
    faults = Faults(drop=0.05, duplicate=0.05, reorder=0.1, crash_mid_write=0.3,
                    replay=0.02, batch=0.2)
    s = Simulator(3, seed=seed, groups=(1, 2), faults=faults, snapshot_interval=7, disk=disk)
    try:
        yield s
        for i in range(steps):
            x = r.random()
            live = s.live()
            if x < 0.01 and len(live) > 1:
                s.crash(r.choice(live))
            elif x < 0.03:
                down = [n for n in s.ids if n not in live]
                if down:
                    s.restart(r.choice(down))
            elif x < 0.1:
                g = r.choice((1, 2))
                lead = s.leader(g)
                if lead is not None:
                    with contextlib.suppress(ProposalRefused):
                        s.propose(lead, b"v%d" % i, group=g)
            elif x < 0.12 and live:
                s.compact(r.choice(live), r.choice((1, 2)))
            elif x < 0.13:
                s.isolate(r.choice(s.ids))
            elif x < 0.15:
                s.heal()
            if not s.step():
                return
            yield s
    finally:
        s.close()
