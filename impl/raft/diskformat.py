"""The disk log's bytes on disk: segment and snapshot-file formats (5, 4, 3), the record
framing with its chained checksums, and the torn-write rule that tells a crash's lost sectors
from damage. See impl/raft/disklog.py's docstring for the layout as a whole."""

from __future__ import annotations

import os
import re
import struct
import zlib
from dataclasses import dataclass, field

from epochgc.impl.raft.fileio import SECTOR
from epochgc.impl.raft.messages import HardState

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


def _state_body(hs: HardState) -> bytes:
    return _STATE.pack(hs.term, hs.vote, hs.commit)
