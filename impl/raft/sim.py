"""Deterministic simulator: the real RaftNode + MultiRaftHost over an in-memory network and
either an in-memory disk (MemStorage) or the real DiskStorage on a temporary directory (tmpfs
where present), driven by a logical clock and one seeded random.Random.

Faults: message drop, duplication, delay and reordering, link cuts (both ways or one way),
late replays of old messages, several inputs batched before one Ready (as the asyncio server
does), crashes (optionally in the middle of a write, losing whatever was not synced) and
restarts; on the disk log also a process dying at any file-system call (`Faults.kill_at_call`,
inside a write too, then a power loss or a plain kill) and ENOSPC on snapshot writes
(`Faults.enospc_snapshot`). A restart is a new host recovering every group from its disk.
Every decision is drawn from the simulator's rng and events are ordered by (time, sequence),
so the same seed and the same calls give the same trace, byte for byte (`trace_digest`).

After every event the Raft invariants run over every group (impl/raft/invariants.py), and a
restart checks that the recovered state keeps everything the node had made durable (its term
and vote, every entry up to its last synced index, a commit index within its log); a restart
the storage or the core refuses is an InvariantViolation too (`RestartRefused`).

Drive it with `step()` (one event), `run(n)` or `run_until(pred)`; between steps call
`propose`, `compact`, `crash`, `restart`, `cut`, `cut_one_way`, `heal`, `replay_old`,
`transfer_leadership`.

This module holds the event loop, a node's start and restart, the client calls, the Raft
checks and the trace. Its parts, each in its own module: the network (simnet.py, a mixin:
cuts, replays, the send path), the disks (simdisk.py, a mixin: opening storage, crashes,
dying processes, the recovery check), the killable file system (simfs.py), the digest state
machine (simapp.py) and the records they share (simtypes.py: `Faults`, `SimNode`,
`DurableMark`, event kinds).
"""

from __future__ import annotations

import hashlib
import heapq
import random
import shutil
import struct
import weakref
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator

from epochgc.impl.raft.codec import decode_message
from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.fileio import CrashFS
from epochgc.impl.raft.groupcommit import GroupCommit
from epochgc.impl.raft.host import Group, MultiRaftHost, Proposal, StateMachine
from epochgc.impl.raft.invariants import InvariantChecker, InvariantViolation
from epochgc.impl.raft.messages import ENTRY_NORMAL, Entry, Message, MsgType
from epochgc.impl.raft.node import Config, RaftNode, Ready, Role
from epochgc.impl.raft.simapp import DigestStateMachine
from epochgc.impl.raft.simdisk import SimDisks, _tmp_root
from epochgc.impl.raft.simfs import _FS_PARAM, _GC_PARAM, ProcessKilled
from epochgc.impl.raft.simnet import SimNetwork
from epochgc.impl.raft.simtypes import (
    _FLUSH,
    _TICK,
    Faults,
    RestartRefused,
    SimNode,
    _mark,
    replica_key,
)
from epochgc.impl.raft.storage import StorageFailed

_RECORD = [struct.Struct(f">Q{n}Q") for n in range(8)]  # a trace record: time + n numbers
_DECODED = 4096  # decoded payloads kept (cleared when full)
_TRACE_BATCH = 256  # trace records hashed at once

# `stats` keys of the events by kind (counted with `count_net`): where the time goes.
_EV_DELIVERED = {t: f"ev_{t.name.lower()}" for t in MsgType}


class _SimHost(MultiRaftHost):
    """The real host; the simulator only observes it: after every complete batch it records
    what each group made durable, and it counts compactions and snapshot installs."""

    def __init__(self, sim: Simulator, sn: SimNode, *args: object, **kw: object) -> None:
        super().__init__(*args, **kw)  # type: ignore[arg-type]
        self._sim = sim
        self._sn = sn
        # Groups given an input since the simulator's last Raft check: every change of a
        # node's state goes through a host method that marks its group dirty first.
        self.touched: set[int] = set()

    def process_ready(self, crash_before_sync: bool = False) -> int:
        self.touched |= self._dirty
        self._batch: list[Group] = []
        n = super().process_ready(crash_before_sync)
        if n and not crash_before_sync:
            # Only a group in the batch can have changed what it made durable (any input
            # to a group makes it ready); one removed during the batch has no mark any more.
            durable, groups = self._sn.durable, self.groups
            for g in self._batch:
                if groups.get(g.id) is g:
                    durable[g.id] = _mark(g)
        return n

    def _apply(self, g: Group, rd: Ready) -> None:
        self._batch.append(g)
        if rd.snapshot is not None:
            self._sim.stats["snapshot_installs"] += 1
        if rd.compacted is not None:
            self._sim.stats["compactions"] += 1
        super()._apply(g, rd)


class Simulator(SimNetwork, SimDisks):
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
        disk: bool = False,
        disk_dir: str | None = None,
        segment_bytes: int = 4096,
        check_durability: bool = True,
        group_commit: bool | str = False,
    ) -> None:
        """`groups` get a DigestStateMachine each. `on_start(sim, node_id, host)` runs every
        time a node (re)starts, after those, so an application can add its own groups with
        `add_group` (recovering them from the node's simulated disks after a restart).

        `disk`: every group of every node runs on the real DiskStorage under `disk_dir` (a
        fresh temporary directory if None, removed with the simulator), with small segments
        so that segment rolls and deletions are frequent. `group_commit`: a node's groups
        share one GroupCommit (one barrier per Ready batch), as the asyncio server's do;
        True or "syncfs" (one syncfs), "parallel" (the batch's fsyncs issued concurrently).

        `check_durability=False` leaves only the end-to-end checks (the Raft invariants,
        state-machine safety, acknowledged entries): to see what a lost write does later."""
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
        # (group, node) -> replica_key of that replica at the group's last check
        self._checked: dict[tuple[int, int], tuple[object, ...]] = {}
        self.check_durability = check_durability
        self.now = 0
        self.steps = 0
        self.cuts: set[tuple[int, int]] = set()
        self.one_way: set[tuple[int, int]] = set()  # (from, to) links that lose everything
        self.committed_entries = 0  # entries applied by the leader-side proposals' groups
        self.stats: Counter[str] = Counter()
        # Also count what the network faults did (net_* in `stats`) and the events by kind
        # (ev_tick, ev_flush, ev_<message type> delivered): a harness's coverage and profile.
        self.count_net = False
        self._last_send: tuple[int, int, int, int, bytes] | None = None
        self._decoded: dict[bytes, Message] = {}  # payload -> its decoded message
        self._events: list[tuple[int, int, int, int, int, int, bytes]] = []
        self._seq = 0
        self._link_tail: dict[tuple[int, int], int] = {}  # last FIFO delivery time per link
        self._history: list[tuple[int, int, int, bytes]] = []  # (from, to, group, payload)
        self._trace = hashlib.sha256()
        # Trace records not yet hashed: hashed in batches (one update per record was ~1% of
        # a harness step); the digest of the concatenation is the same.
        self._trace_buf: list[bytes] = []
        self.tracing = True  # see disable_trace
        self.disk = disk
        self.segment_bytes = segment_bytes
        self.disk_dir = ""
        if disk:
            self.disk_dir = disk_dir or _tmp_root()
            if disk_dir is None:
                weakref.finalize(self, shutil.rmtree, self.disk_dir, True)
        # One file system per node (all its groups' directories): what a power loss keeps.
        self.power_loss = disk and CrashFS is not None and _FS_PARAM
        self._fs: dict[int, CrashFS] = {}
        self.group_commit = bool(disk and group_commit and GroupCommit is not None and _GC_PARAM)
        self.group_commit_mode = group_commit if isinstance(group_commit, str) else "syncfs"
        self._gc: dict[int, GroupCommit] = {}
        self.nodes: dict[int, SimNode] = {i: SimNode(i, {}) for i in self.ids}
        for i in self.ids:
            self._start(i)

    # ---- lifecycle -----------------------------------------------------------------------

    def _start(self, nid: int) -> None:
        sn = self.nodes[nid]
        sn.incarnation += 1
        sn.flush_pending = False
        host = _SimHost(
            self,
            sn,
            nid,
            self._sender(nid),
            random.Random(self.rng.getrandbits(64)),
            self.config,
            self.snapshot_interval,
        )
        sn.host = host  # before any group is recovered: add_group needs the live host
        try:
            for g in self.digest_groups:
                sm = DigestStateMachine(self._apply_hook(nid, g))
                sn.sms[g] = sm
                self._add(sn, host, g, sm)
        except ProcessKilled:  # died in recovery: down until the next restart
            self._died(nid, "killed in recovery")
            return
        except StorageFailed:  # recovery's own fsync failed (Faults.eio_fsync): down
            self._died(nid, "storage failed in recovery")
            return
        host.on_applied = self._app_apply_hook(nid)
        self._record(b"U", nid)
        self._push(self.now + 1 + self.rng.randrange(self.tick_interval), _TICK, nid,
                   sn.incarnation, 0)
        if self.on_start is not None:
            self.on_start(self, nid, host)
        self._process(nid)

    def add_group(self, nid: int, group: int, sm: StateMachine) -> None:
        """Add (or, after a restart, recover) one group on a live node from its simulated disk;
        the group's voters are all simulated nodes."""
        sn = self.nodes[nid]
        self._add(sn, self._host(nid), group, sm)
        if group not in self.group_ids:
            self.group_ids.append(group)
            self.group_ids.sort()

    def remove_group(self, nid: int, group: int) -> None:
        """Stop a group on a live node and drop its simulated disk (its partition was
        deleted); the tombstone keeps it from coming back after a restart."""
        sn = self.nodes[nid]
        sn.removed.add(group)
        self._host(nid).remove_group(group)
        st = sn.storages.pop(group, None)
        sn.durable.pop(group, None)
        # (Under CrashFS a power loss may undo recent unlinks inside the directory: leave it;
        # the tombstone alone keeps the group from being opened again.)
        if isinstance(st, DiskStorage) and not self.power_loss:
            shutil.rmtree(st.dir, ignore_errors=True)

    def _add(self, sn: SimNode, host: MultiRaftHost, group: int, sm: StateMachine) -> None:
        storage = sn.storages.get(group)
        if storage is None:
            storage = sn.storages[group] = self._open_storage(sn.id, group)
        try:
            init = storage.load()
            self._check_recovered(sn, group, init)
            host.add_group(group, self.ids, storage, sm)
        except InvariantViolation:
            raise
        except Exception as e:  # StorageCorruption, LogInvariantError, ValueError, ...
            if isinstance(e, StorageFailed) and self.faults.eio_fsync:
                raise  # injected: the node goes down (_start)
            self.stats["refused_restarts"] += 1
            raise RestartRefused(
                f"node {sn.id} group {group} refused to restart (incarnation"
                f" {sn.incarnation}): {type(e).__name__}: {e}"
            ) from e
        sn.durable[group] = _mark(host.groups[group])  # what it recovered is durable

    def restart(self, nid: int) -> None:
        if self.nodes[nid].host is None:
            self.stats["restarts"] += 1
            self._start(nid)

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
        self._ready(nid)
        return p

    def compact(self, nid: int, group: int = 1) -> int:
        """Compact a simulator-run group at its applied index (the log may run further);
        returns that index (0: nothing to compact)."""
        host = self._host(nid)
        sm = self.nodes[nid].sms[group]
        index = host.applied_index(group)
        if index <= host.groups[group].node.log.snapshot.index:
            return 0
        host.compact(group, index, sm.snapshot())
        self._record(b"K", nid, group, index)
        self._ready(nid)
        return index

    def transfer_leadership(self, nid: int, target: int, group: int = 1) -> None:
        host = self._host(nid)
        host.transfer_leadership(group, target)
        self._ready(nid)

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
        """Process one event (a tick, a delivery or a batched Ready); False if nothing is
        scheduled."""
        if not self._events:
            return False
        time, _, kind, a, b, c, payload = heapq.heappop(self._events)
        if time > self.now:
            self.now = time
        self.steps += 1
        if kind == _TICK:  # tick of node a, incarnation b
            sn = self.nodes[a]
            if sn.host is None or sn.incarnation != b:
                return True
            if self.count_net:
                self.stats["ev_tick"] += 1
            self._record(b"T", a)
            sn.host.tick()
            self._ready(a)
            self._push(self.now + self.tick_interval, _TICK, a, b, 0)
            touched = a
        elif kind == _FLUSH:  # the batched Ready of node a, incarnation b
            sn = self.nodes[a]
            if sn.host is None or sn.incarnation != b:
                return True
            self._record(b"F", a)
            if self.count_net:
                self.stats["ev_flush"] += 1
            sn.flush_pending = False
            self._process(a)
            touched = a
        else:  # delivery from a to b in group c
            sn = self.nodes[b]
            if (
                sn.host is None
                or (self.cuts and (min(a, b), max(a, b)) in self.cuts)
                or (self.one_way and (a, b) in self.one_way)
            ):
                self._record(b"L", a, b, c, zlib.crc32(payload))
                if self.count_net:
                    self.stats["net_lost"] += 1
                return True
            self._record(b"D", a, b, c, zlib.crc32(payload))
            # Heartbeats and their answers repeat byte for byte: decode each payload once
            # (a Message is immutable, so one object may be delivered many times).
            msg = self._decoded.get(payload)
            if msg is None:
                if len(self._decoded) >= _DECODED:
                    self._decoded.clear()
                msg = self._decoded[payload] = decode_message(payload)
            if self.count_net:
                self.stats[_EV_DELIVERED[msg.type]] += 1
            sn.host.receive(c, msg)
            self._ready(b)
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
        """Run every invariant over every group, on the live nodes that host it.

        A group is checked only if one of its live replicas changed since it was last
        checked: the checks are a function of (incarnation, role, term, commit, snapshot,
        log) of those replicas and of the group's own history, which only a check of that
        group changes. A replica is compared by `replica_key`, its log by its version, which
        every RaftLog mutation of snapshot, entries or commit bumps (`replica_state` is the
        from-scratch view a test compares it with after every event).

        After a simulator event (`touched` given) only the replicas given an input since the
        last check are compared: every change of a node's state goes through a host method
        that marks its group dirty, a node that went down leaves the others as checked (a
        check of fewer replicas cannot fail where the one of more passed) and one that came
        up gave each of its groups an input. A call without `touched` (the harness once per
        step, tests) compares every replica, so a state changed behind the host's back is
        still seen."""
        checker = self.checker
        assert checker is not None
        keys = self._checked
        due: set[int] = set()
        for nid, sn in self.nodes.items():
            host = sn.host
            if host is None:
                continue
            processed: set[int] = set()  # groups whose Ready ran since the last check
            if isinstance(host, _SimHost) and host.touched:
                processed, host.touched = host.touched, set()
            marked: Iterable[int]
            if touched is None:
                marked = host.groups.keys()
            else:  # and inputs whose Ready is still batched
                marked = (processed | host._dirty) if processed else host._dirty
            if not marked:
                continue
            inc, groups = sn.incarnation, host.groups
            for g in marked:
                grp = groups.get(g)
                if grp is not None and g not in due and keys.get((g, nid)) != replica_key(
                        inc, grp.node):
                    due.add(g)
        if not due:
            return
        live = [(nid, sn.incarnation, sn.host) for nid, sn in self.nodes.items()
                if sn.host is not None]
        for g in sorted(due):
            nodes: dict[int, tuple[int, RaftNode]] = {}
            for nid, inc, host in live:
                grp = host.groups.get(g)
                if grp is not None:
                    n = grp.node
                    nodes[nid] = (inc, n)
                    keys[(g, nid)] = replica_key(inc, n)
            checker.check(g, nodes)

    def replica_state(self) -> dict[tuple[int, int], tuple[object, ...]]:
        """(group, node) -> the state the checks read, built from scratch: role, term,
        commit, snapshot and the whole log. For tests of the version-keyed skip in check."""
        return {(g, nid): (inc, n, n.role, n.term, n.log.committed, n.log.snapshot,
                           tuple(n.log.entries))
                for g, nid, inc, n in self.live_replicas()}

    def live_replicas(self) -> Iterator[tuple[int, int, int, RaftNode]]:
        """(group, node id, incarnation, Raft node) of every group on every live node."""
        for nid, sn in self.nodes.items():
            if sn.host is not None:
                for g, grp in sn.host.groups.items():
                    yield g, nid, sn.incarnation, grp.node

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
        if not self.tracing:
            raise RuntimeError("this simulator's trace was turned off (disable_trace)")
        self._flush_trace()
        return self._trace.copy().hexdigest()

    def disable_trace(self) -> None:
        """Keep no trace from now on, for a caller that never asks for the digest (the
        conformance harness: recording and hashing ~34 records per harness step was a few
        percent of it). Nothing else reads the trace; the events are the same."""
        self.tracing = False
        self._record = _discard  # type: ignore[method-assign]
        self._trace_buf.clear()

    # ---- internals -----------------------------------------------------------------------

    def _host(self, nid: int) -> MultiRaftHost:
        host = self.nodes[nid].host
        if host is None:
            raise RuntimeError(f"node {nid} is down")
        return host

    def _ready(self, nid: int) -> None:
        """After an input: process the Ready now, or (batch fault) let more inputs gather
        first, as the asyncio server does between loop iterations."""
        sn = self.nodes[nid]
        assert sn.host is not None
        if sn.flush_pending:
            return
        f = self.faults
        if f.batch and self.rng.random() < f.batch:
            sn.flush_pending = True
            self.stats["batched_readies"] += 1
            self._push(self.now + self.rng.randint(0, f.batch_window), _FLUSH, nid,
                       sn.incarnation, 0)
            return
        self._process(nid)

    def _process(self, nid: int, crash_before_sync: bool = False) -> bool:
        """The node's Ready; False if its process died in a file-system call or its storage
        failed under an injected fault (then it is down: `_died`)."""
        host = self.nodes[nid].host
        assert host is not None
        try:
            host.process_ready(crash_before_sync)
        except ProcessKilled:
            self._died(nid, "killed at a file-system call")
            return False
        except StorageFailed:
            if not (self.faults.enospc_snapshot or self.faults.eio_fsync):
                raise  # not injected: a real failure of the simulated disk
            self._died(nid, "storage failed")
            return False
        return True


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
        buf = self._trace_buf
        buf.append(tag + _RECORD[len(nums)].pack(self.now, *nums))
        if len(buf) >= _TRACE_BATCH:
            self._flush_trace()

    def _flush_trace(self) -> None:
        self._trace.update(b"".join(self._trace_buf))
        self._trace_buf.clear()


def _discard(tag: bytes, *nums: int) -> None:
    """`Simulator._record` with the trace off."""


