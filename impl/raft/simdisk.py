"""The simulated disks, a part of Simulator: opening a node's storage (MemStorage, or the real
DiskStorage under CrashFS or a KillableFS, with a GroupCommit), what a crash or a dying
process leaves of it, the check that a restart recovers everything the node had made
durable, and removing the disks at the end.

A mixin: `Simulator` (impl/raft/sim.py) inherits it and owns the state it reads (declared
below for the type checker, set in `Simulator.__init__`)."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import tempfile
from collections import Counter
from typing import TYPE_CHECKING

from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.fileio import CrashFS
from epochgc.impl.raft.groupcommit import GroupCommit
from epochgc.impl.raft.invariants import InvariantViolation
from epochgc.impl.raft.messages import InitialState
from epochgc.impl.raft.simfs import KillableFS
from epochgc.impl.raft.simtypes import DurableMark, Faults, SimNode
from epochgc.impl.raft.storage import MemStorage, Storage


def _tmp_root() -> str:
    """A fresh directory for simulated disks: tmpfs (/dev/shm) where present, so that a
    fuzz run's fsyncs cost no real I/O."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    return tempfile.mkdtemp(prefix="raftsim-", dir=base)


class SimDisks:
    if TYPE_CHECKING:  # the simulator's state and calls this part uses (see Simulator)
        rng: random.Random
        faults: Faults
        ids: list[int]
        nodes: dict[int, SimNode]
        stats: Counter[str]
        check_durability: bool
        disk: bool
        disk_dir: str
        segment_bytes: int
        power_loss: bool
        group_commit: bool
        group_commit_mode: str
        _fs: dict[int, CrashFS]
        _gc: dict[int, GroupCommit]

        def _record(self, tag: bytes, *nums: int) -> None: ...

        def _process(self, nid: int, crash_before_sync: bool = False) -> bool: ...

    def _open_storage(self, nid: int, group: int) -> Storage:
        if not self.disk:
            return MemStorage()
        node_dir = os.path.join(self.disk_dir, f"n{nid}")
        path = os.path.join(node_dir, f"g{group}")
        kw: dict[str, object] = {}
        if self.power_loss:
            if nid not in self._fs:
                f = self.faults
                killable = f.kill_at_call or f.enospc_snapshot or f.eio_fsync
                self._fs[nid] = KillableFS(self) if killable else CrashFS()
            kw["fs"] = self._fs[nid]
        if self.group_commit:
            os.makedirs(node_dir, exist_ok=True)
            if nid not in self._gc:
                mode = self.group_commit_mode
                # (only a parallel commit names its mode: older GroupCommits have none)
                extra = {"mode": mode} if mode != "syncfs" else {}
                self._gc[nid] = GroupCommit(node_dir, kw.get("fs"), **extra)  # type: ignore[arg-type]
            kw["group_commit"] = self._gc[nid]
        return DiskStorage(path, segment_bytes=self.segment_bytes, **kw)  # type: ignore[arg-type]

    def _check_recovered(self, sn: SimNode, group: int, init: InitialState) -> None:
        """The recovered state keeps what the node made durable before it went down."""
        mark = sn.durable.get(group)
        if not self.check_durability:
            return
        hs, snap, ents = init.hard_state, init.snapshot, init.entries
        last = ents[-1].index if ents else snap.index
        where = f"node {sn.id} group {group} after restart {sn.incarnation}"
        if hs.commit > last:
            self.stats["lost_committed_on_restart"] += 1
            raise InvariantViolation(
                f"durability: {where}: commit index {hs.commit} is past the recovered log's"
                f" last index {last} (committed entries lost)"
            )
        if mark is None:
            return
        if hs.term < mark.term or (
            hs.term == mark.term and mark.vote and hs.vote != mark.vote
        ):
            raise InvariantViolation(
                f"durability: {where}: term/vote {hs.term}/{hs.vote} recovered, but"
                f" {mark.term}/{mark.vote} had been synced"
            )
        stable = mark.stable
        if stable <= snap.index:
            return
        term = None
        if ents and ents[0].index <= stable <= last:
            term = ents[stable - ents[0].index].term
        if term != mark.stable_term:
            self.stats["lost_durable_entries"] += 1
            raise InvariantViolation(
                f"durability: {where}: entry {stable} (term {mark.stable_term}) had been"
                f" synced, but the recovered log is snapshot {snap.index}/{snap.term} +"
                f" entries {ents[0].index if ents else '-'}..{last}"
                f" (term there: {term})"
            )

    def crash(self, nid: int, mid_write: bool | None = None) -> None:
        """Stop a node; unsynced writes are lost (a seeded prefix may survive)."""
        sn = self.nodes[nid]
        if sn.host is None:
            return
        if mid_write is None:
            mid_write = self.rng.random() < self.faults.crash_mid_write
        if mid_write:
            self._relax_marks(sn)
            if not self._process(nid, crash_before_sync=True):
                return  # it died on the way (Faults.kill_at_call): already down
        if self.power_loss:
            # Power loss: every descriptor closes; each file keeps its fsynced bytes and a
            # random torn or zero-filled part of the rest; unsynced creations and
            # deletions of files may be undone.
            self._fs[nid].crash(self.rng)
        else:
            for st in sn.storages.values():
                self._crash_storage(st)
        if self.disk:
            sn.storages = {}  # the next incarnation opens its disks afresh
        sn.host = None
        sn.flush_pending = False
        self.stats["crashes"] += 1
        self._record(b"C", nid)

    def _relax_marks(self, sn: SimNode) -> None:
        """A crash between write and sync may keep a prefix of a batch that replaces a log
        suffix (or installs a snapshot): only what precedes it must survive. (`log.stable`
        drops below a replaced suffix or to an installed snapshot as soon as the core takes
        them, `unstable_from` only until their Ready is taken: a process killed inside the
        Ready's write has handed it over already.)"""
        assert sn.host is not None
        for gid, g in sn.host.groups.items():
            mark = sn.durable.get(gid)
            if mark is None:
                continue
            log = g.node.log
            keep = min(mark.stable, log.stable, log.unstable_from - 1, log.last_index())
            if keep < mark.stable:
                # At or below the in-memory snapshot: compacted away, or replaced by an
                # installed snapshot that may not be on disk yet while the old entry there
                # still is (a process killed inside the install): nothing left to compare.
                term = log.term(keep) if keep > log.snapshot.index else None
                keep, term = (keep, term) if term is not None else (0, 0)
                sn.durable[gid] = DurableMark(mark.term, mark.vote, keep, term)

    def _crash_storage(self, st: Storage) -> None:
        if isinstance(st, MemStorage):
            st.crash(self.rng)
        elif isinstance(st, DiskStorage):
            _abandon(st)  # a process kill: what was written survives, synced or not
    def close(self) -> None:
        """Stop every node (without syncing) and remove the simulated disks."""
        for nid in self.ids:
            sn = self.nodes[nid]
            if nid in self._fs:
                self._fs[nid].crash(self.rng)  # closes every descriptor it opened
            else:
                for st in sn.storages.values():
                    if isinstance(st, DiskStorage):
                        _abandon(st)
            sn.host = None
        for gc in self._gc.values():
            close = getattr(gc, "close", None)  # a parallel group commit's thread pool
            if close is not None:
                close()
        if self.disk:
            shutil.rmtree(self.disk_dir, ignore_errors=True)
    def _died(self, nid: int, why: str) -> None:
        """The node's process is gone in the middle of what it was doing: a power loss or a
        plain kill (the page cache survives), drawn at random; it stays down until a
        restart. What it had made durable may shrink as in a crash between write and sync
        (the batch under way may have replaced a log suffix)."""
        sn = self.nodes[nid]
        if sn.host is not None:
            self._relax_marks(sn)
        if self.power_loss and self.rng.random() < 0.5:
            self._fs[nid].crash(self.rng)
        else:
            for st in sn.storages.values():
                if isinstance(st, DiskStorage):
                    _abandon(st)
        sn.storages = {}
        sn.host = None
        sn.flush_pending = False
        self.stats["kills"] += 1
        self.stats[f"died: {why}"] += 1
        self._record(b"Z", nid)

def _abandon(st: DiskStorage) -> None:
    """A killed process: its descriptors go away without a sync; what was written stays in
    the page cache, synced or not."""
    if hasattr(st, "abandon"):
        st.abandon()
        return
    for name in ("_fd", "_dirty_fds"):
        v = getattr(st, name, None)
        for fd in v if isinstance(v, list) else [v]:
            if isinstance(fd, int) and fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        if v is not None:
            setattr(st, name, [] if isinstance(v, list) else -1)
