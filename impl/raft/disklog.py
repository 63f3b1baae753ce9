"""DiskStorage: a segmented, append-only, CRC'd log plus an atomically replaced snapshot file, for
one Raft group in one directory. On-disk format version 3.

Layout:
  snapshot              crc32 | u8 format | u64 install_seq | encoded Snapshot
                        (temp + fsync + rename + fsync dir)
  NNNNNNNNNNNNNNNN.seg  magic | START record | records...
A record is  u32 length | u32 crc32(payload) | u32 crc32(length, crc) | payload,
payload = u8 kind | body. The header has its own checksum so a damaged length can never be
mistaken for a torn tail (which would silently drop fsynced records after it).
Kinds: START (first record of every segment: the index and term of the log's last entry when
the segment was cut, the hard state then, and a flag FRESH if it was cut for an installed
snapshot), ENTRY (an encoded Entry; an index at or below the
last replaces the suffix from there), STATE (a new hard state: term, vote, commit).

Snapshots are not log records, so what recovery makes of the log never depends on which
segments were deleted:
* a local compaction at c only rewrites the snapshot file (index c); records of entries at or
  below the snapshot file's index are skipped at recovery. It trims, it never clears;
* an installed snapshot (from the leader) starts a fresh log: the snapshot file records
  `install_seq`, the segment cut for it (whose START says "the log ends at the snapshot");
  entries in segments before it are ignored at recovery, whatever survived.
Segments are deleted only after a sync, only as a prefix, and only if they are before
`install_seq` or hold no entry above the snapshot's index.

Hard state rides in the log (like etcd's WAL): a STATE record is written before the batch's
entries with its commit clamped to the log as it was before them, and, if that clamped the
commit, again after them; so a durable commit index never points past a durable entry, and
a durable entry of term T always follows a durable hard state of term >= T.

Durability: the old segment is fsynced (and the directory, so that only the last segment can
vanish) before the next one is cut; `sync` fsyncs the live segment and the directory, then
deletes what the snapshot covers. Short writes are continued; any OSError from write or fsync
(ENOSPC, EIO) makes the storage fail for good (StorageFailed): after a failed fsync the page
cache can no longer be trusted, so nothing is retried and the node must stop.

Recovery checks the recovered log: contiguous indexes, terms never decreasing, the snapshot's
term not above the first entry's, each segment starting where the previous ended, commit within
the log. Any violation, and any damage that is not a torn write, raises StorageCorruption
naming file and offset. A torn write is tolerated only in the last segment, in its last
record: an incomplete record at the end, or a record whose header or payload fails its
checksum if only zeros follow it and they begin at its start or at a sector boundary inside it
(a crash persists whole sectors; bit rot does not zero them). The format is not the previous
one's (version 2, whose snapshot markers were ambiguous): such a directory is refused with a
message saying so (restore the node from a peer).

`group_commit`: storages of one node may share a GroupCommit (impl/raft/groupcommit.py) so
that one syncfs per Ready batch covers every group; see `impl.raft.storage.sync_all`.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from collections.abc import Sequence

from impl.raft.codec import CodecError, decode_entry, decode_snapshot, encode_entry, encode_snapshot
from impl.raft.fileio import SECTOR, FileIO, OsFileIO
from impl.raft.groupcommit import GroupCommit
from impl.raft.messages import Entry, HardState, InitialState, Snapshot
from impl.raft.storage import StorageCorruption, StorageFailed

FORMAT = 3
MAGIC = b"EGRLOG\x00" + bytes([FORMAT])  # 7 bytes of magic + 1 byte format version
_REC = struct.Struct(">III")  # length, crc32(payload), crc32 of the first 8 header bytes
_START = struct.Struct(">BQQQQQ")  # flags, tail index, tail term, hs term, vote, commit
START_FRESH = 1  # the segment was cut for an installed snapshot: a fresh log starts here
_STATE = struct.Struct(">QQQ")  # term, vote, commit
_SNAPHEAD = struct.Struct(">BQ")  # format, install_seq
KIND_ENTRY = 1
KIND_STATE = 3
KIND_START = 4
MAX_RECORD = 256 << 20


def atomic_write(path: str, data: bytes, fs: FileIO | None = None) -> None:
    """Replace path with data so that a crash leaves either the old or the new content."""
    fs = fs or OsFileIO()
    tmp = path + ".tmp"
    fd = fs.open_trunc(tmp)
    try:
        _write_all(fs, fd, data)
        fs.fsync(fd)
    finally:
        fs.close(fd)
    fs.replace(tmp, path)
    fs.fsync_dir(os.path.dirname(path) or ".")


def _write_all(fs: FileIO, fd: int, data: bytes) -> None:
    """write(2) may write less than asked (a signal, a nearly full disk): continue."""
    off = 0
    while off < len(data):
        n = fs.write(fd, data[off:] if off else data)
        if n <= 0:
            raise OSError(f"write returned {n}")
        off += n


def _record(kind: int, body: bytes) -> bytes:
    payload = bytes([kind]) + body
    head = struct.pack(">II", len(payload), zlib.crc32(payload))
    return head + struct.pack(">I", zlib.crc32(head)) + payload


def _state_record(hs: HardState) -> bytes:
    return _record(KIND_STATE, _STATE.pack(hs.term, hs.vote, hs.commit))


def _torn(data: bytes, start: int, end: int) -> bool:
    """A record [start, end) that fails a checksum is a torn write only if nothing but zeros
    follows it and the zeros begin at its start or at a sector boundary inside it (a crash
    persists whole sectors; bit rot does not zero them)."""
    zt = len(data.rstrip(b"\0"))  # where the trailing zeros begin
    if zt >= end:
        return False
    return zt <= start or -(-zt // SECTOR) * SECTOR < end


class DiskStorage:
    """The Storage of one group in `directory` (see the module docstring).

    `fs` is the file-system layer (default: the real `os`; tests pass a CrashFS).
    `group_commit`: a GroupCommit shared by the node's storages (one syncfs per batch)."""

    def __init__(
        self,
        directory: str,
        segment_bytes: int = 64 << 20,
        fs: FileIO | None = None,
        group_commit: GroupCommit | None = None,
    ) -> None:
        self.dir = directory
        self.segment_bytes = segment_bytes
        self.fs: FileIO = fs or OsFileIO()
        self.group_commit = group_commit
        self.fs.makedirs(directory)
        self._hs = HardState()
        self._snap = Snapshot()
        self._install_seq = 0
        self._segments: list[tuple[int, int]] = []  # (sequence number, max entry index)
        self._fd = -1
        self._size = 0
        self._dir_dirty = False
        self._unsynced = False  # bytes appended to the live segment since the last fsync
        self._last = (0, 0)  # index and term of the last entry written (or the snapshot's)
        self._loaded: InitialState | None = None
        self._failed: StorageFailed | None = None
        self._need_fresh = False  # the next segment starts the log after an installed snapshot

    # ---- recovery ------------------------------------------------------------------------

    def load(self) -> InitialState:
        if self._loaded is not None:
            return self._loaded
        self._check()
        for name in self.fs.listdir(self.dir):
            if name.endswith(".tmp"):
                self.fs.unlink(self._path(name))  # an interrupted atomic write
        if self.fs.exists(self._path("hardstate")):
            raise StorageCorruption(
                self._path("hardstate"),
                0,
                "a Raft log of on-disk format 2, which this version (format 3) refuses: its "
                "snapshot markers cannot be replayed safely; restore this node from a peer",
            )
        self._read_snapshot_file()
        seqs = sorted(int(n[:-4]) for n in self.fs.listdir(self.dir) if n.endswith(".seg"))
        # Segments are only ever deleted as a prefix and, since each cut fsyncs the directory,
        # only the last one can vanish: anything before a hole in the numbering is a deleted
        # segment whose unlink did not reach the disk. Delete it again.
        run_from = len(seqs)
        while run_from > 0 and (run_from == len(seqs) or seqs[run_from - 1] == seqs[run_from] - 1):
            run_from -= 1
        for seq in seqs[:run_from]:
            self.fs.unlink(self._seg_path(seq))
            self._dir_dirty = True
        log = self._replay([s for s in seqs[run_from:]])
        if self._segments and self._segments[-1][0] >= self._install_seq:
            self._fd = self.fs.open_append(self._seg_path(self._segments[-1][0]), create=False)
            self._size = self.fs.size(self._fd)
        else:  # the installed snapshot's segment never reached the disk: cut it afresh
            self._need_fresh = self._install_seq > 0
        if self._dir_dirty:
            self.fs.fsync_dir(self.dir)
            self._dir_dirty = False
        self._last = (log[-1].index, log[-1].term) if log else (self._snap.index, self._snap.term)
        self._loaded = InitialState(self._hs, self._snap, tuple(log), origin=self.dir)
        return self._loaded

    def _read_snapshot_file(self) -> None:
        path = self._path("snapshot")
        if not self.fs.exists(path):
            return
        raw = self.fs.read(path)
        if len(raw) < 4 + _SNAPHEAD.size:
            raise StorageCorruption(path, 0, "file shorter than its header")
        (crc,) = struct.unpack_from(">I", raw, 0)
        if zlib.crc32(raw[4:]) != crc:
            raise StorageCorruption(path, 0, "checksum mismatch")
        fmt, install_seq = _SNAPHEAD.unpack_from(raw, 4)
        if fmt != FORMAT:
            raise StorageCorruption(
                path,
                4,
                f"snapshot file of another on-disk format (byte {fmt}; this version writes "
                f"{FORMAT}): logs of format 2 or older are refused, restore this node from a peer",
            )
        try:
            self._snap = decode_snapshot(raw[4 + _SNAPHEAD.size :])
        except CodecError as e:
            raise StorageCorruption(path, 4 + _SNAPHEAD.size, str(e)) from e
        self._install_seq = install_seq

    def _replay(self, seqs: list[int]) -> list[Entry]:
        s = self._snap
        log: list[Entry] = []  # entries above the snapshot, contiguous from s.index + 1
        at: list[tuple[str, int]] = []  # where each of them was read
        tail: int | None = None  # index of the log's last entry at this point of the replay
        hs_at: tuple[str, int] = (self.dir, 0)
        seen_active = False
        for k, seq in enumerate(seqs):
            path = self._seg_path(seq)
            last_seg = k == len(seqs) - 1
            data = self.fs.read(path)
            if data[:7] == MAGIC[:7] and len(data) >= 8 and data[7] != FORMAT:
                raise StorageCorruption(
                    path,
                    7,
                    f"segment of on-disk format {data[7]}, which this version (format "
                    f"{FORMAT}) refuses: its snapshot markers cannot be replayed safely; "
                    "restore this node from a peer",
                )
            recs = self._records(path, data, last_seg)
            if not recs or recs[0][1][0] != KIND_START:
                if last_seg and not recs and (MAGIC.startswith(data[:8]) or not any(data)):
                    self.fs.unlink(path)  # torn while being created: it never held anything
                    self._dir_dirty = True
                    break
                raise StorageCorruption(path, len(MAGIC), "segment does not begin with START")
            active = seq >= self._install_seq
            max_index = 0
            for off, payload in recs:
                kind, body = payload[0], payload[1:]
                try:
                    if kind == KIND_START:
                        if off != len(MAGIC):
                            raise ValueError("START record inside a segment")
                        flags, t_index, _t_term, term, vote, commit = _START.unpack(body)
                        fresh = bool(flags & START_FRESH)
                        if tail is not None and t_index != tail and not fresh:
                            raise ValueError(
                                f"segment starts after entry {t_index} but the log before "
                                f"it ends at {tail}"
                            )
                        if fresh and active:
                            if t_index > s.index:
                                raise ValueError(
                                    f"installed-snapshot segment at {t_index} is past the "
                                    f"snapshot file's index {s.index}"
                                )
                            log.clear()
                            at.clear()
                        elif seq == self._install_seq:
                            raise ValueError("the installed snapshot's segment is not fresh")
                        tail = t_index
                        seen_active = seen_active or active
                        self._hs = HardState(term, vote, commit)
                        hs_at = (path, off)
                    elif kind == KIND_STATE:
                        self._hs = HardState(*_STATE.unpack(body))
                        hs_at = (path, off)
                    elif kind == KIND_ENTRY:
                        e = decode_entry(body)
                        if tail is not None and e.index > tail + 1:
                            raise ValueError(f"gap: entry {e.index} after {tail}")
                        tail = e.index
                        if not active:
                            continue  # before an installed snapshot: discarded by it
                        max_index = max(max_index, e.index)
                        self._replay_entry(e, log, at, (path, off))
                    else:
                        raise ValueError(f"unknown record kind {kind}")
                except (CodecError, ValueError, struct.error) as err:
                    raise StorageCorruption(path, off, f"bad record: {err}") from err
            self._segments.append((seq, max_index))
        # Terms are checked on the recovered log only: a record that a later one replaced may
        # well have had a lower term than the snapshot taken after the replacement.
        prev = s.term
        for e, (path, off) in zip(log, at, strict=True):
            if e.term < prev:
                raise StorageCorruption(
                    path, off, f"entry {e.index} of term {e.term} follows term {prev}"
                )
            prev = e.term
        last = s.index + len(log)
        if seen_active and tail is not None and tail > last:
            path = self._seg_path(self._segments[-1][0])
            raise StorageCorruption(
                path, 0, f"the log ended at {tail} but only {last} is recoverable: entries lost"
            )
        if self._hs.commit > last:
            raise StorageCorruption(
                hs_at[0],
                hs_at[1],
                f"commit index {self._hs.commit} is past the last entry {last}: the log lost "
                "committed entries",
            )
        return log

    def _replay_entry(
        self, e: Entry, log: list[Entry], at: list[tuple[str, int]], loc: tuple[str, int]
    ) -> None:
        s = self._snap
        if e.index <= s.index:
            log.clear()  # the suffix it truncates is all above the snapshot; itself covered
            at.clear()
            return
        del log[e.index - s.index - 1 :]
        del at[e.index - s.index - 1 :]
        if e.index != s.index + 1 + len(log):
            raise ValueError(
                f"gap: entry {e.index} but the log after the snapshot at {s.index} ends at "
                f"{s.index + len(log)}"
            )
        log.append(e)
        at.append(loc)

    def _records(self, path: str, data: bytes, last: bool) -> list[tuple[int, bytes]]:
        """(offset, payload) of every whole record; a torn tail of the last segment is cut."""
        if len(data) < len(MAGIC):
            if (last and MAGIC.startswith(data)) or not any(data):
                return []
            raise StorageCorruption(path, 0, "segment shorter than its header")
        if data[: len(MAGIC)] != MAGIC:
            if last and not any(data):
                return []
            raise StorageCorruption(path, 0, "bad segment header")
        out: list[tuple[int, bytes]] = []
        off = len(MAGIC)
        while off < len(data):
            torn = False
            if off + _REC.size > len(data):
                torn, why = True, "truncated record header"
            else:
                n, crc, hcrc = _REC.unpack_from(data, off)
                end = off + _REC.size + n
                if zlib.crc32(data[off : off + 8]) != hcrc:
                    torn = _torn(data, off, off + _REC.size)
                    why = "record header checksum mismatch"
                elif n == 0 or n > MAX_RECORD:
                    raise StorageCorruption(path, off, f"bad record length {n}")
                elif end > len(data):
                    torn, why = True, "record runs past the end of the segment"
                elif zlib.crc32(data[off + _REC.size : end]) != crc:
                    torn = _torn(data, off, end)
                    why = "record checksum mismatch"
                else:
                    out.append((off, data[off + _REC.size : end]))
                    off = end
                    continue
            if torn and last:
                self.fs.truncate(path, off)  # a torn write: it never finished, never acked
                break
            raise StorageCorruption(path, off, why)
        return out

    # ---- writing -------------------------------------------------------------------------

    def write(
        self,
        hard_state: HardState | None,
        snapshot: Snapshot | None,
        entries: Sequence[Entry],
        compacted: Snapshot | None = None,
    ) -> None:
        """`snapshot`: installed from the leader (the log restarts after it); `compacted`: a
        local compaction (drops entries up to its index, keeps the rest)."""
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
                self._append(_state_record(hs), 0)
                self._hs = hs
                self._flush_live()
            self._install(snapshot)
        elif compacted is not None and compacted.index > self._snap.index:
            self._write_snapshot_file(compacted, self._install_seq)
        if hard_state is not None and hard_state != self._hs:
            before = entries[0].index - 1 if entries else self._last[0]
            first = HardState(hard_state.term, hard_state.vote, min(hard_state.commit, before))
            self._append(_state_record(first), 0)
            self._hs = first
        if entries:
            buf = b"".join(_record(KIND_ENTRY, encode_entry(e)) for e in entries)
            self._append(buf, entries[-1].index)
            self._last = (entries[-1].index, entries[-1].term)
        if hard_state is not None and hard_state != self._hs:
            self._append(_state_record(hard_state), 0)
            self._hs = hard_state

    def sync(self) -> None:
        if self.group_commit is not None:
            self.group_commit.commit([self])
            return
        self._check()
        self.fsync_own()
        self.post_barrier()

    # The two halves of a sync, for GroupCommit (one barrier for many storages).

    def pre_barrier(self) -> bool:
        self._check()
        return self._unsynced or self._dir_dirty

    def fsync_own(self) -> None:
        """This storage's own barrier: fsync the live segment and, if needed, the directory."""
        try:
            if self._unsynced:
                self.fs.fsync(self._fd)
            if self._dir_dirty:
                self.fs.fsync_dir(self.dir)
        except OSError as e:
            raise self.fail(e) from e

    def post_barrier(self) -> None:
        """Everything written is durable: record it, and delete what the snapshot covers."""
        self._unsynced = False
        self._dir_dirty = False
        self._drop_old_segments()

    def fail(self, exc: BaseException) -> StorageFailed:
        if self._failed is None:
            self._failed = StorageFailed(self.dir, f"fsync failed: {exc}")
        return self._failed

    def close(self) -> None:
        if self._failed is None:
            self.sync()
        self.abandon()

    def abandon(self) -> None:
        """A killed process: close the descriptor without syncing (what reaches the disk is
        then the kernel's business, or CrashFS.crash's)."""
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
        self._write_snapshot_file(snap, seq)
        self._install_seq = seq
        self._last = (snap.index, snap.term)
        self._cut(fresh=True)

    def _write_snapshot_file(self, snap: Snapshot, install_seq: int) -> None:
        body = _SNAPHEAD.pack(FORMAT, install_seq) + encode_snapshot(snap)
        path = self._path("snapshot")
        try:
            atomic_write(path, struct.pack(">I", zlib.crc32(body)) + body, self.fs)
        except OSError as e:
            raise self._io("writing the snapshot", path, e) from e
        self._snap = snap

    def _next_seq(self) -> int:
        return max(self._segments[-1][0] + 1 if self._segments else 1, self._install_seq)

    def _append(self, buf: bytes, max_index: int) -> None:
        if self._fd < 0 or self._size >= self.segment_bytes:
            self._cut()
        path = self._seg_path(self._segments[-1][0])
        self._unsynced = True
        try:
            _write_all(self.fs, self._fd, buf)
        except OSError as e:
            raise self._io("write", path, e) from e
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
            flags = START_FRESH if fresh or self._need_fresh else 0
            self._need_fresh = False
            start = _START.pack(flags, *self._last, hs.term, hs.vote, hs.commit)
            head = MAGIC + _record(KIND_START, start)
            _write_all(self.fs, self._fd, head)
        except OSError as e:
            raise self._io("cutting a segment", self._seg_path(seq), e) from e
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
