"""The crash-state explorer for DiskStorage: workloads, their ground truth, and the checks.

Each workload drives DiskStorage (impl/raft/disklog.py) through its public API as the Raft host
does (write a Ready, then sync it; one storage per group under a node's data directory, group
commit with syncfs where several groups write), on a RecordingFS (impl/raft/crashstates.py).
Next to every call it records the ground truth: the state each group had acknowledged (what
its last successful sync made durable: MemStorage, the reference semantics), the writes issued
since, every entry ever written, and the cluster's committed entries.

Then, for every crash point of the recorded trace (after every file-system call and inside
every write) and every image each persistence model allows there, every group is recovered
with DiskStorage.load() and checked:

* REFUSED: load() raised, on a state inside the model;
* LOST_ACKED: an acknowledged entry is missing or replaced (except by a write issued since
  that replaces that suffix), or the snapshot went back;
* TERM_BACK: the term went back, or the vote changed within the acknowledged term;
* UNCOMMITTED: the recovered commit index covers an entry the cluster did not commit (or a
  snapshot not of the cluster's committed log);
* INVENTED: an entry or a (term, vote) that was never written;
* DESTRUCTIVE: recovery unlinked a file holding bytes the model guarantees (fsynced) that the
  workload had not deleted itself (not a temporary file), or truncated below them;
* NOT_IDEMPOTENT: a second load() recovers something else.

Faults: `fault_runs` repeats a workload with ENOSPC (after a partial write) or EIO at each
write call, or EIO at each fsync-like call (under the page-cache model a failed write-back:
the pages stay cached, marked clean, and never reach the disk; at a directory's fsync the
journal aborts: nothing comes up before a reboot, whose states are the crash states there);
`writeback_runs` adds, in the page-cache model only, the write-backs that fail only some
pages (each proper prefix written, each single page failed) and those whose failed pages
read back stale blocks (crashstates.Writeback). The node stops at the
StorageFailed (nothing more is acknowledged), then, as an operator following
docs/operations.md would, it is restarted WITHOUT a reboot (the page cache kept) and what it
recovers counts as acknowledged (Raft takes it as stable); a generated workload then goes on
(the leader resends what the follower lacks, more steps follow), a named one stops there. Its
crash points from the fault on are explored, in every model: PAGECACHE is the one in which
the cache and the disk differ after the fault.

    python -m tests.raft.crashexplore [--faults] [--generated N] [--long N [--long-steps K]]
                                      [--workload NAME] [--disklog-rev REV]
"""

from __future__ import annotations

import argparse
import contextlib
import enum
import os
import re
import sys
import time
import types
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from epochgc.impl.raft import removal as real_removal
from epochgc.impl.raft.crashstates import (
    CrashPoint,
    Fault,
    FaultKind,
    FsOp,
    Image,
    Model,
    OpKind,
    RecordingFS,
    WbMode,
    Writeback,
    crash_images,
    crash_points,
    image_ops,
)
from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.groupcommit import GroupCommit
from epochgc.impl.raft.identity import ensure_identity
from epochgc.impl.raft.messages import Entry, HardState, InitialState, Snapshot
from epochgc.impl.raft.removal import group_path, tombstone_path
from epochgc.impl.raft.storage import MemStorage, StorageCorruption, StorageFailed, sync_all

ROOT = "/data"  # exists (durable) before every workload
NODE = "/data/n1"
# The group-removal code the workloads run: impl/raft/removal.py (a seeded-bug copy in tests).
REMOVAL: types.ModuleType = real_removal


def group_dir(gid: int) -> str:
    return group_path(NODE, gid)


def tombstone(gid: int) -> str:
    return tombstone_path(NODE, gid)


def entry(index: int, term: int, size: int = 24) -> Entry:
    """A deterministic entry: the same (index, term) always has the same data."""
    head = b"%d.%d|" % (index, term)
    return Entry(index, term, data=(head * (size // len(head) + 1))[:size])


def entries(first: int, last: int, term: int, size: int = 24) -> list[Entry]:
    return [entry(i, term, size) for i in range(first, last + 1)]


# ---- ground truth ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Truth:
    """One group's ground truth at a point of the trace."""

    acked: InitialState  # what its last successful sync made durable
    pending: tuple[tuple[HardState | None, Snapshot | None, tuple[Entry, ...], Snapshot | None],
                   ...]  # writes issued since (maybe partly on disk)
    removing: bool = False  # the group's removal began (its tombstone was made durable first)


class GroupRun:
    """One group of the node: its DiskStorage and its reference (MemStorage)."""

    def __init__(self, rec: Recorder, gid: int, gc: GroupCommit | None) -> None:
        self.rec, self.gid = rec, gid
        self.storage = rec.storage(group_dir(gid), segment_bytes=rec.segment_bytes, fs=rec.fs,
                                   group_commit=gc)
        self.ref = MemStorage()
        self.removing = False
        self.storage.load()
        self._mark()

    def restart(self) -> None:
        """The process is killed (the page cache survives: no crash of the files) and a new
        one recovers the group. Raft takes what it recovered as stable (it acknowledges
        those entries to a leader without writing them again), so it counts as acknowledged
        from here on."""
        self.storage.abandon()
        self.storage = self.rec.storage(group_dir(self.gid), segment_bytes=self.rec.segment_bytes,
                                        fs=self.rec.fs)
        init = self.storage.load()
        self.ref = MemStorage()
        self.ref.hard_state, self.ref.snapshot = init.hard_state, init.snapshot
        self.ref.log = list(init.entries)
        self._mark()

    def write(self, hs: HardState | None, snap: Snapshot | None, ents: Sequence[Entry] = (),
              compacted: Snapshot | None = None) -> None:
        _check_workload(self.ref, hs, snap, ents)
        for e in ents:
            self.rec.written.setdefault(self.gid, {})[(e.index, e.term)] = e
        if hs is not None:
            self.rec.votes.setdefault(self.gid, set()).add((hs.term, hs.vote))
        self.ref.write(hs, snap, ents, compacted)
        self._mark()  # issued (before the call: a crash inside it may keep part of it)
        self.storage.write(hs, snap, ents, compacted)

    def sync(self) -> None:
        self.storage.sync()
        self.acked()

    def restart_after_fault(self) -> InitialState:
        """A restart (no reboot) after the storage failed; again if recovery itself fails
        (its own fsync, say): an operator restarts until it comes up. Raises NodeDown if the
        file system aborted its journal (nothing comes up before a reboot)."""
        for _ in range(3):
            if self.rec.fs.aborted:
                raise NodeDown("the journal aborted (a directory's write-back failed): "
                               "every barrier fails until a reboot")
            try:
                self.restart()
                return self.storage.load()
            except StorageFailed:
                continue
        raise AssertionError(f"group {self.gid} does not restart after a single fault")

    def acked(self) -> None:
        self.ref.sync()
        self._mark()

    def _mark(self) -> None:
        t = Truth(self.ref.load(), tuple(self.ref._pending), self.removing)
        self.rec.marks.setdefault(self.gid, []).append((len(self.rec.fs.trace), t))


class NodeDown(Exception):
    """The node cannot restart before a reboot (its file system aborted the journal); the
    reboot leaves one of the crash states at the abort, which the explorer checks."""


def _check_workload(ref: MemStorage, hs: HardState | None, snap: Snapshot | None,
                    ents: Sequence[Entry]) -> None:
    """A workload writes only what a Raft follower can: a commit index within its log."""
    if hs is None:
        return
    s = ref.load()
    cur = next((p[0] for p in reversed(ref._pending) if p[0] is not None), s.hard_state)
    if hs.term < cur.term or (hs.term == cur.term and cur.vote and hs.vote != cur.vote):
        raise ValueError(f"workload bug: hard state {hs} after {cur}")
    last = (ents[-1].index if ents else snap.index if snap is not None
            else max([e.index for e in s.entries] + [s.snapshot.index]
                     + [p[2][-1].index for p in ref._pending if p[2]]))
    if hs.commit > last:
        raise ValueError(f"workload bug: commit {hs.commit} past the log's last index {last}")


@dataclass
class Recorder:
    """What a workload runs on and records."""

    faults: tuple[Fault, ...] = ()
    segment_bytes: int = 400
    storage: type[DiskStorage] = DiskStorage  # (a seeded-bug copy in tests)
    fs: RecordingFS = field(init=False)
    marks: dict[int, list[tuple[int, Truth]]] = field(default_factory=dict)
    written: dict[int, dict[tuple[int, int], Entry]] = field(default_factory=dict)
    votes: dict[int, set[tuple[int, int]]] = field(default_factory=dict)
    committed: dict[int, dict[int, int]] = field(default_factory=dict)  # gid: index -> term
    groups: dict[int, GroupRun] = field(default_factory=dict)
    gc: GroupCommit | None = None
    fault_at: int | None = None  # trace position where the first fault fired
    log: dict[int, dict[int, Entry]] = field(default_factory=dict)  # the cluster's, per gid
    gc_factory: type[GroupCommit] = GroupCommit  # (a seeded-bug copy in tests)
    refused: str = ""  # a restart after a fault refused to recover (the node stays down)
    down: str = ""  # the node cannot restart before a reboot (NodeDown)

    def __post_init__(self) -> None:
        self.fs = RecordingFS(ROOT, self.faults)

    def group(self, gid: int, group_commit: bool = False) -> GroupRun:
        """Create (or open) a group's storage, as the server's storage factory does."""
        if group_commit and self.gc is None:
            self.gc = self.gc_factory(NODE, self.fs, mode="syncfs")
        g = self.groups[gid] = GroupRun(self, gid, self.gc if group_commit else None)
        return g

    def commit(self, gid: int, ents: Sequence[Entry]) -> None:
        """The cluster committed these entries (ground truth from the leader's side)."""
        for e in ents:
            self.committed.setdefault(gid, {})[e.index] = e.term
            self.log.setdefault(gid, {})[e.index] = e

    def sync_all(self, gids: Sequence[int]) -> None:
        """One Ready batch's barrier for several groups (group commit), then acknowledge."""
        sync_all([self.groups[g].storage for g in gids])
        for g in gids:
            self.groups[g].acked()

    def remove_group(self, gid: int) -> None:
        """RaftServer.remove_group's own calls (impl/raft/removal.py) through this FileIO: a
        durable tombstone first, then the group closed and its directory removed."""
        def stop() -> None:
            g = self.groups.pop(gid)
            g.removing = True
            g.storage.close()
            g._mark()

        REMOVAL.remove_group_files(self.fs, NODE, gid, stop)

    def truth(self, gid: int, at: int) -> tuple[int, Truth]:
        """The group's ground truth at trace position `at` (the index of its mark)."""
        marks = self.marks[gid]
        lo, hi = 0, len(marks) - 1
        while lo < hi:  # the last mark at or before `at`
            mid = (lo + hi + 1) // 2
            if marks[mid][0] <= at:
                lo = mid
            else:
                hi = mid - 1
        return lo, marks[lo][1]


# ---- workloads ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    name: str
    run: Callable[[Recorder], None]
    segment_bytes: int = 400
    # The persistence models it is explored in (with those the caller asks for).
    models: tuple[Model, ...] = tuple(Model)


def w_appends(r: Recorder) -> None:
    """Appends across segment cuts, a batch spanning sectors, a new term."""
    r.commit(1, [*entries(1, 9, 1), *entries(10, 11, 2)])
    g = r.group(1)
    g.write(HardState(1, 1, 0), None, entries(1, 3, 1))
    g.sync()
    g.write(HardState(1, 1, 3), None, entries(4, 9, 1, size=110))  # > 1 sector, > 1 segment
    g.sync()
    g.write(HardState(2, 2, 9), None, entries(10, 11, 2))
    g.sync()


def w_compaction(r: Recorder) -> None:
    """A local compaction (snapshot file rewritten, old segments deleted), then more."""
    r.commit(1, entries(1, 9, 1))
    g = r.group(1)
    g.write(HardState(1, 1, 0), None, entries(1, 6, 1, size=60))
    g.sync()
    g.write(HardState(1, 1, 6), None, [], compacted=Snapshot(4, 1, b"state@4"))
    g.sync()
    g.write(None, None, entries(7, 9, 1, size=60))
    g.sync()
    g.write(HardState(1, 1, 9), None, [], compacted=Snapshot(8, 1, b"state@8"))
    g.sync()


def w_compaction_in_place(r: Recorder) -> None:
    """A compaction whose sync cuts no segment (its STATE record fits the live one), then
    the segment it covers is deleted: nothing but that sync's own barrier orders the snapshot
    file's rename before the unlink."""
    r.commit(1, entries(1, 8, 1))
    g = r.group(1)
    g.write(HardState(1, 1, 0), None, entries(1, 3, 1, size=60))
    g.sync()
    g.write(HardState(1, 1, 3), None, entries(4, 6, 1, size=60))
    g.sync()
    g.write(HardState(1, 1, 6), None, entries(7, 8, 1, size=60))  # cuts segment 2
    g.sync()
    g.write(HardState(1, 1, 8), None, [], compacted=Snapshot(6, 1, b"state@6"))
    g.sync()  # deletes segment 1


def w_install(r: Recorder) -> None:
    """A follower's old log of term 1 (committed only to 2) replaced by a leader of term 2's
    snapshot at 8; the cluster committed 1-2 of term 1 and 3-9 of term 2."""
    r.commit(1, [*entries(1, 2, 1), *entries(3, 9, 2)])
    g = r.group(1)
    g.write(HardState(1, 2, 2), None, entries(1, 6, 1))
    g.sync()
    g.write(HardState(2, 0, 8), Snapshot(8, 2, b"state@8"), [])
    g.sync()
    g.write(HardState(2, 0, 9), None, [entry(9, 2)])
    g.sync()


def w_install_with_entries(r: Recorder) -> None:
    """Issue 27 item 2's shape: a snapshot at 8 and the leader's next entries 9-12 in one
    Ready over an old log 1-10, longer than the snapshot index."""
    r.commit(1, [*entries(1, 2, 1), *entries(3, 12, 2)])
    g = r.group(1)
    g.write(HardState(1, 2, 2), None, entries(1, 10, 1))
    g.sync()
    g.write(HardState(2, 0, 12), Snapshot(8, 2, b"state@8"), entries(9, 12, 2))
    g.sync()


def w_hard_state(r: Recorder) -> None:
    """Votes in new terms (with and without entries) and a conflicting suffix replaced."""
    r.commit(1, [entry(1, 1), *entries(2, 4, 4)])
    g = r.group(1)
    g.write(HardState(1, 1, 0), None, [entry(1, 1)])
    g.sync()
    g.write(HardState(2, 0, 1), None, [])
    g.sync()
    g.write(HardState(2, 3, 1), None, [])
    g.sync()
    g.write(HardState(3, 3, 1), None, entries(2, 3, 3))
    g.sync()
    g.write(HardState(4, 4, 1), None, entries(2, 4, 4))  # replaces 2-3 of term 3
    g.sync()
    g.write(HardState(4, 4, 4), None, [])
    g.sync()


def w_restart(r: Recorder) -> None:
    """A process killed (not a power loss) after an unsynced batch that cut a new segment;
    the next one recovers from the page cache, takes that as stable, and acknowledges more;
    then the power goes."""
    r.commit(1, entries(1, 8, 1))
    g = r.group(1)
    g.write(HardState(1, 1, 0), None, entries(1, 2, 1, size=110))
    g.sync()
    g.write(HardState(1, 1, 2), None, entries(3, 5, 1, size=110))  # cuts segment 2
    g.restart()
    g.write(HardState(1, 1, 5), None, entries(6, 8, 1))
    g.sync()


def w_groups(r: Recorder) -> None:
    """Two groups on one node with group commit (one syncfs per batch), then one removed as
    the server removes a group, while the other goes on."""
    r.commit(1, entries(1, 4, 1))
    r.commit(2, entries(1, 2, 1))
    ensure_identity(NODE, "crash", 1, r.fs)  # as RaftServer starts
    g1 = r.group(1, group_commit=True)
    g2 = r.group(2, group_commit=True)
    g1.write(HardState(1, 1, 0), None, entries(1, 2, 1))
    g2.write(HardState(1, 1, 0), None, entries(1, 2, 1))
    r.sync_all([1, 2])
    g1.write(HardState(1, 1, 2), None, [entry(3, 1)])
    r.sync_all([1])
    r.remove_group(2)
    g1.write(None, None, [entry(4, 1)])
    r.sync_all([1])


def w_tenants(r: Recorder) -> None:
    """Two groups with group commit (one syncfs per batch on the node's descriptor); between
    two batches another tenant of the file system syncs it and the disk fails the node's
    dirty pages (the tenant sees the EIO first). The node's next barrier must fail."""
    r.commit(1, entries(1, 3, 1))
    r.commit(2, entries(1, 3, 1))
    ensure_identity(NODE, "crash", 1, r.fs)
    g1 = r.group(1, group_commit=True)
    g2 = r.group(2, group_commit=True)
    g1.write(HardState(1, 1, 0), None, entries(1, 2, 1))
    g2.write(HardState(1, 1, 0), None, entries(1, 2, 1))
    r.sync_all([1, 2])
    g1.write(HardState(1, 1, 2), None, [entry(3, 1)])
    g2.write(HardState(1, 1, 2), None, [entry(3, 1)])
    r.fs.other_tenant_syncfs(fail=True)
    r.sync_all([1, 2])


def w_restart_after_eio(r: Recorder) -> None:
    """Issue 37 item 1's sequence: entries 1-3 synced, 4-10 written and their fsync fails
    (the pages stay cached, never reach the disk), then (explore's restart after a fault)
    a new process recovers without a reboot."""
    r.commit(1, entries(1, 3, 1))
    g = r.group(1)
    g.write(HardState(1, 1, 0), None, entries(1, 3, 1))
    g.sync()
    g.write(HardState(1, 1, 3), None, entries(4, 10, 1))
    fail_next_fsync(r.fs)
    g.sync()


def w_partial_writeback(r: Recorder) -> None:
    """A batch over three pages whose write-back fails (the explorer's write-back variants:
    only some of its pages fail, the others reach the disk: a hole between written pages);
    the node restarts without a reboot, the leader resends what it lacks, the power goes."""
    r.commit(1, [*entries(1, 2, 1), *entries(3, 5, 1, size=3000)])
    g = r.group(1)
    g.write(HardState(1, 1, 0), None, entries(1, 2, 1))
    g.sync()
    g.write(HardState(1, 1, 2), None, entries(3, 5, 1, size=3000))
    fail_next_fsync(r.fs)
    try:
        g.sync()
    except StorageFailed:
        _resend(r, g, HardState(1, 1, 5))


def w_stale_segment(r: Recorder) -> None:
    """A compaction deletes the old segments; the next segments the log cuts get blocks
    those held (the explorer's stale variants: a failed write-back of a new segment's pages
    reads back the deleted segment's records); the node restarts, the leader resends."""
    r.commit(1, [*entries(1, 6, 1, size=60), *entries(7, 9, 1, size=200)])
    g = r.group(1)
    g.write(HardState(1, 1, 0), None, entries(1, 6, 1, size=60))
    g.sync()
    g.write(HardState(1, 1, 6), None, [], compacted=Snapshot(6, 1, b"state@6"))
    g.sync()
    g.write(HardState(1, 1, 6), None, entries(7, 8, 1, size=200))  # fills segment 2
    g.write(None, None, [entry(9, 1, 200)])  # cuts segment 3
    try:
        g.sync()
    except StorageFailed:
        _resend(r, g, HardState(1, 1, 9))


def _resend(r: Recorder, g: GroupRun, hs: HardState) -> None:
    """After a failed sync: restart without a reboot; the leader (same term) sends the
    committed entries past what the node recovered, and the commit."""
    init = g.restart_after_fault()
    last = init.entries[-1].index if init.entries else init.snapshot.index
    log = r.log.get(g.gid, {})
    g.write(hs, None, [log[i] for i in range(last + 1, hs.commit + 1)])
    g.sync()


def fail_next_fsync(fs: RecordingFS) -> None:
    """The next fsync-like call's write-back fails (EIO)."""
    n = fs.calls["fsync"]
    fs.faults.setdefault(("fsync", n), Fault("fsync", n, FaultKind.EIO))


WORKLOADS = [
    Workload("appends", w_appends),
    Workload("compaction", w_compaction),
    Workload("compaction_in_place", w_compaction_in_place, segment_bytes=600),
    Workload("install", w_install),
    Workload("install_with_entries", w_install_with_entries),
    Workload("hard_state", w_hard_state),
    Workload("groups", w_groups),
    Workload("restart", w_restart),
]
# Issue 37's: their faults (a write-back failed, another tenant's) fire without a Fault too.
# Each injects a failed write-back itself, which the strict model cannot describe (it
# persists at the next barrier pages the device never got: explore() drops its states from
# the failure on); before it, the strict model's per-sector choices over these workloads'
# large records exceed any budget (partial_writeback's 3,000-byte entries: 2**18 images of
# one crash point, TooManyStates). Explored as the default suite does: ext4-ordered and page
# cache.
_AFTER_FAULT_MODELS = (Model.EXT4_ORDERED, Model.PAGECACHE)
AFTER_FAULT_WORKLOADS = [
    Workload("tenants", w_tenants, segment_bytes=4096, models=_AFTER_FAULT_MODELS),
    Workload("restart_after_eio", w_restart_after_eio, segment_bytes=4096,
             models=_AFTER_FAULT_MODELS),
    Workload("partial_writeback", w_partial_writeback, segment_bytes=16384,
             models=_AFTER_FAULT_MODELS),
    Workload("stale_segment", w_stale_segment, models=_AFTER_FAULT_MODELS),
]


# ---- generated workloads (bounded and exhaustive, as ACE generates them) -------------------------


@dataclass
class _Follower:
    """What a generated workload's follower has and what its cluster committed."""

    term: int = 1
    vote: int = 1
    last: int = 0  # the follower's last index
    commit: int = 0
    snap: int = 0


def _g_append(r: Recorder, g: GroupRun, f: _Follower, n: int = 2, size: int = 24) -> None:
    ents = entries(f.last + 1, f.last + n, f.term, size)
    r.commit(g.gid, ents)
    f.last += n
    g.write(HardState(f.term, f.vote, f.last), None, ents)
    g.sync()
    f.commit = f.last


def _g_big(r: Recorder, g: GroupRun, f: _Follower) -> None:
    _g_append(r, g, f, 5, 110)  # several sectors, and a segment cut


def _g_term(r: Recorder, g: GroupRun, f: _Follower) -> None:
    f.term, f.vote = f.term + 1, 2
    g.write(HardState(f.term, f.vote, f.commit), None, [])
    g.sync()


def _g_compact(r: Recorder, g: GroupRun, f: _Follower) -> None:
    if f.commit > f.snap:
        g.write(None, None, [], compacted=Snapshot(f.commit, r.committed[g.gid][f.commit],
                                                   b"state@%d" % f.commit))
        g.sync()
        f.snap = f.commit


def _g_install(r: Recorder, g: GroupRun, f: _Follower, with_entries: bool = False) -> None:
    """Two uncommitted entries of the follower's term, then a new leader's snapshot past them
    (and, `with_entries`, its next entries in the same Ready)."""
    g.write(None, None, entries(f.last + 1, f.last + 2, f.term))
    g.sync()
    f.term, f.vote = f.term + 1, 0
    # the new leader's log after what the cluster committed (never a committed index again)
    new = entries(_top(r, g) + 1, f.last + 4, f.term)
    r.commit(g.gid, new)
    snap = Snapshot(new[-2].index, f.term, b"state@%d" % new[-2].index)
    after = new[-1:] if with_entries else []
    f.last = f.commit = new[-1].index if with_entries else snap.index
    g.write(HardState(f.term, 0, f.commit), snap, after)
    g.sync()
    f.snap = snap.index


def _g_install_entries(r: Recorder, g: GroupRun, f: _Follower) -> None:
    _g_install(r, g, f, with_entries=True)


def _g_restart(r: Recorder, g: GroupRun, f: _Follower) -> None:
    ents = entries(f.last + 1, f.last + 1, f.term)
    r.commit(g.gid, ents)
    g.write(None, None, ents)  # unsynced, then the process is killed
    f.last += 1
    g.restart()


def _g_conflict(r: Recorder, g: GroupRun, f: _Follower) -> None:
    """Truncation on conflict: two uncommitted entries of the follower's term (synced), then
    a new leader of the next term whose log has one other entry there: it replaces them."""
    g.write(None, None, entries(f.last + 1, f.last + 2, f.term))
    g.sync()
    f.term, f.vote = f.term + 1, 3
    new = [entry(f.last + 1, f.term, 300)]  # over a sector: a torn rewrite is possible
    r.commit(g.gid, new)
    f.last = f.commit = new[-1].index
    g.write(HardState(f.term, f.vote, f.last), None, new)
    g.sync()


STEPS: dict[str, Callable[[Recorder, GroupRun, _Follower], None]] = {
    "append": _g_append, "big": _g_big, "term": _g_term, "compact": _g_compact,
    "install": _g_install, "install+entries": _g_install_entries, "restart": _g_restart,
    "conflict": _g_conflict,
}


def _top(r: Recorder, g: GroupRun) -> int:
    """The cluster's last committed index in the group."""
    return max(r.log.get(g.gid, {}), default=0)


def _resync(r: Recorder, g: GroupRun, f: _Follower) -> None:
    """After a restart after a fault: the follower is what it recovered; a leader of a new
    term (an election may well have happened meanwhile; and the old leader may not make a
    second entry at an index it already used in its term) sends it the committed entries it
    lacks or has in conflict, and the commit. Its own uncommitted entries past the committed
    log are replaced by the next step's."""
    init = g.restart_after_fault()
    log = r.log.get(g.gid, {})
    have = {e.index: e for e in init.entries}
    f.snap = init.snapshot.index
    last = init.entries[-1].index if init.entries else init.snapshot.index
    first = next((i for i in sorted(have) if log.get(i) not in (None, have[i])), last + 1)
    top = _top(r, g)
    ents = [log[i] for i in range(first, top + 1)]
    f.term, f.vote = f.term + 1, 0
    hs = HardState(f.term, f.vote, top)
    g.write(hs, None, ents)
    g.sync()
    f.last, f.commit = top, top


def generated(steps: Sequence[str], segment_bytes: int = 400) -> Workload:
    """A workload of these steps after a first append (see STEPS). A StorageFailed (a fault)
    restarts the node without a reboot, the leader resends what it lacks, and the next step
    follows."""

    def run(r: Recorder) -> None:
        g, f = r.group(1), _Follower()
        for name in ("append", *steps):
            try:
                STEPS[name](r, g, f)
            except StorageFailed:
                _resync(r, g, f)

    return Workload("gen:" + ",".join(steps), run, segment_bytes)


def generated_workloads(length: int, names: Sequence[str] = ()) -> list[Workload]:
    """Every sequence of `length` steps (of `names`, default all: 8**length workloads)."""
    import itertools as it

    return [generated(seq) for seq in it.product(sorted(names or STEPS), repeat=length)]


def long_workloads(count: int, length: int = 6, seed: int = 37) -> list[Workload]:
    """`count` sequences of `length` steps drawn at random (seeded), each holding a
    truncation on conflict and a restart: longer than the exhaustive sequences reach."""
    import random

    rng = random.Random(seed)
    names = sorted(STEPS)
    out: list[Workload] = []
    while len(out) < count:
        seq = [rng.choice(names) for _ in range(length)]
        if "conflict" in seq and "restart" in seq:
            out.append(generated(seq))
    return out


# ---- checks ------------------------------------------------------------------------------------


class Kind(enum.Enum):
    REFUSED = "refused restart inside the model"
    LOST_ACKED = "acknowledged entry lost"
    TERM_BACK = "term or vote went back"
    UNCOMMITTED = "recovered commit covers an entry the cluster did not commit"
    INVENTED = "recovered something never written"
    DESTRUCTIVE = "recovery deleted what it had not proven redundant"
    NOT_IDEMPOTENT = "a second recovery differs"


@dataclass(frozen=True)
class Finding:
    kind: Kind
    workload: str
    model: Model
    group: int
    point: str
    detail: str
    image: str

    def __str__(self) -> str:
        return (f"[{self.model.value}] {self.workload} g{self.group} {self.kind.name}: "
                f"{self.detail}\n    crash {self.point}\n    image: {self.image}")


@dataclass(frozen=True)
class Recovery:
    init: InitialState | None
    error: str
    changes: tuple[FsOp, ...]  # what load() did to the files
    again: InitialState | None  # a second load() after the first


def recover(image: Image, gid: int, segment_bytes: int,
            storage: type[DiskStorage] = DiskStorage) -> Recovery:
    """Recover one group from the image, then once more from what that left."""
    fs = RecordingFS.from_image(image)
    try:
        st = storage(group_dir(gid), segment_bytes=segment_bytes, fs=fs)
        init = st.load()
        st.abandon()
    except Exception as e:  # a refusal (StorageCorruption) or a crash of recovery itself
        return Recovery(None, f"{type(e).__name__}: {e}", tuple(fs.trace), None)
    changes = tuple(fs.trace)
    try:
        st2 = storage(group_dir(gid), segment_bytes=segment_bytes, fs=fs)
        again = st2.load()
        st2.abandon()
    except Exception as e:
        return Recovery(init, f"second load: {type(e).__name__}: {e}", changes, None)
    return Recovery(init, "", changes, again)


def _same(a: InitialState, b: InitialState) -> bool:
    return (a.hard_state, a.snapshot, a.entries) == (b.hard_state, b.snapshot, b.entries)


def check(rec: Recorder, gid: int, truth: Truth, rv: Recovery, image: Image,
          point: CrashPoint) -> list[tuple[Kind, str]]:
    """Every violation of the ground truth by one group's recovery from one image."""
    out: list[tuple[Kind, str]] = []
    if rv.init is None:
        return [(Kind.REFUSED, rv.error)]
    init, acked = rv.init, truth.acked
    if rv.again is None:
        out.append((Kind.NOT_IDEMPOTENT, rv.error))
    elif not _same(init, rv.again):
        out.append((Kind.NOT_IDEMPOTENT, f"{_show(init)} then {_show(rv.again)}"))
    hs, snap = init.hard_state, init.snapshot
    ahs = acked.hard_state
    if hs.term < ahs.term or (hs.term == ahs.term and ahs.vote and hs.vote != ahs.vote):
        out.append((Kind.TERM_BACK, f"recovered term/vote {hs.term}/{hs.vote}, acknowledged "
                                    f"{ahs.term}/{ahs.vote}"))
    if (hs.term, hs.vote) != (0, 0) and (hs.term, hs.vote) not in rec.votes.get(gid, set()):
        out.append((Kind.INVENTED, f"term/vote {hs.term}/{hs.vote} never written"))
    if snap.index < acked.snapshot.index:
        out.append((Kind.LOST_ACKED, f"snapshot {snap.index} recovered, {acked.snapshot.index} "
                                     "acknowledged"))
    log = {e.index: e for e in init.entries}
    # The lowest index a write issued since the acknowledgement may have replaced.
    replaced = min([p[2][0].index for p in truth.pending if p[2]]
                   + [p[1].index + 1 for p in truth.pending
                      if p[1] is not None and snap.index >= p[1].index]
                   + [1 << 62])
    for e in acked.entries:
        if e.index <= snap.index:
            continue
        if e.index >= replaced:
            break
        got = log.get(e.index)
        if got != e:
            out.append((Kind.LOST_ACKED, f"entry {e.index} of term {e.term} acknowledged, "
                        f"recovered {_entry(got)} ({_show(init)})"))
            break
    written = rec.written.get(gid, {})
    for e in init.entries:
        if written.get((e.index, e.term)) != e:
            out.append((Kind.INVENTED, f"entry {e.index} of term {e.term} never written"))
            break
    committed = rec.committed.get(gid, {})
    if snap.index and committed.get(snap.index) != snap.term:
        out.append((Kind.UNCOMMITTED, f"snapshot {snap.index}/{snap.term} is not of the "
                                      "cluster's committed log"))
    for i in range(snap.index + 1, hs.commit + 1):
        got = log.get(i)
        if got is None or committed.get(i) != got.term:
            there = f"term {committed[i]}" if i in committed else "nothing"
            out.append((Kind.UNCOMMITTED, f"commit {hs.commit} covers entry {i} "
                        f"({_entry(got)}) but the cluster committed {there} there "
                        f"({_show(init)})"))
            break
    out.extend(_destructive(rv.changes, image, point))
    return out


def _destructive(changes: Sequence[FsOp], image: Image, point: CrashPoint
                 ) -> list[tuple[Kind, str]]:
    protected = dict(image.protected)
    deleted_by_workload = {op.path for op in point.ops if op.kind is OpKind.UNLINK}
    files = image.files()
    out = []
    for op in changes:
        if op.kind is OpKind.UNLINK:
            p = op.path
            if (p.endswith(".tmp") or p in deleted_by_workload
                    or protected.get(p, 0) == 0 or _holds_nothing(files.get(p, b""))):
                continue
            out.append((Kind.DESTRUCTIVE, f"recovery unlinked {p} holding {protected[p]} "
                                          "fsynced bytes the workload never deleted"))
        elif op.kind is OpKind.TRUNCATE and op.length < protected.get(op.path, 0):
            out.append((Kind.DESTRUCTIVE, f"recovery truncated {op.path} to {op.length}, below "
                                          f"its fsynced length {protected[op.path]}"))
    return out


def _holds_nothing(content: bytes) -> bool:
    """A segment that holds no record: part of its magic, or zeros (a recovery's own fsync,
    reading it as the device holds it, may have made those bytes durable)."""
    from epochgc.impl.raft.diskformat import MAGIC

    return MAGIC.startswith(content) or not any(content)


def _entry(e: Entry | None) -> str:
    return "nothing" if e is None else f"term {e.term}"


def _show(s: InitialState) -> str:
    last = s.entries[-1].index if s.entries else s.snapshot.index
    return (f"hs {s.hard_state.term}/{s.hard_state.vote}/{s.hard_state.commit}, snapshot "
            f"{s.snapshot.index}/{s.snapshot.term}, log to {last}")


# ---- the explorer --------------------------------------------------------------------------------


@dataclass
class Result:
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)  # (workload, what)
    findings: dict[tuple[str, Model, Kind], Finding] = field(default_factory=dict)

    def add(self, f: Finding) -> None:
        key = (f.workload, f.model, f.kind)
        # Keep the first (earliest crash point) of each kind.
        self.findings.setdefault(key, f)

    def merge(self, other: Result) -> None:
        self.counts.update(other.counts)
        for f in other.findings.values():
            self.add(f)


def explore(wl: Workload, models: Sequence[Model] = tuple(Model), faults: tuple[Fault, ...] = (),
            label: str | None = None, budget: int = 20000,
            storage: type[DiskStorage] = DiskStorage, in_recovery: bool = True,
            restart: bool = True, gc_factory: type[GroupCommit] = GroupCommit) -> Result:
    """Run the workload, then check every crash state of every crash point (from the fault
    on, with faults) in every model, and with `in_recovery` every crash state of every call
    the recovery from each makes; counts under (label, ...).

    With a write-back that left stale blocks (Writeback.stale), a refused recovery is counted
    ("refused, stale blocks"), not reported: a freed block's old bytes in a page the disk
    log never got back are, to recovery, indistinguishable from damage to acknowledged
    data, and refusing is the safe answer (the availability it costs is counted); every
    other check holds as everywhere."""
    label = label or wl.name
    rec = Recorder(faults, wl.segment_bytes, storage, gc_factory=gc_factory)
    _run(rec, wl, restart)
    stale = any(f.writeback is not None and f.writeback.stale for f in rec.fs.failed)
    refusals_counted = stale and any(op.kind is OpKind.WB_ERROR and op.data
                                     for op in rec.fs.trace)
    start = 0
    if faults:
        if not rec.fs.failed:
            return Result()  # the fault's call never came
        start = _first_fault_pos(rec)
    res = Result()
    gids = sorted(rec.marks)
    recovered: dict[tuple[str, int], Recovery] = {}
    seen: set[tuple[Model, str, tuple[int, ...]]] = set()
    # After a failed write-back the kinder models contradict what the live file system (the
    # page cache) did: they persist at the next barrier pages the device never got, and which
    # recovery, reading the device, saw as zeros. Their states from then on describe no
    # Linux: only PAGECACHE is explored there.
    wb_error = next((k for k, op in enumerate(rec.fs.trace) if op.kind is OpKind.WB_ERROR),
                    len(rec.fs.trace) + 1)
    if rec.refused:
        if not refusals_counted:
            res.add(Finding(Kind.REFUSED, label, Model.PAGECACHE, 0, "live restart",
                            rec.refused, ""))
        res.counts[(label, "live restarts refused")] += 1
    if rec.down:
        res.counts[(label, "down until a reboot")] += 1
    for point in crash_points(rec.fs.trace, start):
        res.counts[(label, "crash points")] += 1
        truths = [rec.truth(g, point.at) for g in gids]
        tids = tuple(t[0] for t in truths)
        for model in models:
            if model is not Model.PAGECACHE and point.at > wb_error:
                continue
            for image in crash_images(point.ops, model, [ROOT], budget):
                key = (model, image.digest, tids)
                if key in seen:
                    continue
                seen.add(key)
                res.counts[(label, f"states {model.value}")] += 1
                present = image.files()
                for g, (tid, truth) in zip(gids, truths, strict=True):
                    if truth.removing and tombstone(g) in present:
                        continue  # removed: the server never opens it again
                    rv = recovered.get((image.digest, g))
                    if rv is None:
                        rv = recovered[(image.digest, g)] = recover(
                            image, g, wl.segment_bytes, storage)
                    for kind, detail in check(rec, g, truth, rv, image, point):
                        if kind is Kind.REFUSED and refusals_counted:
                            res.counts[(label, "refused, stale blocks")] += 1
                            continue
                        res.add(Finding(kind, label, model, g, str(point), detail,
                                        image.describe()))
                    if in_recovery and rv.init is not None and any(op.kind not in _BARRIERS
                                                   for op in rv.changes):
                        _crash_in_recovery(rec, res, label, model, g, tid, truth, rv, image,
                                           point,
                                           seen, recovered, storage)
    return res


def _run(rec: Recorder, wl: Workload, restart: bool) -> None:
    """Run the workload. The node stops at a failure (OSError: the server's own tombstone
    calls): nothing more is acknowledged; then, with `restart`, it is restarted without a
    reboot (and again if that recovery fails)."""
    try:
        try:
            wl.run(rec)
        except (StorageFailed, OSError):
            if restart:
                for run in list(rec.groups.values()):
                    with contextlib.suppress(OSError):  # (a tombstone call: the node is down)
                        run.restart_after_fault()
    except StorageCorruption as e:
        # The restarted node refused what the device holds (stale blocks after a failed
        # write-back can look like damage): it stays down, nothing more is acknowledged.
        rec.refused = str(e)
    except NodeDown as e:
        rec.down = str(e)


_BARRIERS = frozenset({OpKind.FSYNC, OpKind.FSYNC_DIR, OpKind.SYNCFS})


def _crash_in_recovery(rec: Recorder, res: Result, label: str, model: Model, g: int,
                       tid: int, truth: Truth, rv: Recovery, image: Image, point: CrashPoint,
                       seen: set[tuple[Model, str, tuple[int, ...]]],
                       recovered: dict[tuple[str, int], Recovery],
                       storage: type[DiskStorage]) -> None:
    """A crash at every call of the recovery itself (it cuts torn tails, removes temporary
    files, moves segments aside): recover again from every state of each, and check against
    the same ground truth."""
    build = image_ops(image)
    # For the deletion check: what the workload or the first recovery deleted, and the
    # outer image's fsynced lengths (the nested image counts as wholly synced).
    outer = CrashPoint(point.at, point.partial, (*point.ops, *rv.changes))
    for p in crash_points([*build, *rv.changes], len(build)):
        if p.at == len(build) and p.partial is None:
            continue  # the image itself
        for img in crash_images(p.ops, model, ["/"]):
            key = (model, img.digest, (-g, tid))  # (negative: per group, in recovery)
            if key in seen:
                continue
            seen.add(key)
            res.counts[(label, f"states in recovery {model.value}")] += 1
            rv2 = recovered.get((img.digest, g))
            if rv2 is None:
                rv2 = recovered[(img.digest, g)] = recover(img, g, rec.segment_bytes, storage)
            nested = Image(img.entries, image.protected)
            for kind, detail in check(rec, g, truth, rv2, nested, outer):
                res.add(Finding(kind, label, model, g, f"{point}, then inside recovery {p}",
                                detail, img.describe()))


def _first_fault_pos(rec: Recorder) -> int:
    return rec.fs.fault_pos[0] if rec.fs.fault_pos else len(rec.fs.trace)


def fault_runs(wl: Workload, on: str, kind: FaultKind, partial: int = 7,
               storage: type[DiskStorage] = DiskStorage) -> list[tuple[Fault, ...]]:
    """One fault per run, at each call of its kind the workload makes."""
    rec = Recorder((), wl.segment_bytes, storage)
    _run(rec, wl, restart=True)  # (the restart's own calls can fail too)
    n = rec.fs.calls[on]
    return [(Fault(on, i, kind, partial if on == "write" else 0),) for i in range(n)]


# ENOSPC at a write (after a short write), EIO at a write, EIO at an fsync-like call.
FAULTS = (("write", FaultKind.ENOSPC), ("write", FaultKind.EIO), ("fsync", FaultKind.EIO))


def writeback_runs(wl: Workload, storage: type[DiskStorage] = DiskStorage
                   ) -> list[tuple[str, tuple[Fault, ...]]]:
    """The failed write-backs that are not all-or-nothing (crashstates.Writeback), one per
    run, labelled: at each fsync-like call with two or more dirty pages, each proper prefix
    of them written (the rest failed) and each single page failed ("partial"); at each whose
    pages could read back a freed block's old bytes, all failed with those ("stale")."""
    def calls(first: tuple[Fault, ...]) -> list[tuple[int, int, bool]]:
        rec = Recorder(first, wl.segment_bytes, storage)
        _run(rec, wl, restart=True)
        return [(i, n, stale) for i, (n, stale)
                in enumerate(zip(rec.fs.dirty_at, rec.fs.stale_at, strict=True))]

    stale_wb = Writeback(stale=True)
    out: list[tuple[str, tuple[Fault, ...]]] = []
    for i, n, stale in calls(()):
        wbs = [Writeback(WbMode.PREFIX, k) for k in range(1, n)]
        wbs += [Writeback(WbMode.ONE, k) for k in range(n)] if n >= 2 else []
        for wb in wbs:
            first = (Fault("fsync", i, FaultKind.EIO, writeback=wb),)
            out.append(("partial", first))
            # The restarted node's recovery cut what that left (freeing blocks that hold the
            # pages which did reach the disk) and appends there again: stale blocks then.
            out += [("partial+stale", (*first, Fault("fsync", j, FaultKind.EIO,
                                                      writeback=stale_wb)))
                    for j, _, s in calls(first) if j > i and s]
        if stale:
            out.append(("stale", (Fault("fsync", i, FaultKind.EIO, writeback=stale_wb),)))
    return out


def explore_all(workloads: Sequence[Workload], with_faults: bool, models: Sequence[Model]
                = tuple(Model), storage: type[DiskStorage] = DiskStorage,
                in_recovery: bool = True, jobs: int = 1,
                progress: Callable[[int, int], None] | None = None) -> Result:
    """Every workload, and with `with_faults` every variant of it with one of FAULTS at one of
    its calls; the counts and the first finding of each kind. `jobs` > 1: the workloads in
    that many forked processes; the results are merged in workload order, so the counts and
    the findings kept are those of one process. `progress(done, total)` after each workload.
    A workload is explored in those of `models` it allows (Workload.models)."""
    if jobs > 1 and len(workloads) > 1:
        import multiprocessing

        # Fork: the workers inherit the workloads (closures, not picklable) and the storage
        # class (a copy loaded from a git revision has no importable name).
        global _JOB
        _JOB = (workloads, with_faults, models, storage, in_recovery)
        try:
            res = Result()
            with multiprocessing.get_context("fork").Pool(jobs) as pool:
                # imap keeps workload order (the merge must not depend on which ends first).
                for k, part in enumerate(pool.imap(_explore_nth, range(len(workloads)),
                                                   chunksize=1), 1):
                    res.merge(part)
                    if progress:
                        progress(k, len(workloads))
        finally:
            _JOB = None
        return res
    res = Result()
    for k, wl in enumerate(workloads, 1):
        wl_models = tuple(m for m in models if m in wl.models)
        res.merge(explore(wl, wl_models, storage=storage, in_recovery=in_recovery))
        if with_faults:
            for on, kind in FAULTS:
                for faults in fault_runs(wl, on, kind, storage=storage):
                    res.merge(explore(wl, wl_models, faults, label=f"{wl.name}+{on}-{kind.name}",
                                      storage=storage, in_recovery=in_recovery))
            if Model.PAGECACHE in wl_models:  # (the kinder models ignore write-back errors)
                for what, faults in writeback_runs(wl, storage):
                    res.merge(explore(wl, (Model.PAGECACHE,), faults,
                                      label=f"{wl.name}+fsync-EIO-{what}", storage=storage,
                                      in_recovery=in_recovery))
        if progress:
            progress(k, len(workloads))
    return res


# What a forked worker of explore_all explores (set in the parent before the fork).
_JOB: tuple[Sequence[Workload], bool, Sequence[Model], type[DiskStorage], bool] | None = None


def _explore_nth(i: int) -> Result:
    assert _JOB is not None
    workloads, with_faults, models, storage, in_recovery = _JOB
    return explore_all([workloads[i]], with_faults, models, storage, in_recovery)


def report(res: Result) -> str:
    lines = []
    names = sorted({w for w, _ in res.counts})
    for w in names:
        parts = [f"{what} {res.counts[(w, what)]}" for ww, what in sorted(res.counts) if ww == w]
        lines.append(f"{w}: " + ", ".join(parts))
    total = sum(n for (_, what), n in res.counts.items() if what.startswith("states"))
    lines.append(f"total crash states checked: {total}; findings: {len(res.findings)}")
    for f in res.findings.values():
        lines.append(str(f))
    return "\n".join(lines)


class _Progress:
    """One stderr line per workload done, at most every 10 s: a deep run takes hours."""

    def __init__(self, t0: float) -> None:
        self.t0, self.last = t0, 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last < 10 and done < total:
            return
        self.last = now
        spent = now - self.t0
        eta = spent / done * (total - done)
        print(f"crashexplore: {done}/{total} workloads, {spent:.0f} s, about {eta:.0f} s left",
              file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--workload", action="append", help="only these (default: all)")
    ap.add_argument("--faults", action="store_true", help="also ENOSPC/EIO at every call")
    ap.add_argument("--generated", type=int, default=0, metavar="N",
                    help="also every sequence of N generated steps (8**N workloads)")
    ap.add_argument("--long", type=int, default=0, metavar="N",
                    help="also N random sequences of --long-steps steps, each with a "
                         "truncation on conflict and a restart")
    ap.add_argument("--long-steps", type=int, default=6, metavar="K")
    ap.add_argument("--no-recovery-crashes", action="store_true",
                    help="skip the crashes inside each recovery (about 6x fewer states)")
    ap.add_argument("--no-named", action="store_true",
                    help="only the --generated and --long workloads (a run split in parts)")
    ap.add_argument("-j", "--jobs", type=int, default=1, metavar="N",
                    help="explore the workloads in N processes (results as with 1)")
    ap.add_argument("--disklog-rev", metavar="REV",
                    help="explore impl/raft/disklog.py as of this git revision (e.g. a88a5d1, "
                         "before the issue 27 fixes)")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error(f"-j {args.jobs}: at least one process")
    named = {w.name for w in WORKLOADS + AFTER_FAULT_WORKLOADS}
    if unknown := [n for n in args.workload or () if n not in named]:
        # A misspelt name explored nothing and reported 0 states, 0 findings, exit 0.
        ap.error(f"no such workload: {', '.join(unknown)} (named: {', '.join(sorted(named))})")
    storage = storage_at(args.disklog_rev) if args.disklog_rev else DiskStorage
    if args.no_named and args.workload:
        ap.error("--no-named and --workload: choose one")
    wls = [w for w in WORKLOADS + AFTER_FAULT_WORKLOADS
           if not args.no_named and (not args.workload or w.name in args.workload)]
    if args.generated:
        wls += generated_workloads(args.generated)
    if args.long:
        wls += long_workloads(args.long, args.long_steps)
    if not wls:
        ap.error("no workload selected")
    t0 = time.monotonic()
    res = explore_all(wls, args.faults, storage=storage,
                      in_recovery=not args.no_recovery_crashes, jobs=args.jobs,
                      progress=_Progress(t0) if len(wls) > 1 else None)
    print(report(res))
    print(f"({time.monotonic() - t0:.1f} s)")
    return 1 if res.findings else 0



# ---- seeded bugs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mutant:
    """A bug seeded into a copy of the disk log's modules: `old` (once in the file `path`) ->
    `new` (and `old2` -> `new2`, if given, in `path2`, by default `path`). None of the
    explorer's checks was written for it."""

    name: str
    old: str
    new: str
    old2: str = ""
    new2: str = ""
    path: str = "impl/raft/disklog.py"  # relative to the repository root
    path2: str = ""

    def edits(self) -> list[tuple[str, str, str]]:
        """(path, old, new) of each replacement."""
        out = [(self.path, self.old, self.new)]
        if self.old2:
            out.append((self.path2 or self.path, self.old2, self.new2))
        return out

    def apply(self, src: str, where: str) -> str:
        """`src` (the text of the one file `where`, which all of this mutant's edits are in)
        with the edits made."""
        for _path, old, new in self.edits():
            if src.count(old) != 1:
                raise ValueError(f"mutant {self.name!r}: its text is not once in {where}")
            src = src.replace(old, new)
        return src


# Where each part of the disk log is (the files a Mutant's `path` names).
_FORMAT = "impl/raft/diskformat.py"
_ATOMIC = "impl/raft/atomicfile.py"
_RECOVERY = "impl/raft/diskrecovery.py"
# The disk log's modules, each after those it imports: a mutant's copy replaces them all.
DISK_MODULES = ("diskformat", "atomicfile", "diskrecovery", "diskupgrade", "disklog")

MUTANTS = [
    Mutant("atomic write without its directory fsync",
           '    fs.replace(tmp, path)\n    fs.fsync_dir(os.path.dirname(path) or ".")\n',
           "    fs.replace(tmp, path)\n", path=_ATOMIC),
    Mutant("atomic write fsyncs before it writes",
           "        _write_all(fs, fd, data)\n        fs.fsync(fd)\n",
           "        fs.fsync(fd)\n        _write_all(fs, fd, data)\n", path=_ATOMIC),
    Mutant("commit written before the entries it covers",
           "            first = HardState(hard_state.term, hard_state.vote, "
           "min(hard_state.commit, before))\n",
           "            first = hard_state\n"),
    Mutant("install raises the commit before the snapshot lands",
           "                    hard_state.term, hard_state.vote, "
           "min(self._hs.commit, snapshot.index)\n",
           "                    hard_state.term, hard_state.vote, "
           "min(hard_state.commit, self._last[0])\n"),
    Mutant("sync skips the directory fsync",
           "            if self._dir_dirty:\n                self.fs.fsync_dir(self.dir)\n"
           "        except OSError as e:\n            raise self.fail(e) from e\n",
           "        except OSError as e:\n            raise self.fail(e) from e\n"),
    Mutant("segment cut without fsyncing the old segment",
           "                self.fs.fsync(self._fd)\n                self.fs.close(self._fd)\n",
           "                self.fs.close(self._fd)\n"),
    Mutant("group directory created without fsyncing its parent",
           "        make_dirs_durable(self.fs, directory)\n",
           "        self.fs.makedirs(directory)\n"),
    Mutant("recovery does not make what it recovered durable",
           "            self._make_recovered_durable(run, plan)\n", "", path=_RECOVERY),
    Mutant("torn tail cut at the segment's first record",
           "                plan.truncate.append((g.path, g.torn_at))\n",
           "                plan.truncate.append((g.path, g.recs[1].off if len(g.recs) > 1 "
           "else g.torn_at))\n", path=_RECOVERY),
]


# Issue 37's defects seeded back into copies of the fixed code: the page-cache model (with a
# restart after the fault, or a second tenant) finds the first two, the byte-damage explorer
# the last two; the kinder models and the crash states (no damage) find none of them.
F1_READ_THROUGH_CACHE = Mutant(
    "recovery reads the page cache (a restart after a failed fsync)",
    "            return self.fs.read_durable(path)\n", "            return self.fs.read(path)\n",
    path=_RECOVERY)
F3_ZERO_TRAILER = Mutant(
    "records end in a zero byte (a last record's zero tail starting a sector)",
    '_TRAILER = b"\\xa5"\n', '_TRAILER = b"\\x00"\n', path=_FORMAT)
F4_NO_MARKER = Mutant(
    "record length words without the marker bit (a header's zeros ending a sector)",
    "_MARK = 0xE000_0000 ", "_MARK = 0x0000_0000 ",
    " or (framed and word & _MARK != _MARK)", "", path=_FORMAT, path2=_RECOVERY)
F2_DESCRIPTOR_PER_BARRIER = Mutant(
    "the syncfs barrier opens a descriptor per call (another tenant's error missed)",
    "                self.fs.syncfs(self._fs_fd)\n",
    "                fd = self.fs.open_fs(self.path)\n"
    "                try:\n"
    "                    self.fs.syncfs(fd)\n"
    "                finally:\n"
    "                    self.fs.close(fd)\n",
    path="impl/raft/groupcommit.py")


def mutant_group_commit(m: Mutant) -> type[GroupCommit]:
    """GroupCommit of a copy of impl/raft/groupcommit.py with the mutant's change."""
    import sys as _sys

    import epochgc.impl.raft.groupcommit as gcmod

    with open(gcmod.__file__, encoding="utf-8") as f:
        src = m.apply(f.read(), gcmod.__file__)
    name = f"epochgc.impl.raft._groupcommit_mutant_{abs(hash(m.name))}"
    mod = types.ModuleType(name)
    _sys.modules[name] = mod
    exec(compile(src, f"<groupcommit {m.name}>", "exec"), mod.__dict__)
    cls: type[GroupCommit] = mod.GroupCommit
    return cls


def damage_findings(storage: type[DiskStorage] = DiskStorage) -> list[str]:
    """Bit rot in fsynced data, exhaustively over a small log laid out so that a record's
    header starts in a sector's last 3 bytes and the last record (a hard state with zero
    vote and commit) ends a few bytes into a fresh sector (issue 37 items 3, 4): every
    single-bit flip (bit 0, bit 7) of every byte that leaves it nonzero (so no flip can
    complete an all-zero piece of a sector, which a lost sector would leave) must make
    recovery refuse or recover the same state; a recovery that cuts the log there has
    taken damage for a torn write. Returns one line per such image."""
    from epochgc.impl.raft.storage import StorageCorruption

    fs, seg = _exposed_log(storage)
    want = storage(group_dir(1), fs=RecordingFS.from_image(_image_of(fs))).load()
    data = fs.read(seg)
    cut = []
    for i, b in enumerate(data):
        for mask in (0x01, 0x80):
            if not b ^ mask:
                continue
            bad = data[:i] + bytes([b ^ mask]) + data[i + 1 :]
            fs2 = RecordingFS.from_image(_image_of(fs, {seg: bad}))
            try:
                got = storage(group_dir(1), fs=fs2).load()
            except StorageCorruption:
                continue
            if (got.entries, got.hard_state) != (want.entries, want.hard_state):
                cut.append(f"byte {i} ^ {mask:#x}: recovered {len(got.entries)} entries, hard "
                           f"state {got.hard_state}; the log holds {len(want.entries)} and "
                           f"{want.hard_state}")
    return cut


def _small_log(storage: type[DiskStorage], sizes: list[int]) -> tuple[RecordingFS, str]:
    fs = RecordingFS(ROOT)
    s = storage(group_dir(1), fs=fs)
    s.load()
    s.write(HardState(1, 1, 0), None, [])
    for idx, n in enumerate(sizes, start=1):
        s.write(None, None, [entry(idx, 1, n)])
    s.write(HardState(2, 0, 0), None, [])  # its record ends in 16 zero bytes
    s.sync()
    s.abandon()
    (seg,) = [p for p in fs.files() if p.endswith(".seg")]
    return fs, seg


def _record_starts(data: bytes) -> list[int]:
    """Where each record of a segment starts (formats 4 and 5)."""
    import struct

    out, off = [], 8
    while off + 12 <= len(data):
        out.append(off)
        (word,) = struct.unpack_from(">I", data, off)
        off += 12 + (word & 0x1FFF_FFFF) + (1 if data[7] >= 5 else 0)  # (5: a trailer)
    return out


def _exposed_log(storage: type[DiskStorage]) -> tuple[RecordingFS, str]:
    for a in range(24, 700):
        for b in (24, 60, 100):
            fs, seg = _small_log(storage, [a, 40, 40, 40, 40, 40, 40, 40, 40, b])
            data = fs.read(seg)
            if any(s % 512 >= 509 for s in _record_starts(data)) and 0 < len(data) % 512 <= 12:
                return fs, seg
    raise AssertionError("no log of that layout")


def _image_of(fs: RecordingFS, replace: dict[str, bytes] | None = None) -> Image:
    files = {**fs.files(), **(replace or {})}
    dirs = [p for p, v in fs.ns.items() if v == -1]
    return Image(tuple(sorted([(d, None) for d in dirs] + list(files.items()),
                              key=lambda e: e[0])), ())


_REMOVAL = "impl/raft/removal.py"
REMOVAL_MUTANTS = [
    Mutant("tombstone's directory entry not fsynced",
           "    fs.fsync_dir(os.path.dirname(tomb))\n", "", path=_REMOVAL),
    Mutant("tombstone's directory not made durable in its parent",
           "    make_dirs_durable(fs, os.path.dirname(tomb))\n",
           "    fs.makedirs(os.path.dirname(tomb))\n", path=_REMOVAL),
    Mutant("group directory deleted before its tombstone",
           "    make_tombstone_durable(fs, data_dir, group_id)\n    stop_group()\n"
           "    delete_tree(fs, group_path(data_dir, group_id))\n",
           "    stop_group()\n    delete_tree(fs, group_path(data_dir, group_id))\n"
           "    make_tombstone_durable(fs, data_dir, group_id)\n", path=_REMOVAL),
]


def mutant_removal(m: Mutant) -> types.ModuleType:
    """A copy of impl/raft/removal.py with the mutant's change, for `REMOVAL`."""
    with open(real_removal.__file__, encoding="utf-8") as f:
        src = f.read()
    if src.count(m.old) != 1:
        raise ValueError(f"mutant {m.name!r}: its text is not once in {real_removal.__file__}")
    name = f"epochgc.impl.raft._removal_mutant_{REMOVAL_MUTANTS.index(m)}"
    mod = types.ModuleType(name)
    exec(compile(src.replace(m.old, m.new), f"<removal {m.name}>", "exec"), mod.__dict__)
    return mod


def mutant_storage(m: Mutant) -> type[DiskStorage]:
    """DiskStorage of a copy of the disk log's modules (DISK_MODULES) with the mutant's change
    made in the files its edits name."""
    import importlib

    srcs = {}
    for mod in DISK_MODULES:
        with open(importlib.import_module(f"epochgc.impl.raft.{mod}").__file__ or "",
                  encoding="utf-8") as f:
            srcs[mod] = f.read()
    for path, old, new in m.edits():
        mod = os.path.splitext(os.path.basename(path))[0]
        if mod not in srcs:
            raise ValueError(f"mutant {m.name!r}: {path} is not one of the disk log's modules")
        if srcs[mod].count(old) != 1:
            raise ValueError(f"mutant {m.name!r}: its text is not once in {path}")
        srcs[mod] = srcs[mod].replace(old, new)
    return _storage_from(srcs, f"mutant_{abs(hash(m.name))}")


def storage_at(rev: str) -> type[DiskStorage]:
    """DiskStorage of the disk log as of a git revision (e.g. the code before the issue 27
    fixes), run against today's RecordingFS: impl/raft/disklog.py and, in revisions that have
    them, the other DISK_MODULES."""
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    srcs = {}
    for mod in DISK_MODULES:
        r = subprocess.run(["git", "show", f"{rev}:impl/raft/{mod}.py"], cwd=root,
                           capture_output=True, text=True)
        if r.returncode == 0:
            srcs[mod] = r.stdout
        elif mod == "disklog":  # (the others did not exist before the disk log was cut up)
            raise subprocess.CalledProcessError(r.returncode, r.args, r.stdout, r.stderr)
    return _storage_from(srcs, f"at_{rev}")


def _storage_from(srcs: dict[str, str], tag: str) -> type[DiskStorage]:
    """Run copies of the disk log's modules (DISK_MODULES order), each importing the others'
    copies, never the real ones; returns the copy's DiskStorage."""
    import sys as _sys
    import types

    own = re.compile(r"\bepochgc\.impl\.raft\.(" + "|".join(srcs) + r")\b")
    for mod in DISK_MODULES:
        if mod not in srcs:
            continue
        name = f"epochgc.impl.raft._{mod}_{tag}"
        # Code of a revision before the one import namespace imports `impl.`: the same modules.
        src = re.sub(r"^([ \t]*from )(impl|model)\b", r"\1epochgc.\2", srcs[mod], flags=re.M)
        src = own.sub(lambda x: f"epochgc.impl.raft._{x.group(1)}_{tag}", src)
        m = types.ModuleType(name)
        _sys.modules[name] = m  # dataclasses look their module up; the other copies import it
        exec(compile(src, f"<{mod} {tag}>", "exec"), m.__dict__)
    cls: type[DiskStorage] = _sys.modules[f"epochgc.impl.raft._disklog_{tag}"].DiskStorage
    return cls


if __name__ == "__main__":
    sys.exit(main())
