"""DiskStorage: a segmented, append-only, CRC'd log plus atomically replaced hard state and
snapshot files, for one Raft group in one directory.

Layout:
  hardstate          crc32 | encoded HardState        (temp + fsync + rename + fsync dir)
  snapshot           crc32 | encoded Snapshot         (same)
  NNNNNNNNNNNNNNNN.seg  magic | records...
A record is  u32 length | u32 crc32(payload) | u32 crc32(length, crc) | payload,
payload = u8 kind | body. The header has its own checksum so a damaged length can never be
mistaken for a torn tail (which would silently drop fsynced records after it).
Kinds: ENTRY (an encoded Entry; an index at or below the current last replaces the suffix),
MARK (index, term of a snapshot: the log restarts after it).

Hard state is rewritten only when term or vote change (rare, and it must be durable before a
vote is sent); the commit index it carries may lag, which is safe: commit is re-learned from
the leader, and an old commit is still a committed index.

Recovery: an incomplete final record (or zero-filled tail) in the last segment is a torn
write and is truncated; any other damage raises StorageCorruption naming file and offset.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from collections.abc import Sequence

from impl.raft.codec import (
    CodecError,
    decode_entry,
    decode_hard_state,
    decode_snapshot,
    encode_entry,
    encode_hard_state,
    encode_snapshot,
)
from impl.raft.fileio import FileIO, OsFileIO
from impl.raft.messages import Entry, HardState, InitialState, Snapshot
from impl.raft.storage import StorageCorruption, apply_entries, apply_snapshot

MAGIC = b"EGRLOG\x00\x02"  # 7 bytes of magic + 1 byte format version
_REC = struct.Struct(">III")  # length, crc32(payload), crc32 of the first 8 header bytes
_MARK = struct.Struct(">QQ")
KIND_ENTRY = 1
KIND_MARK = 2
MAX_RECORD = 256 << 20


def atomic_write(path: str, data: bytes, fs: FileIO | None = None) -> None:
    """Replace path with data so that a crash leaves either the old or the new content."""
    fs = fs or OsFileIO()
    tmp = path + ".tmp"
    fd = fs.open_trunc(tmp)
    try:
        fs.write(fd, data)
        fs.fsync(fd)
    finally:
        fs.close(fd)
    fs.replace(tmp, path)
    fs.fsync_dir(os.path.dirname(path) or ".")


def _read_crc_file(path: str, fs: FileIO) -> bytes | None:
    if not fs.exists(path):
        return None
    raw = fs.read(path)
    if len(raw) < 4:
        raise StorageCorruption(path, 0, "file shorter than its checksum")
    (crc,) = struct.unpack_from(">I", raw, 0)
    if zlib.crc32(raw[4:]) != crc:
        raise StorageCorruption(path, 0, "checksum mismatch")
    return raw[4:]


def _record(kind: int, body: bytes) -> bytes:
    payload = bytes([kind]) + body
    head = struct.pack(">II", len(payload), zlib.crc32(payload))
    return head + struct.pack(">I", zlib.crc32(head)) + payload


class DiskStorage:
    def __init__(
        self, directory: str, segment_bytes: int = 64 << 20, fs: FileIO | None = None
    ) -> None:
        self.dir = directory
        self.segment_bytes = segment_bytes
        self.fs: FileIO = fs or OsFileIO()
        self.fs.makedirs(directory)
        self._hs = HardState()
        self._snap = Snapshot()
        self._segments: list[tuple[int, int]] = []  # (sequence number, max entry index)
        self._fd = -1
        self._size = 0
        self._dirty_fds: list[int] = []  # rolled segments still to fsync
        self._dir_dirty = False
        self._unsynced = False  # bytes appended to the live segment since the last fsync
        self._last_index = 0
        self._loaded: InitialState | None = None

    # ---- recovery ------------------------------------------------------------------------

    def load(self) -> InitialState:
        if self._loaded is not None:
            return self._loaded
        for name in self.fs.listdir(self.dir):
            if name.endswith(".tmp"):
                self.fs.unlink(os.path.join(self.dir, name))  # an interrupted atomic write
        raw = _read_crc_file(self._path("hardstate"), self.fs)
        if raw is not None:
            try:
                self._hs = decode_hard_state(raw)
            except CodecError as e:
                raise StorageCorruption(self._path("hardstate"), 4, str(e)) from e
        raw = _read_crc_file(self._path("snapshot"), self.fs)
        if raw is not None:
            try:
                self._snap = decode_snapshot(raw)
            except CodecError as e:
                raise StorageCorruption(self._path("snapshot"), 4, str(e)) from e
        log: list[Entry] = []
        seqs = sorted(int(n[:-4]) for n in self.fs.listdir(self.dir) if n.endswith(".seg"))
        for i, seq in enumerate(seqs):
            max_index = self._replay_segment(seq, log, last=i == len(seqs) - 1)
            self._segments.append((seq, max_index))
        apply_snapshot(log, self._snap)
        self._last_index = log[-1].index if log else self._snap.index
        if self._segments:
            seq = self._segments[-1][0]
            self._fd = self.fs.open_append(self._seg_path(seq), create=False)
            self._size = self.fs.size(self._fd)
        self._loaded = InitialState(self._hs, self._snap, tuple(log))
        return self._loaded

    def _replay_segment(self, seq: int, log: list[Entry], last: bool) -> int:
        path = self._seg_path(seq)
        data = self.fs.read(path)
        if len(data) < len(MAGIC):
            if last and MAGIC.startswith(data):
                self._truncate(path, 0, rewrite_magic=True)  # torn while being created
                return 0
            raise StorageCorruption(path, 0, "segment shorter than its header")
        if data[: len(MAGIC)] != MAGIC:
            raise StorageCorruption(path, 0, "bad segment header")
        off = len(MAGIC)
        max_index = 0
        while off < len(data):
            if off + _REC.size > len(data):
                if last:
                    self._truncate(path, off)
                    break
                raise StorageCorruption(path, off, "truncated record header")
            n, crc, hcrc = _REC.unpack_from(data, off)
            if zlib.crc32(data[off : off + 8]) != hcrc:
                if last and not any(data[off:]):
                    self._truncate(path, off)  # a zero-filled tail: space reserved, never written
                    break
                raise StorageCorruption(path, off, "record header checksum mismatch")
            end = off + _REC.size + n
            if n == 0 or n > MAX_RECORD:
                raise StorageCorruption(path, off, f"bad record length {n}")
            if end > len(data):
                if last:
                    self._truncate(path, off)  # torn tail: the write of this record never finished
                    break
                raise StorageCorruption(path, off, "record runs past the end of the segment")
            payload = data[off + _REC.size : end]
            if zlib.crc32(payload) != crc:
                if last and not any(data[off:]):
                    self._truncate(path, off)  # a zero-filled tail: space reserved, never written
                    break
                raise StorageCorruption(path, off, "record checksum mismatch")
            try:
                max_index = max(max_index, self._replay_record(payload, log))
            except (CodecError, ValueError) as e:
                raise StorageCorruption(path, off, f"bad record: {e}") from e
            off = end
        return max_index

    @staticmethod
    def _replay_record(payload: bytes, log: list[Entry]) -> int:
        kind, body = payload[0], payload[1:]
        if kind == KIND_ENTRY:
            e = decode_entry(body)
            if log and e.index > log[-1].index + 1:
                raise ValueError(f"gap: entry {e.index} after {log[-1].index}")
            apply_entries(log, [e])
            return e.index
        if kind == KIND_MARK:
            index, term = _MARK.unpack(body)
            apply_snapshot(log, Snapshot(index, term))
            if not log:
                # Nothing survives the mark: the next entry must be index + 1. A placeholder
                # keeps that expectation; it is removed by apply_snapshot at the end of load.
                log.append(Entry(index, term))
            return 0
        raise ValueError(f"unknown record kind {kind}")

    def _truncate(self, path: str, off: int, rewrite_magic: bool = False) -> None:
        self.fs.truncate(path, off)
        if rewrite_magic:
            fd = self.fs.open_append(path, create=False)
            try:
                self.fs.write(fd, MAGIC)
                self.fs.fsync(fd)
            finally:
                self.fs.close(fd)

    # ---- writing -------------------------------------------------------------------------

    def write(
        self, hard_state: HardState | None, snapshot: Snapshot | None, entries: Sequence[Entry]
    ) -> None:
        if self._loaded is None:
            self.load()
        if snapshot is not None and snapshot.index > self._snap.index:
            atomic_write(self._path("snapshot"), self._crc(encode_snapshot(snapshot)), self.fs)
            self._snap = snapshot
            self._append(_record(KIND_MARK, _MARK.pack(snapshot.index, snapshot.term)), 0)
        if hard_state is not None:
            if (hard_state.term, hard_state.vote) != (self._hs.term, self._hs.vote):
                atomic_write(
                    self._path("hardstate"), self._crc(encode_hard_state(hard_state)), self.fs
                )
            self._hs = hard_state
        if entries:
            buf = b"".join(_record(KIND_ENTRY, encode_entry(e)) for e in entries)
            self._append(buf, entries[-1].index)
            self._last_index = entries[-1].index
        if snapshot is not None:
            self._drop_old_segments()

    def sync(self) -> None:
        for fd in self._dirty_fds:
            self.fs.fsync(fd)
            self.fs.close(fd)
        self._dirty_fds.clear()
        if self._fd >= 0 and self._unsynced:
            self.fs.fsync(self._fd)
            self._unsynced = False
        if self._dir_dirty:
            self.fs.fsync_dir(self.dir)
            self._dir_dirty = False

    def close(self) -> None:
        self.sync()
        if self._fd >= 0:
            self.fs.close(self._fd)
            self._fd = -1

    def abandon(self) -> None:
        """A killed process: close the descriptors without syncing (what reaches the disk is
        then the kernel's business, or CrashFS.crash's)."""
        for fd in [self._fd, *self._dirty_fds]:
            if fd >= 0:
                with contextlib.suppress(OSError):
                    self.fs.close(fd)
        self._fd = -1
        self._dirty_fds = []

    def _append(self, buf: bytes, max_index: int) -> None:
        if self._fd < 0 or self._size >= self.segment_bytes:
            self._roll()
        self.fs.write(self._fd, buf)
        self._unsynced = True
        self._size += len(buf)
        seq, old = self._segments[-1]
        self._segments[-1] = (seq, max(old, max_index))

    def _roll(self) -> None:
        if self._fd >= 0:
            self._dirty_fds.append(self._fd)
        seq = self._segments[-1][0] + 1 if self._segments else 1
        self._fd = self.fs.open_append(self._seg_path(seq), create=True)
        self.fs.write(self._fd, MAGIC)
        self._size = len(MAGIC)
        self._segments.append((seq, 0))
        self._dir_dirty = True

    def _drop_old_segments(self) -> None:
        # Only a prefix of segments whose entries are all covered by the (already durable)
        # snapshot is removed; the live segment is never removed.
        while len(self._segments) > 1 and self._segments[0][1] <= self._snap.index:
            seq, _ = self._segments.pop(0)
            self.fs.unlink(self._seg_path(seq))
            self._dir_dirty = True

    # ---- paths ---------------------------------------------------------------------------

    def _path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def _seg_path(self, seq: int) -> str:
        return os.path.join(self.dir, f"{seq:016d}.seg")

    @staticmethod
    def _crc(body: bytes) -> bytes:
        return struct.pack(">I", zlib.crc32(body)) + body
