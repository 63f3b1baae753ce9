"""Deterministic simulator: the real RaftNode + MultiRaftHost over an in-memory network and an
in-memory disk (MemStorage), driven by a logical clock and one seeded random.Random.

Faults: message drop, duplication, delay and reordering, link cuts, crashes (optionally in
the middle of a write, losing whatever was not synced) and restarts. Every decision is drawn
from the simulator's rng and events are ordered by (time, sequence), so the same seed and the
same calls give the same trace, byte for byte (`trace_digest`).

Drive it with `step()` (one event), `run(n)` or `run_until(pred)`; between steps call
`propose`, `crash`, `restart`, `cut`, `heal`, `transfer_leadership`.
"""

from __future__ import annotations

import hashlib
import heapq
import random
import struct
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from impl.raft.codec import decode_message, encode_message
from impl.raft.host import MultiRaftHost, Proposal, StateMachine
from impl.raft.invariants import InvariantChecker
from impl.raft.messages import ENTRY_NORMAL, Entry, Message, Snapshot
from impl.raft.node import Config, Role
from impl.raft.storage import MemStorage

_SNAP = struct.Struct(">Q32s")


class DigestStateMachine:
    """A state machine whose state is a hash chain of everything applied: two replicas agree
    on the digest at an index iff they applied the same entries up to it."""

    def __init__(self, on_apply: Callable[[Entry, bytes], None] | None = None) -> None:
        self.index = 0
        self.digest = bytes(32)
        self.on_apply = on_apply
        self.count = 0

    def apply(self, entry: Entry) -> bytes:
        h = hashlib.sha256(self.digest)
        h.update(struct.pack(">QQI", entry.index, entry.term, entry.type))
        h.update(entry.data)
        self.digest = h.digest()
        self.index = entry.index
        self.count += 1
        if self.on_apply is not None:
            self.on_apply(entry, self.digest)
        return self.digest

    def snapshot(self) -> bytes:
        return _SNAP.pack(self.index, self.digest)

    def restore(self, snapshot: Snapshot) -> None:
        if snapshot.index == 0:
            self.index, self.digest = 0, bytes(32)
        else:
            self.index, self.digest = _SNAP.unpack(snapshot.data)


@dataclass
class Faults:
    drop: float = 0.0  # probability a message is lost
    duplicate: float = 0.0  # probability a message is delivered twice
    reorder: float = 0.0  # probability a message gets an extra random delay
    min_latency: int = 1  # time units (a tick is `Simulator.tick_interval` units)
    max_latency: int = 3
    reorder_window: int = 30
    crash_mid_write: float = 0.0  # probability a crash happens between write and sync


@dataclass
class SimNode:
    id: int
    storages: dict[int, MemStorage]
    host: MultiRaftHost | None = None
    sms: dict[int, DigestStateMachine] = field(default_factory=dict)
    incarnation: int = 0

    @property
    def up(self) -> bool:
        return self.host is not None


class Simulator:
    def __init__(
        self,
        n_nodes: int = 3,
        seed: int = 0,
        groups: Iterable[int] = (1,),
        config: Config | None = None,
        faults: Faults | None = None,
        snapshot_interval: int = 0,
        check: bool = True,
        tick_interval: int = 10,
        on_start: Callable[[Simulator, int, MultiRaftHost], None] | None = None,
    ) -> None:
        """`groups` get a DigestStateMachine each. `on_start(sim, node_id, host)` runs every
        time a node (re)starts, after those, so an application can add its own groups with
        `add_group` (recovering them from the node's simulated disks after a restart)."""
        self.rng = random.Random(seed)
        self.ids = list(range(1, n_nodes + 1))
        self.group_ids = sorted(groups)  # every group (checked); grows with add_group
        self.digest_groups = list(self.group_ids)  # the groups the simulator itself runs
        self.config = config or Config()
        self.faults = faults or Faults()
        self.snapshot_interval = snapshot_interval
        self.tick_interval = tick_interval
        self.on_start = on_start
        self.checker: InvariantChecker | None = InvariantChecker() if check else None
        self.now = 0
        self.steps = 0
        self.cuts: set[tuple[int, int]] = set()
        self.committed_entries = 0  # entries applied by the leader-side proposals' groups
        self._events: list[tuple[int, int, int, int, int, int, bytes]] = []
        self._seq = 0
        self._link_tail: dict[tuple[int, int], int] = {}  # last FIFO delivery time per link
        self._trace = hashlib.sha256()
        self.nodes: dict[int, SimNode] = {
            i: SimNode(i, {g: MemStorage() for g in self.group_ids}) for i in self.ids
        }
        for i in self.ids:
            self._start(i)

    # ---- lifecycle -----------------------------------------------------------------------

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
        for g in self.digest_groups:
            sm = DigestStateMachine(self._apply_hook(nid, g))
            sn.sms[g] = sm
            host.add_group(g, self.ids, sn.storages[g], sm)
        host.on_applied = self._app_apply_hook(nid)
        sn.host = host
        self._record(b"U", nid)
        self._push(self.now + 1 + self.rng.randrange(self.tick_interval), 0, nid, sn.incarnation, 0)
        if self.on_start is not None:
            self.on_start(self, nid, host)
        host.process_ready()

    def add_group(self, nid: int, group: int, sm: StateMachine) -> None:
        """Add (or, after a restart, recover) one group on a live node from its simulated disk;
        the group's voters are all simulated nodes."""
        sn = self.nodes[nid]
        storage = sn.storages.setdefault(group, MemStorage())
        self._host(nid).add_group(group, self.ids, storage, sm)
        if group not in self.group_ids:
            self.group_ids.append(group)
            self.group_ids.sort()

    def crash(self, nid: int, mid_write: bool | None = None) -> None:
        """Stop a node; unsynced writes are lost (a seeded prefix may survive)."""
        sn = self.nodes[nid]
        if sn.host is None:
            return
        if mid_write is None:
            mid_write = self.rng.random() < self.faults.crash_mid_write
        if mid_write:
            sn.host.process_ready(crash_before_sync=True)
        for st in sn.storages.values():
            st.crash(self.rng)
        sn.host = None
        self._record(b"C", nid)

    def restart(self, nid: int) -> None:
        if self.nodes[nid].host is None:
            self._start(nid)

    def cut(self, a: int, b: int) -> None:
        self.cuts.add((min(a, b), max(a, b)))
        self._record(b"X", a, b)

    def heal(self, a: int | None = None, b: int | None = None) -> None:
        if a is None or b is None:
            self.cuts.clear()
        else:
            self.cuts.discard((min(a, b), max(a, b)))
        self._record(b"H", a or 0, b or 0)

    def isolate(self, nid: int) -> None:
        for other in self.ids:
            if other != nid:
                self.cut(nid, other)

    # ---- client operations ----------------------------------------------------------------

    def propose(
        self,
        nid: int,
        data: bytes,
        group: int = 1,
        expected_term: int | None = None,
        entry_type: int = ENTRY_NORMAL,
    ) -> Proposal:
        """Propose at node nid (raises ProposalRefused if it is not the leader)."""
        host = self._host(nid)
        p = host.propose(group, data, entry_type, expected_term)
        p.on_done(self._on_done(data))
        self._record(b"P", nid, group, p.index, p.term)
        host.process_ready()
        return p

    def transfer_leadership(self, nid: int, target: int, group: int = 1) -> None:
        host = self._host(nid)
        host.transfer_leadership(group, target)
        host.process_ready()

    def leader(self, group: int = 1) -> int | None:
        """The live leader with the highest term, if any."""
        best: tuple[int, int] | None = None
        for nid, sn in self.nodes.items():
            grp = None if sn.host is None else sn.host.groups.get(group)
            if grp is not None:  # a node may not have learnt of a group created at runtime
                n = grp.node
                if n.role is Role.LEADER and (best is None or n.term > best[0]):
                    best = (n.term, nid)
        return None if best is None else best[1]

    def live(self) -> list[int]:
        return [i for i, sn in self.nodes.items() if sn.host is not None]

    def host(self, nid: int) -> MultiRaftHost:
        return self._host(nid)

    # ---- running -------------------------------------------------------------------------

    def step(self) -> bool:
        """Process one event (a tick or a delivery); False if nothing is scheduled."""
        if not self._events:
            return False
        time, _, kind, a, b, c, payload = heapq.heappop(self._events)
        self.now = max(self.now, time)
        self.steps += 1
        if kind == 0:  # tick of node a, incarnation b
            sn = self.nodes[a]
            if sn.host is None or sn.incarnation != b:
                return True
            self._record(b"T", a)
            sn.host.tick()
            sn.host.process_ready()
            self._push(self.now + self.tick_interval, 0, a, b, 0)
            touched = a
        else:  # delivery from a to b in group c
            sn = self.nodes[b]
            if sn.host is None or (min(a, b), max(a, b)) in self.cuts:
                self._record(b"L", a, b, c, zlib.crc32(payload))
                return True
            self._record(b"D", a, b, c, zlib.crc32(payload))
            sn.host.receive(c, decode_message(payload))
            sn.host.process_ready()
            touched = b
        if self.checker is not None:
            self.check(touched)
        return True

    def run(self, steps: int) -> None:
        for _ in range(steps):
            if not self.step():
                return

    def run_until(self, pred: Callable[[], bool], max_steps: int = 100_000) -> bool:
        for _ in range(max_steps):
            if pred():
                return True
            if not self.step():
                return pred()
        return pred()

    def run_for(self, time_units: int) -> None:
        end = self.now + time_units
        while self._events and self._events[0][0] <= end:
            self.step()
        self.now = max(self.now, end)

    def check(self, touched: int | None = None) -> None:
        """Run every invariant over every group, on the live nodes that host it."""
        assert self.checker is not None
        for g in self.group_ids:
            live = {
                nid: (sn.incarnation, sn.host.groups[g].node)
                for nid, sn in self.nodes.items()
                if sn.host is not None and g in sn.host.groups
            }
            self.checker.check(g, live)

    def next_event_time(self) -> int | None:
        """Logical time of the next scheduled event (None if nothing is scheduled)."""
        return self._events[0][0] if self._events else None

    def check_converged(self, group: int = 1) -> None:
        """Every acknowledged proposal is applied on every live node."""
        assert self.checker is not None
        applied = {
            nid: sn.host.applied_index(group)
            for nid, sn in self.nodes.items()
            if sn.host is not None and group in sn.host.groups
        }
        self.checker.check_acked_applied(group, applied)

    def trace_digest(self) -> str:
        return self._trace.copy().hexdigest()

    # ---- internals -----------------------------------------------------------------------

    def _host(self, nid: int) -> MultiRaftHost:
        host = self.nodes[nid].host
        if host is None:
            raise RuntimeError(f"node {nid} is down")
        return host

    def _sender(self, src: int) -> Callable[[int, int, Message], None]:
        def send(to: int, group: int, msg: Message) -> None:
            payload = encode_message(msg)
            f = self.faults
            if (min(src, to), max(src, to)) in self.cuts or (f.drop and self.rng.random() < f.drop):
                self._record(b"d", src, to, group, zlib.crc32(payload))
                return
            copies = 2 if f.duplicate and self.rng.random() < f.duplicate else 1
            for _ in range(copies):
                at = self.now + self.rng.randint(f.min_latency, f.max_latency)
                if f.reorder and self.rng.random() < f.reorder:
                    at += self.rng.randint(1, f.reorder_window)  # may overtake or be overtaken
                else:
                    # Like TCP, a link is FIFO unless the reorder fault fires.
                    at = max(at, self._link_tail.get((src, to), 0))
                    self._link_tail[(src, to)] = at
                self._push(at, 1, src, to, group, payload)

        return send

    def _apply_hook(self, nid: int, group: int) -> Callable[[Entry, bytes], None]:
        def hook(entry: Entry, digest: bytes) -> None:
            self._record(b"A", nid, group, entry.index, entry.term)
            if self.checker is not None:
                self.checker.on_apply(nid, group, entry, digest)

        return hook

    def _app_apply_hook(self, nid: int) -> Callable[[int, Entry], None]:
        # Application groups (added with add_group) are checked by entry; the simulator's own
        # digest groups are checked by their state digest in _apply_hook.
        def hook(group: int, entry: Entry) -> None:
            if group in self.digest_groups:
                return
            self._record(b"A", nid, group, entry.index, entry.term)
            if self.checker is not None:
                self.checker.on_apply(nid, group, entry, None)

        return hook

    def _on_done(self, data: bytes) -> Callable[[Proposal], None]:
        def done(p: Proposal) -> None:
            if p.error is None:
                self.committed_entries += 1
                if self.checker is not None:
                    self.checker.on_ack(p.group, p.index, p.term, data)

        return done

    def _push(self, time: int, kind: int, a: int, b: int, c: int, payload: bytes = b"") -> None:
        self._seq += 1
        heapq.heappush(self._events, (time, self._seq, kind, a, b, c, payload))

    def _record(self, tag: bytes, *nums: int) -> None:
        self._trace.update(tag + struct.pack(f">Q{len(nums)}Q", self.now, *nums))
