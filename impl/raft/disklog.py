"""DiskStorage: a segmented, append-only log whose record checksums are chained across records
and segments, plus an atomically replaced snapshot file, for one Raft group in one directory.
On-disk format version 5 (segments; the snapshot file is still format 4); format-4 segments
are read and never appended to; format 3 is read and rewritten on first start ("Upgrade").

Layout:
  snapshot              crc32 | u8 format | u64 group | u64 install_seq | u32 install_tag |
                        encoded Snapshot   (temp + fsync + rename + fsync dir)
  NNNNNNNNNNNNNNNN.seg  magic | START record | records...
  quarantine/           files recovery proved redundant and moved aside (never deleted)
A record is  u32 0xe0000000|length | u32 crc | u32 crc32(first 8 bytes) | payload | u8 0xa5,
payload = u8 kind | body (format 4: no marker bit, no trailer byte): its first and last bytes
are never zero, so the torn-write rule below never mistakes its own zeros for a lost sector.
`crc` is crc32(payload) seeded with the previous record's crc (a chain, like etcd's WAL): a
record is valid only at its own place after its own predecessors. The START record (first of
every segment) is seeded with 0 and carries `chain`, the last crc of the previous segment, so
the chain runs across segments too. START also names the group, the segment's own sequence
number, the installed snapshot's tag (FRESH segments), the index and term of the log's last
entry when the segment was cut and the hard state then. ENTRY: an encoded Entry (an index at
or below the last replaces the suffix from there). STATE: a new hard state (term, vote,
commit). The header has its own checksum so a damaged length is never taken for a torn tail.

Snapshots are not log records, so what recovery makes of the log never depends on which
segments were deleted:
* a local compaction at c only rewrites the snapshot file (index c, same install); records of
  entries at or below its index are skipped at recovery. It trims, it never clears;
* an installed snapshot (from the leader) starts a fresh log: the snapshot file records
  `install_seq`, the segment cut for it, and `install_tag` (the crc of the installed file),
  which that segment's START repeats; entries in segments before it are ignored at recovery.
  A FRESH segment at or after `install_seq` anywhere but at `install_seq` is refused.
Segments are deleted only after a sync, only as a prefix, and only if they are before
`install_seq` or hold no entry above the snapshot's index.

Hard state rides in the log (like etcd's WAL): a STATE record is written before the batch's
entries with its commit clamped to the log as it was before them, and, if that clamped the
commit, again after them; so a durable commit index never points past a durable entry, and a
durable entry of term T always follows a durable hard state of term >= T. An install makes
only term and vote durable before the snapshot file (a commit raised before the snapshot
lands would cover the old log's uncommitted entries); the commit follows the snapshot.

Durability: the old segment is fsynced (and the directory, so that only the last segment can
vanish) before the next one is cut; `sync` fsyncs the live segment and the directory, then
deletes what the snapshot covers. Every directory this creates is made durable in its parent
(fileio.make_dirs_durable). Short writes are continued; any OSError from write or fsync
(ENOSPC, EIO) makes the storage fail for good (StorageFailed).

Recovery validates everything before it changes anything, and then changes only what it has
proven: the checksum chain, each START's group, sequence and chain, the snapshot file's group
and install tag, contiguous indexes, terms never decreasing (entries and hard states), the
hard state's term not below the last entry's or the snapshot's, commit within the log. A
torn write (etcd's rule, made stricter) is tolerated only in the last segment: an incomplete
last record, or a failing record overlapping a 512-byte sector that is all zeros from the
record (or the sector) on to the sector's (or the file's) end: a crash loses whole unsynced
sectors, in any order; bit rot and misplaced records do not zero them (see `_torn` for what
format 5 changed and what stays ambiguous). Segments and the snapshot file are read as the
device holds them, not as the page cache does (FileIO.read_durable: after a failed fsync the
cache keeps what the disk never got). The segment is cut at
that record (what followed it was never synced, so never acknowledged), after the bytes cut
off (unless all zeros) are copied durably into quarantine/ (a zeroed sector of fsynced data
looks the same as a torn write). A segment, snapshot or temporary name that is not a regular
file (lstat: symlink, FIFO, directory) is refused before anything is opened; of *.tmp names
only this log's own (snapshot.tmp, NNNNNNNNNNNNNNNN.seg.tmp) are removed. Any other
damage raises StorageCorruption naming file and offset. Segments before a gap in the
numbering (unlinks that did not reach the disk) are moved into quarantine/ only once read and
proven redundant (before the install or wholly covered by the snapshot); otherwise refused.

Upgrade: a directory of format 3 (per-record checksums, no binding) is read with the format-3
rules, then rewritten: one FRESH segment holding the whole recovered log (written as a temp
file, fsynced, renamed; format 5, or format 4 when finishing an upgrade a format-4 version
began), a format-4 snapshot file naming it (the switch), and the format-3 segments moved into
quarantine/. A crash at any step leaves a directory this reads again. Within an upgrade a
segment is the upgrade's only if it has a whole format-4 or -5 magic at the number the
upgrade writes (above every other segment's); anything else is format 3, a last segment a
crash left empty, zeroed or with part of its magic included. The new segment's START carries
START_UPGRADE: after the switch, segments below it without a format-4 or -5 magic are the
format-3 log's remains and are moved aside too.
Format 2 and older are refused (restore the node from a peer).

`group_commit`: storages of one node may share a GroupCommit (impl/raft/groupcommit.py) so
that one barrier per Ready batch (concurrent fsyncs, or one syncfs) covers every group; see
`impl.raft.storage.sync_all`.

This module is the writer (append, install, compact, sync, close); the other parts are:
impl/raft/diskformat.py (the bytes: formats, record framing, the torn-write rule),
impl/raft/atomicfile.py (atomic_write), impl/raft/diskrecovery.py (load: read, validate,
plan, apply; mixin DiskRecovery) and impl/raft/diskupgrade.py (the format-3 rewrite; mixin
DiskUpgrade). DiskStorage is the one class: its parts share its state.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from collections.abc import Sequence

from epochgc.impl.raft.atomicfile import _write_all, atomic_write
from epochgc.impl.raft.codec import encode_entry, encode_snapshot
from epochgc.impl.raft.diskformat import (
    _HEAD,
    _MARK,
    _SNAPHEAD,
    _START,
    _TRAILER,
    _U32,
    KIND_ENTRY,
    KIND_START,
    KIND_STATE,
    MAGIC,
    SNAP_FORMAT,
    START_FRESH,
    _record,
    _state_body,
    group_of,
)
from epochgc.impl.raft.diskrecovery import DiskRecovery
from epochgc.impl.raft.diskupgrade import DiskUpgrade
from epochgc.impl.raft.fileio import FileIO, OsFileIO, make_dirs_durable
from epochgc.impl.raft.groupcommit import GroupCommit
from epochgc.impl.raft.messages import Entry, HardState, InitialState, Snapshot
from epochgc.impl.raft.storage import StorageFailed


class DiskStorage(DiskRecovery, DiskUpgrade):
    """The Storage of one group in `directory` (see the module docstring).

    `fs` is the file-system layer (default: the real `os`; tests pass a CrashFS).
    `group_commit`: a GroupCommit shared by the node's storages (one barrier per batch).
    `group_id`: the group whose log this is, written into every START record and the snapshot
    file and checked at recovery (default: <id> of a directory named g<id>, else 0)."""

    def __init__(
        self,
        directory: str,
        segment_bytes: int = 64 << 20,
        fs: FileIO | None = None,
        group_commit: GroupCommit | None = None,
        group_id: int | None = None,
    ) -> None:
        self.dir = directory
        self.segment_bytes = segment_bytes
        self.fs: FileIO = fs or OsFileIO()
        self.group_commit = group_commit
        self.group = group_of(directory) if group_id is None else group_id
        make_dirs_durable(self.fs, directory)
        self._fd = -1
        self._loaded: InitialState | None = None
        self._failed: StorageFailed | None = None
        self._reset()

    def _reset(self) -> None:
        """The state before recovery (a load() starts from it, even after a refused one)."""
        self.abandon()
        self._hs = HardState()
        self._snap = Snapshot()
        self._install_seq = 0
        self._install_tag = 0
        self._segments: list[tuple[int, int]] = []  # (sequence number, max entry index)
        self._fd = -1
        self._size = 0
        self._crc = 0  # the chain: crc of the last record written (or recovered)
        self._dir_dirty = False
        self._unsynced = False  # bytes appended to the live segment since the last fsync
        self._last = (0, 0)  # index and term of the last entry written (or the snapshot's)
        self._need_fresh = False  # the next segment starts the log after an installed snapshot

    # ---- writing -------------------------------------------------------------------------

    def write(
        self,
        hard_state: HardState | None,
        snapshot: Snapshot | None,
        entries: Sequence[Entry],
        compacted: Snapshot | None = None,
    ) -> None:
        """Storage.write's contract. `snapshot`: installed from the leader (the log restarts
        after it; its file is durable when this returns, before its entries: the caller must
        still `sync` the rest); `compacted`: a local compaction (drops entries up to its
        index, keeps the rest). Raises StorageFailed (a write failed, ENOSPC: stop) and
        ValueError for a snapshot not past the current one (a caller bug)."""
        if self._loaded is None:
            self.load()
        self._check()
        if snapshot is not None:
            if snapshot.index <= self._snap.index:
                raise ValueError(
                    f"installing a snapshot at {snapshot.index}, not past the one at "
                    f"{self._snap.index}"
                )
            if hard_state is not None and (hard_state.term, hard_state.vote) != (
                self._hs.term,
                self._hs.vote,
            ):
                # The snapshot file is durable at once: make the term that came with it
                # durable first, so that a crash never leaves a snapshot of a newer term
                # than the recovered hard state. Only term and vote: the old log diverges
                # from the leader's after the old commit, so a commit raised here would
                # mark the old log's own uncommitted entries committed if the snapshot file
                # never lands (and point past the fresh log if its segment is lost). The
                # commit is raised only after the snapshot, by the records below.
                hs = HardState(
                    hard_state.term, hard_state.vote, min(self._hs.commit, snapshot.index)
                )
                self._append(KIND_STATE, [_state_body(hs)], 0)
                self._hs = hs
                self._flush_live()
            self._install(snapshot)
        elif compacted is not None and compacted.index > self._snap.index:
            self._write_snapshot_file(compacted, self._install_seq, self._install_tag)
        if hard_state is not None and hard_state != self._hs:
            before = entries[0].index - 1 if entries else self._last[0]
            first = HardState(hard_state.term, hard_state.vote, min(hard_state.commit, before))
            self._append(KIND_STATE, [_state_body(first)], 0)
            self._hs = first
        if entries:
            self._append(KIND_ENTRY, [encode_entry(e) for e in entries], entries[-1].index)
            self._last = (entries[-1].index, entries[-1].term)
        if hard_state is not None and hard_state != self._hs:
            self._append(KIND_STATE, [_state_body(hard_state)], 0)
            self._hs = hard_state

    def sync(self) -> None:
        """Storage.sync's contract: everything written so far is durable when it returns (with
        a GroupCommit, through its barrier); then segments the snapshot covers are deleted.
        Raises StorageFailed (fatal, sticky: never call it again)."""
        if self.group_commit is not None:
            self.group_commit.commit([self])
            return
        self._check()
        self.fsync_own()
        self.post_barrier()

    # The two halves of a sync, for GroupCommit (one barrier for many storages).

    def pre_barrier(self) -> bool:
        """GroupCommit's first half: whether this storage has anything for the next barrier
        to make durable. The caller must follow a True with a barrier covering this
        storage's files, then `post_barrier` (success) or `fail` (failure)."""
        self._check()
        return self._unsynced or self._dir_dirty

    def fsync_own(self) -> None:
        """This storage's own barrier: fsync the live segment and, if needed, the directory.
        Raises StorageFailed (the storage has failed for good)."""
        try:
            if self._unsynced:
                self.fs.fsync(self._fd)
            if self._dir_dirty:
                self.fs.fsync_dir(self.dir)
        except OSError as e:
            raise self.fail(e) from e

    def post_barrier(self) -> None:
        """The barrier covering this storage succeeded: record that everything written is
        durable, and delete what the snapshot covers. Only after a successful barrier."""
        self._unsynced = False
        self._dir_dirty = False
        self._drop_old_segments()

    def fail(self, exc: BaseException) -> StorageFailed:
        """A barrier covering this storage failed: make the storage fail for good (every
        later call raises); returns the sticky error for the caller to raise."""
        if self._failed is None:
            self._failed = StorageFailed(self.dir, f"fsync failed: {exc}")
        return self._failed

    def close(self) -> None:
        """Sync (unless failed) and close; the storage is not used again."""
        if self._failed is None:
            self.sync()
        self.abandon()

    def abandon(self) -> None:
        """A killed process: close the descriptor without syncing (what reaches the disk is
        then the kernel's business, or CrashFS.crash's). Nothing unsynced is acknowledged;
        the storage is not used again (a new one recovers the directory)."""
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                self.fs.close(self._fd)
        self._fd = -1

    # ---- internals -----------------------------------------------------------------------

    def _check(self) -> None:
        if self._failed is not None:
            raise self._failed

    def _io(self, what: str, path: str, exc: OSError) -> StorageFailed:
        self._failed = StorageFailed(path, f"{what} failed: {exc}")
        return self._failed

    def _flush_live(self) -> None:
        self.fsync_own()
        self._dir_dirty = False
        self._unsynced = False

    def _install(self, snap: Snapshot) -> None:
        seq = self._next_seq()
        tag = self._snapshot_tag(snap, seq)
        self._write_snapshot_file(snap, seq, tag)
        self._install_seq, self._install_tag = seq, tag
        self._last = (snap.index, snap.term)
        self._cut(fresh=True)

    def _snapshot_tag(self, snap: Snapshot, install_seq: int) -> int:
        """The tag binding an installed snapshot file to its FRESH segment."""
        return zlib.crc32(
            _SNAPHEAD.pack(SNAP_FORMAT, self.group, install_seq, 0) + encode_snapshot(snap)
        )

    def _write_snapshot_file(self, snap: Snapshot, install_seq: int, tag: int) -> None:
        body = _SNAPHEAD.pack(SNAP_FORMAT, self.group, install_seq, tag) + encode_snapshot(snap)
        path = self._path("snapshot")
        try:
            atomic_write(path, struct.pack(">I", zlib.crc32(body)) + body, self.fs)
        except OSError as e:
            raise self._io("writing the snapshot", path, e) from e
        self._snap = snap

    def _next_seq(self) -> int:
        return max(self._segments[-1][0] + 1 if self._segments else 1, self._install_seq)

    def _append(self, kind: int, bodies: list[bytes], max_index: int) -> None:
        if self._fd < 0 or self._size >= self.segment_bytes:
            self._cut()
        # (inlined _record: this is the hot path)
        parts = []
        crc = self._crc
        kb = bytes((kind,))
        head_pack, u32_pack, crc32, trailer = _HEAD.pack, _U32.pack, zlib.crc32, _TRAILER
        for body in bodies:
            payload = kb + body
            crc = crc32(payload, crc)
            head = head_pack(len(payload) | _MARK, crc)
            parts.append(head + u32_pack(crc32(head)) + payload + trailer)
        buf = b"".join(parts)
        path = self._seg_path(self._segments[-1][0])
        self._unsynced = True
        try:
            _write_all(self.fs, self._fd, buf)
        except OSError as e:
            raise self._io("write", path, e) from e
        self._crc = crc
        self._size += len(buf)
        seq, old = self._segments[-1]
        self._segments[-1] = (seq, max(old, max_index))

    def _cut(self, fresh: bool = False) -> None:
        seq = self._next_seq()
        try:
            if self._fd >= 0:
                # The old segment is durable before the next exists, and so is its directory
                # entry: a crash can then only tear (or lose) the last segment.
                self.fs.fsync(self._fd)
                self.fs.close(self._fd)
                self._fd = -1
                self.fs.fsync_dir(self.dir)
            self._fd = self.fs.open_append(self._seg_path(seq), create=True)
            self._segments.append((seq, 0))
            self._dir_dirty = True
            self._unsynced = True
            hs = self._hs
            fresh = fresh or self._need_fresh
            self._need_fresh = False
            start = _START.pack(
                START_FRESH if fresh else 0,
                self.group,
                seq,
                self._crc,
                self._install_tag if fresh else 0,
                *self._last,
                hs.term,
                hs.vote,
                hs.commit,
            )
            rec, crc = _record(KIND_START, start, 0)
            head = MAGIC + rec
            _write_all(self.fs, self._fd, head)
        except OSError as e:
            raise self._io("cutting a segment", self._seg_path(seq), e) from e
        self._crc = crc
        self._size = len(head)

    def _drop_old_segments(self) -> None:
        # Only a prefix: segments before an installed snapshot, or holding no entry above
        # the (already durable) snapshot. The live segment is never removed.
        while len(self._segments) > 1 and (
            self._segments[0][0] < self._install_seq or self._segments[0][1] <= self._snap.index
        ):
            seq, _ = self._segments.pop(0)
            path = self._seg_path(seq)
            try:
                self.fs.unlink(path)
            except OSError as e:
                raise self._io("unlink", path, e) from e
            self._dir_dirty = True

    # ---- paths ---------------------------------------------------------------------------

    def _path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def _seg_path(self, seq: int) -> str:
        return os.path.join(self.dir, f"{seq:016d}.seg")
