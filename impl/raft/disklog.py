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
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from epochgc.impl.raft.codec import (
    CodecError,
    decode_entry,
    decode_snapshot,
    encode_entry,
    encode_snapshot,
)
from epochgc.impl.raft.fileio import SECTOR, EntryKind, FileIO, OsFileIO, make_dirs_durable
from epochgc.impl.raft.groupcommit import GroupCommit
from epochgc.impl.raft.messages import Entry, HardState, InitialState, Snapshot
from epochgc.impl.raft.storage import StorageCorruption, StorageFailed

FORMAT = 5  # of the segments this version writes
FORMAT4 = 4  # segments of format 4: read (their own framing and torn rule), never appended to
SNAP_FORMAT = 4  # of the snapshot file (unchanged since format 4)
OLD_FORMAT = 3  # read and rewritten on first start
MAGIC = b"EGRLOG\x00" + bytes([FORMAT])  # 7 bytes of magic + 1 byte format version
MAGIC4 = MAGIC[:7] + bytes([FORMAT4])
_MAGICS = (MAGIC, MAGIC4)  # the chained formats
# Format 5 framing: the top three bits of the length word are set, so a record's first byte is
# never zero, not even with one bit flipped (a one-bit marker, flipped in a header starting in
# a sector's last 1-3 bytes, left them all zero: a lost sector's image), and a trailer byte
# follows the payload, so its last byte is never zero either: a piece of a sector that holds a
# record's first or last byte and reads all zeros was zeroed (a lost sector), it is not the
# record's own content (issue 37 items 3 and 4).
_MARK = 0xE000_0000  # lengths are at most MAX_RECORD (2**28): bits 29-31 are free
_TRAILER = b"\xa5"
_REC = struct.Struct(">III")  # length, chained crc32(payload), crc32 of the first 8 bytes
# flags, group, seq, chain, install tag, tail index, tail term, hs term, vote, commit
_START = struct.Struct(">BQQIIQQQQQ")
_START3 = struct.Struct(">BQQQQQ")  # format 3: flags, tail index, tail term, hs term, vote, commit
START_FRESH = 1  # the segment was cut for an installed snapshot: a fresh log starts here
START_UPGRADE = 2  # (with FRESH) the segment the format-3 upgrade wrote
_START_FLAGS_AT = len(MAGIC) + _REC.size + 1  # a segment's START flags byte (after the kind)
_STATE = struct.Struct(">QQQ")  # term, vote, commit
_SNAPHEAD = struct.Struct(">BQQI")  # format, group, install_seq, install_tag
_SNAPHEAD3 = struct.Struct(">BQ")  # format 3: format, install_seq
KIND_ENTRY = 1
KIND_STATE = 3
KIND_START = 4
MAX_RECORD = 256 << 20
QUARANTINE = "quarantine"
_GROUP_DIR = re.compile(r"g(\d+)$")
# The temporary files of this log's own atomic writes (the snapshot, the upgrade's segment):
# the only *.tmp names recovery may delete.
_OWN_TMP = re.compile(r"(snapshot|\d{16}\.seg)\.tmp")


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


_HEAD = struct.Struct(">II")  # the first 8 bytes of a record header
_U32 = struct.Struct(">I")


def _record(kind: int, body: bytes, seed: int, fmt: int = FORMAT) -> tuple[bytes, int]:
    """One record (in segment format `fmt`) whose crc is chained from `seed`; returns it and
    its crc."""
    payload = bytes((kind,)) + body
    crc = zlib.crc32(payload, seed)
    if fmt == FORMAT4:
        head = _HEAD.pack(len(payload), crc)
        return head + _U32.pack(zlib.crc32(head)) + payload, crc
    head = _HEAD.pack(len(payload) | _MARK, crc)
    return head + _U32.pack(zlib.crc32(head)) + payload + _TRAILER, crc


def _torn(data: bytes, start: int, end: int) -> bool:
    """etcd's torn-write rule for a record [start, end) that fails its checks: torn if it runs
    past the end of the file, or if it overlaps a 512-byte sector that holds only zeros from
    the record's start (or the sector's, if later) to the sector's end (or the file's): a crash
    loses whole unsynced sectors, in any order, while bit rot or a misplaced record does not
    zero them. (Stricter than "a zero part of the record": the rest of that sector, past the
    record, must be zero too.)

    Only bytes a crash could have zeroed may count, never the record's own zeros: in format 5
    a record's first byte (the length word's three marker bits) and last byte (the trailer)
    are never zero, not even with one bit flipped, so a piece holding either was zeroed.
    Format 4 had neither: the high zero bytes of a length starting in a sector's last 1-3
    bytes, or a last record's zero tail (a hard state's zero vote and commit) starting a
    fresh sector, looked torn, and damage anywhere in such a
    fsynced record cut it (issue 37 items 3, 4; format-4 segments keep that rule until they
    are compacted away). What remains ambiguous in format 5: a whole sector inside one record
    that its own data fills with zeros (an entry of 512 zero bytes or more), if that record is
    also damaged elsewhere."""
    if end > len(data):
        return True
    lo = start
    while lo < end:
        hi = (lo // SECTOR + 1) * SECTOR
        if not any(data[lo : min(hi, len(data))]):
            return True
        lo = hi
    return False


def group_of(directory: str) -> int:
    """The group id a directory named g<id> holds (0 for any other name)."""
    m = _GROUP_DIR.match(os.path.basename(os.path.normpath(directory)))
    return int(m.group(1)) if m else 0


@dataclass(frozen=True)
class _Rec:
    off: int
    payload: bytes
    crc: int


@dataclass
class _Seg:
    """One segment as read from the disk."""

    seq: int
    path: str
    data: bytes
    fmt: int
    recs: list[_Rec] = field(default_factory=list)
    torn_at: int | None = None  # where a torn tail begins (last segment only)


@dataclass
class _Plan:
    """What recovery will change on the disk once everything is validated."""

    truncate: list[tuple[str, int]] = field(default_factory=list)
    unlink_empty: list[str] = field(default_factory=list)  # a last segment that holds nothing
    quarantine: list[str] = field(default_factory=list)  # proven redundant: moved aside
    tmp: list[str] = field(default_factory=list)  # interrupted atomic writes


class DiskStorage:
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

    # ---- recovery ------------------------------------------------------------------------

    def load(self) -> InitialState:
        """Recover the durable state (Storage.load's contract); refuses (StorageCorruption,
        naming file and offset) anything that is not a crash's torn tail. Reads every file as
        the device holds it (fsync, then past the page cache). Changes the directory only
        after it has validated everything: cuts a torn tail, moves proven-redundant segments
        aside, rewrites a format-3 log into format 5; then makes what it returns durable.
        The caller may call it again (the same state) and must not write before it."""
        if self._loaded is not None:
            return self._loaded
        self._check()
        self._reset()  # nothing of an earlier, refused attempt carries over
        names = self.fs.listdir(self.dir)
        if "hardstate" in names:
            raise StorageCorruption(
                self._path("hardstate"),
                0,
                f"a Raft log of on-disk format 2, which this version (format {FORMAT}) "
                "refuses: its snapshot markers cannot be replayed safely; rebuild this node "
                "from a peer",
            )
        for n in names:
            if n == "snapshot" or n.endswith(".seg") or _OWN_TMP.fullmatch(n):
                # Before any open: a FIFO would block for ever, a symlink would make recovery
                # cut and append to a file outside the directory.
                kind = self.fs.entry_kind(self._path(n))
                if kind is not EntryKind.REGULAR:
                    raise StorageCorruption(
                        self._path(n),
                        0,
                        f"a {kind.value} where this log keeps a regular file: refusing to "
                        "open or change it",
                    )
        plan = _Plan(tmp=[self._path(n) for n in names if _OWN_TMP.fullmatch(n)])
        snap_fmt = self._read_snapshot_file()
        segs = [self._read_seg(self._seq_of(n)) for n in sorted(names) if n.endswith(".seg")]
        segs.sort(key=lambda g: g.seq)
        old = [g for g in segs if g.fmt == OLD_FORMAT]
        upgrade = snap_fmt == OLD_FORMAT or (snap_fmt is None and bool(old))
        leftover: list[_Seg] = []
        if upgrade:
            # Within an upgrade, a segment is format 4 only if it has the whole format-4 magic
            # at the number the upgrade writes (above every other segment): an interrupted
            # upgrade's output (its snapshot file, the switch, never landed), compared with
            # the expected output below. Anything else is format 3, a torn last segment
            # (empty, part of the magic, zeros: a crash right after a cut) included.
            leftover = [g for g in segs if g.data[: len(MAGIC)] in _MAGICS]
            out = {g.seq for g in leftover}
            old = [g for g in segs if g.seq not in out]
            for g in old:
                g.fmt = OLD_FORMAT
            top = max([g.seq for g in old] + [self._install_seq])
            for g in leftover:
                if g.seq != top + 1:
                    raise StorageCorruption(
                        g.path, 0, "a format-4 segment in a format-3 log that is not its upgrade"
                    )
            segs = old
        else:
            # After an upgrade's switch, its format-3 segments (a torn last one without a
            # whole magic included) may still wait to be moved aside.
            upgraded = self._upgraded(segs)
            for g in segs:
                if g.fmt == OLD_FORMAT or (
                    upgraded and g.seq < self._install_seq and g.data[:8] not in _MAGICS
                ):
                    if g.seq >= self._install_seq:
                        raise StorageCorruption(
                            g.path, 7, "a format-3 segment after the format-4 log's install"
                        )
                    g.fmt = OLD_FORMAT
                    plan.quarantine.append(g.path)  # left over from a finished upgrade
            old = [g for g in segs if g.fmt == OLD_FORMAT]
            segs = [g for g in segs if g.fmt != OLD_FORMAT]
        run, stale = self._split_at_gap(segs)
        self._check_redundant(stale, run)
        log = self._replay(run, plan)
        plan.quarantine += [g.path for g in stale]
        if upgrade:
            self._upgrade(old, leftover, log, plan)
        else:
            self._apply(plan)
            self._open_live(run, plan)
            self._make_recovered_durable(run, plan)
        self._last = (log[-1].index, log[-1].term) if log else (self._snap.index, self._snap.term)
        self._loaded = InitialState(self._hs, self._snap, tuple(log), origin=self.dir)
        return self._loaded

    def _upgraded(self, segs: list[_Seg]) -> bool:
        """Whether the installed snapshot's segment is the one the format-3 upgrade wrote
        (its START flags; a damaged byte is refused when the segment is replayed)."""
        for g in segs:
            if g.seq == self._install_seq and g.data[: len(MAGIC)] in _MAGICS:
                return len(g.data) > _START_FLAGS_AT and bool(
                    g.data[_START_FLAGS_AT] & START_UPGRADE
                )
        return False

    def _read_snapshot_file(self) -> int | None:
        """Read the snapshot file (if any); returns its format."""
        path = self._path("snapshot")
        if not self.fs.exists(path):
            return None
        raw = self._read_durable(path)
        if len(raw) < 4 + _SNAPHEAD3.size:
            raise StorageCorruption(path, 0, "file shorter than its header")
        (crc,) = struct.unpack_from(">I", raw, 0)
        if zlib.crc32(raw[4:]) != crc:
            raise StorageCorruption(path, 0, "checksum mismatch")
        fmt = raw[4]
        if fmt == OLD_FORMAT:
            _, install_seq = _SNAPHEAD3.unpack_from(raw, 4)
            body_at, group, tag = 4 + _SNAPHEAD3.size, self.group, 0
        elif fmt == SNAP_FORMAT and len(raw) >= 4 + _SNAPHEAD.size:
            _, group, install_seq, tag = _SNAPHEAD.unpack_from(raw, 4)
            body_at = 4 + _SNAPHEAD.size
        else:
            raise StorageCorruption(
                path,
                4,
                f"snapshot file of on-disk format {fmt}: format 2 or older are refused (this "
                f"version reads {OLD_FORMAT} and {SNAP_FORMAT}); rebuild this node from a peer",
            )
        if group != self.group:
            raise StorageCorruption(
                path, 5, f"snapshot file of group {group}, in the directory of group {self.group}"
            )
        try:
            self._snap = decode_snapshot(raw[body_at:])
        except CodecError as e:
            raise StorageCorruption(path, body_at, str(e)) from e
        self._install_seq = install_seq
        self._install_tag = tag
        return fmt

    def _read_durable(self, path: str) -> bytes:
        """A file as the device holds it (FileIO.read_durable), never the page cache's copy:
        after a failed fsync Linux keeps the unwritten pages cached and marked clean, so a
        process restarted without a reboot would read entries the disk never got, and a
        second fsync succeeds (issue 37 item 1). An error here (EIO reported to the fresh
        descriptor: a write-back failed and nobody saw it yet) stops the node."""
        try:
            return self.fs.read_durable(path)
        except OSError as e:
            raise self._io("reading what the disk holds", path, e) from e

    def _seq_of(self, name: str) -> int:
        """The sequence number a segment file's name gives; refuses any other .seg name."""
        stem = name[:-4]
        if not stem.isdigit() or name != f"{int(stem):016d}.seg":
            raise StorageCorruption(
                self._path(name), 0, "not a segment name of this log (16 digits, .seg)"
            )
        return int(stem)

    def _read_seg(self, seq: int) -> _Seg:
        path = self._seg_path(seq)
        data = self._read_durable(path)
        fmt = FORMAT
        if data[:7] == MAGIC[:7] and len(data) >= 8:
            fmt = data[7]
            if fmt not in (FORMAT, FORMAT4, OLD_FORMAT):
                raise StorageCorruption(
                    path,
                    7,
                    f"segment of on-disk format {fmt}: format 2 or older are refused (this "
                    f"version reads {OLD_FORMAT} to {FORMAT}); rebuild this node from a peer",
                )
        return _Seg(seq, path, data, fmt)

    @staticmethod
    def _split_at_gap(segs: list[_Seg]) -> tuple[list[_Seg], list[_Seg]]:
        """(the contiguous run ending at the last segment, the segments before a gap)."""
        k = len(segs)
        while k > 0 and (k == len(segs) or segs[k - 1].seq == segs[k].seq - 1):
            k -= 1
        return segs[k:], segs[:k]

    def _check_redundant(self, stale: list[_Seg], run: list[_Seg]) -> None:
        """Segments before a gap are unlinks of a prefix that did not reach the disk, or
        strays: moved aside only if each is whole, bound to this group and place, and holds
        nothing the recovered state needs; refused otherwise."""
        for g in stale:
            self._records(g, last=False)
            if not g.recs or g.recs[0].payload[0] != KIND_START:
                raise StorageCorruption(g.path, len(MAGIC), "segment does not begin with START")
            top = 0
            for r in g.recs:
                try:
                    if r.payload[0] == KIND_START and g.fmt != OLD_FORMAT:
                        self._check_start_binding(g, _START.unpack(r.payload[1:]))
                    elif r.payload[0] == KIND_ENTRY:
                        top = max(top, decode_entry(r.payload[1:]).index)
                except (CodecError, ValueError, struct.error) as err:
                    raise StorageCorruption(g.path, r.off, f"bad record: {err}") from err
            if g.seq >= self._install_seq and top > self._snap.index:
                nxt = run[0].seq if run else g.seq + 1
                raise StorageCorruption(
                    g.path,
                    0,
                    f"segment {g.seq} holds entries up to {top}, above the snapshot at "
                    f"{self._snap.index}, but segments between it and segment {nxt} are "
                    "missing: refusing (a segment was lost, or a stray file was added)",
                )

    def _check_start_binding(self, g: _Seg, start: tuple[int, ...]) -> None:
        _flags, group, seq = start[0], start[1], start[2]
        if group != self.group:
            raise ValueError(f"START of group {group}, in the directory of group {self.group}")
        if seq != g.seq:
            raise ValueError(f"START of segment {seq}, in the file of segment {g.seq}")

    def _replay(self, segs: list[_Seg], plan: _Plan) -> list[Entry]:
        s = self._snap
        log: list[Entry] = []  # entries above the snapshot, contiguous from s.index + 1
        at: list[tuple[str, int]] = []  # where each of them was read
        tail: int | None = None  # index of the log's last entry at this point of the replay
        hs_at: tuple[str, int] = (self.dir, 0)
        # Format 3 only: whether the hard state is still the one made durable before its
        # install's snapshot file (see the clamp below).
        v3_pre_install = False
        seen_active = False
        prev_crc: int | None = None  # last crc of the previous segment of this run
        for k, g in enumerate(segs):
            last_seg = k == len(segs) - 1
            self._records(g, last_seg)
            if not g.recs or g.recs[0].payload[0] != KIND_START:
                own_magic = MAGIC[:7] + bytes([g.fmt])  # a format-3 segment has its own
                if (
                    last_seg
                    and not g.recs
                    and (own_magic.startswith(g.data[:8]) or not any(g.data))
                ):
                    plan.unlink_empty.append(g.path)  # torn while being created: held nothing
                    break
                if last_seg and not g.recs and _torn(g.data, 0, len(MAGIC)):
                    # Its first sector (magic, START) never reached the disk while a later
                    # one did (writeback in any order): never fsynced, so nothing in it was
                    # acknowledged. Moved aside, not deleted.
                    plan.quarantine.append(g.path)
                    break
                raise StorageCorruption(g.path, len(MAGIC), "segment does not begin with START")
            if g.torn_at is not None:
                plan.truncate.append((g.path, g.torn_at))
            active = g.seq >= self._install_seq
            max_index = 0
            for r in g.recs:
                kind, body = r.payload[0], r.payload[1:]
                try:
                    if kind == KIND_START:
                        if r.off != len(MAGIC):
                            raise ValueError("START record inside a segment")
                        fresh, t_index, hs = self._replay_start(g, body, prev_crc)
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
                        elif g.seq == self._install_seq:
                            raise ValueError("the installed snapshot's segment is not fresh")
                        tail = t_index
                        seen_active = seen_active or active
                        if hs != self._hs:
                            v3_pre_install = g.fmt == OLD_FORMAT and not active
                        self._set_hs(hs)
                        hs_at = (g.path, r.off)
                    elif kind == KIND_STATE:
                        self._set_hs(HardState(*_STATE.unpack(body)))
                        hs_at = (g.path, r.off)
                        v3_pre_install = g.fmt == OLD_FORMAT and not active
                    elif kind == KIND_ENTRY:
                        e = decode_entry(body)
                        if tail is not None and e.index > tail + 1:
                            raise ValueError(f"gap: entry {e.index} after {tail}")
                        tail = e.index
                        if not active:
                            continue  # before an installed snapshot: discarded by it
                        max_index = max(max_index, e.index)
                        self._replay_entry(e, log, at, (g.path, r.off))
                    else:
                        raise ValueError(f"unknown record kind {kind}")
                except (CodecError, ValueError, struct.error) as err:
                    raise StorageCorruption(g.path, r.off, f"bad record: {err}") from err
            prev_crc = g.recs[-1].crc
            self._segments.append((g.seq, max_index))
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
        if self._hs.commit > last and v3_pre_install:
            # Format 3 made a commit of min(leader commit, old last index) durable before an
            # install's snapshot file (issue 27 item 2): with the install's segment lost or
            # torn, that commit points past the log and the node could not start. The log
            # is the snapshot plus a prefix of the leader's entries that came with it, all at
            # or below the leader's commit: clamp the commit to the log's end (the commit
            # index is knowledge, not a promise; the leader repeats it).
            self._hs = HardState(self._hs.term, self._hs.vote, last)
        if self._hs.commit > last:
            raise StorageCorruption(
                hs_at[0],
                hs_at[1],
                f"commit index {self._hs.commit} is past the last entry {last}: the log lost "
                "committed entries",
            )
        if self._hs.term < prev:
            raise StorageCorruption(
                hs_at[0],
                hs_at[1],
                f"hard state of term {self._hs.term} is below the term {prev} of the log's "
                "last entry or snapshot: a stale hard state",
            )
        return log

    def _replay_start(
        self, g: _Seg, body: bytes, prev_crc: int | None
    ) -> tuple[bool, int, HardState]:
        """Check a START record; returns (fresh, tail index, hard state)."""
        if g.fmt == OLD_FORMAT:
            flags, t_index, _t_term, term, vote, commit = _START3.unpack(body)
            return bool(flags & START_FRESH), t_index, HardState(term, vote, commit)
        st = _START.unpack(body)
        flags, _group, _seq, chain, tag, t_index, _t_term, term, vote, commit = st
        self._check_start_binding(g, st)
        if prev_crc is not None and chain != prev_crc:
            raise ValueError(
                f"segment chains from crc {chain:#010x} but the previous segment ends with "
                f"{prev_crc:#010x}: a segment was dropped, replaced or reordered"
            )
        fresh = bool(flags & START_FRESH)
        if fresh and g.seq >= self._install_seq:
            if g.seq != self._install_seq:
                raise ValueError(
                    f"a FRESH segment at {g.seq}, but the snapshot file was installed with "
                    f"segment {self._install_seq}"
                )
            if tag != self._install_tag:
                raise ValueError(
                    f"install tag {tag:#010x} differs from the snapshot file's "
                    f"{self._install_tag:#010x}: the snapshot file is not this install's"
                )
        return fresh, t_index, HardState(term, vote, commit)

    def _set_hs(self, hs: HardState) -> None:
        if hs.term < self._hs.term:
            raise ValueError(f"hard state goes back from term {self._hs.term} to {hs.term}")
        self._hs = hs

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

    def _records(self, g: _Seg, last: bool) -> None:
        """Fill g.recs with every whole record whose chained checksum holds; a torn tail of
        the last segment sets g.torn_at (cut once everything is validated)."""
        data, path = g.data, g.path
        g.recs, g.torn_at = [], None
        if len(data) < len(MAGIC):
            if (last and MAGIC.startswith(data)) or not any(data):
                return
            raise StorageCorruption(path, 0, "segment shorter than its header")
        if data[:7] != MAGIC[:7]:
            if last and _torn(data, 0, len(MAGIC)):
                return  # its first sector never reached the disk (see _replay)
            raise StorageCorruption(path, 0, "bad segment header")
        chained = g.fmt != OLD_FORMAT
        framed = g.fmt >= FORMAT  # the marker bits and the trailer (format 5)
        seed = 0  # START is seeded with 0; every later record with its predecessor's crc
        off = len(MAGIC)
        while off < len(data):
            torn = False
            if off + _REC.size > len(data):
                torn, why = True, "truncated record header"
            else:
                word, crc, hcrc = _REC.unpack_from(data, off)
                n = word & ~_MARK if framed else word
                body_end = off + _REC.size + n
                end = body_end + len(_TRAILER) if framed else body_end
                if zlib.crc32(data[off : off + 8]) != hcrc:
                    torn = _torn(data, off, off + _REC.size)
                    why = "record header checksum mismatch"
                elif n == 0 or n > MAX_RECORD or (framed and word & _MARK != _MARK):
                    why = f"bad record length {n}" + (f" (length word {word})" if framed else "")
                    raise StorageCorruption(path, off, why)
                elif end > len(data):
                    torn, why = True, "record runs past the end of the segment"
                elif zlib.crc32(data[off + _REC.size : body_end], seed) != crc or (
                    framed and data[body_end:end] != _TRAILER
                ):
                    torn = _torn(data, off, end)
                    why = (
                        "record checksum mismatch (the record is damaged, or not at its place "
                        "in the chain)"
                    )
                else:
                    g.recs.append(_Rec(off, data[off + _REC.size : body_end], crc))
                    seed = crc if chained else 0
                    off = end
                    continue
            if torn and last:
                g.torn_at = off  # a torn write: it never finished, never acked
                return
            raise StorageCorruption(path, off, why)

    def _apply(self, plan: _Plan) -> None:
        """Carry out what recovery proved (after every check passed)."""
        try:
            for path, off in plan.truncate:
                tail = self.fs.read(path)[off:]  # (only after a crash: a torn tail is rare)
                if any(tail):
                    # Kept aside (durably) before the cut: a zeroed sector of fsynced data
                    # looks like a torn write, and what follows it may have been acked.
                    dst = self._quarantine_name(f"{os.path.basename(path)}.tail-{off}")
                    atomic_write(dst, tail, self.fs)
                self.fs.truncate(path, off)
            for path in plan.unlink_empty + [t for t in plan.tmp if self.fs.exists(t)]:
                self.fs.unlink(path)
                self._dir_dirty = True
            if plan.quarantine:
                qdir = self._path(QUARANTINE)
                for path in dict.fromkeys(plan.quarantine):  # each file once
                    self.fs.replace(path, self._quarantine_name(os.path.basename(path)))
                self.fs.fsync_dir(qdir)
                self._dir_dirty = True
            if self._dir_dirty:
                self.fs.fsync_dir(self.dir)
                self._dir_dirty = False
        except OSError as e:
            raise self._io("recovery", self.dir, e) from e

    def _quarantine_name(self, name: str) -> str:
        """A free path for `name` in quarantine/ (created, durably, if missing)."""
        qdir = self._path(QUARANTINE)
        make_dirs_durable(self.fs, qdir)
        dst, k = os.path.join(qdir, name), 0
        while self.fs.exists(dst):
            k += 1
            dst = os.path.join(qdir, f"{name}.{k}")
        return dst

    def _open_live(self, run: list[_Seg], plan: _Plan) -> None:
        """Reopen the last segment for appending (or arrange a fresh one after an install)."""
        live = [g for g in run if g.path not in plan.unlink_empty + plan.quarantine]
        self._segments = self._segments[: len(live)]
        if live and live[-1].seq >= self._install_seq and live[-1].fmt != FORMAT:
            # A format-4 segment is never appended to (its records have the old framing):
            # the next write cuts a format-5 segment, chained from this one.
            self._crc = live[-1].recs[-1].crc
        elif live and live[-1].seq >= self._install_seq:
            g = live[-1]
            self._fd = self.fs.open_append(g.path, create=False)
            self._size = self.fs.size(self._fd)
            self._crc = g.recs[-1].crc
        else:  # the installed snapshot's segment never reached the disk: cut it afresh
            self._need_fresh = self._install_seq > 0
            self._crc = live[-1].recs[-1].crc if live else 0

    def _make_recovered_durable(self, run: list[_Seg], plan: _Plan) -> None:
        """What recovery read may have been in the page cache only (a process killed before
        its fsync, then restarted): Raft takes what load() returns as stable and acknowledges
        it without writing it again, so make it durable first: the last segment, the
        directory and the directory's own entry in its parent."""
        try:
            if self._fd >= 0:
                self.fs.fsync(self._fd)
            else:
                kept = [g for g in run if g.path not in plan.unlink_empty + plan.quarantine]
                if kept:
                    fd = self.fs.open_append(kept[-1].path, create=False)
                    try:
                        self.fs.fsync(fd)
                    finally:
                        self.fs.close(fd)
            self.fs.fsync_dir(os.path.dirname(os.path.abspath(self.dir)))
            self.fs.fsync_dir(self.dir)
        except OSError as e:
            raise self._io("making the recovered log durable", self.dir, e) from e

    def _upgrade(
        self, old: list[_Seg], leftover: list[_Seg], log: list[Entry], plan: _Plan
    ) -> None:
        """Rewrite a format-3 log (already validated) as format 4 (see the module docstring)."""
        seq = max([g.seq for g in old] + [self._install_seq]) + 1
        snap, hs = self._snap, self._hs
        tag = self._snapshot_tag(snap, seq)
        start = _START.pack(
            START_FRESH | START_UPGRADE,
            self.group,
            seq,
            0,
            tag,
            snap.index,
            snap.term,
            hs.term,
            hs.vote,
            min(hs.commit, snap.index),
        )
        # (an upgrade a format-4 version began and a crash interrupted is finished in format 4)
        fmt = leftover[0].fmt if leftover and leftover[0].fmt == FORMAT4 else FORMAT
        rec, crc = _record(KIND_START, start, 0, fmt)
        parts = [MAGIC4 if fmt == FORMAT4 else MAGIC, rec]
        for e in log:
            rec, crc = _record(KIND_ENTRY, encode_entry(e), crc, fmt)
            parts.append(rec)
        rec, crc = _record(KIND_STATE, _STATE.pack(hs.term, hs.vote, hs.commit), crc, fmt)
        parts.append(rec)
        data = b"".join(parts)
        path = self._seg_path(seq)
        for g in leftover:
            if g.seq != seq or g.data != data:
                raise StorageCorruption(
                    g.path, 0, "a format-4 segment in a format-3 log that is not its upgrade"
                )
        if not leftover:
            try:
                atomic_write(path, data, self.fs)
            except OSError as e:
                raise self._io("upgrading to format 4", path, e) from e
        self._write_snapshot_file(snap, seq, tag)  # the switch to format 4
        # The format-3 segments are kept whole (a torn tail included) in quarantine/.
        plan.quarantine += [g.path for g in old]
        plan.truncate, plan.unlink_empty = [], []
        self._apply(plan)
        self._install_seq, self._install_tag = seq, tag
        self._segments = [(seq, log[-1].index if log else 0)]
        if fmt == FORMAT:
            self._fd = self.fs.open_append(path, create=False)
            self._size = len(data)
        self._crc = crc

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


def _state_body(hs: HardState) -> bytes:
    return _STATE.pack(hs.term, hs.vote, hs.commit)
