"""Explicit, versioned binary encoding (struct, big-endian) for everything that leaves memory.

No pickle: every byte on disk or on the wire is produced here, and decoding validates lengths
so a malformed buffer raises CodecError instead of yielding a half-built object.
"""

from __future__ import annotations

import struct

from epochgc.impl.raft.messages import Entry, HardState, Message, MsgType, Snapshot

VERSION = 1

_ENTRY = struct.Struct(">QQII")  # index, term, type, data length
_HARD = struct.Struct(">BQQQ")  # version, term, vote, commit
_SNAP = struct.Struct(">BQQI")  # version, index, term, data length
# version, type, to, from, term, log_term, index, commit, reject_hint, flags, n_entries
_MSG = struct.Struct(">BBQQQQQQQBI")
_FLAG_REJECT = 1
_FLAG_FORCE = 2
_FLAG_SNAPSHOT = 4
_MSG_TYPES = {int(t): t for t in MsgType}


class CodecError(ValueError):
    """A buffer is not a valid encoding (wrong version, truncated, trailing bytes)."""


def encode_entry(e: Entry) -> bytes:
    return _ENTRY.pack(e.index, e.term, e.type, len(e.data)) + e.data


def _decode_entry_at(buf: bytes | memoryview, off: int) -> tuple[Entry, int]:
    if off + _ENTRY.size > len(buf):
        raise CodecError("truncated entry header")
    index, term, typ, n = _ENTRY.unpack_from(buf, off)
    off += _ENTRY.size
    if off + n > len(buf):
        raise CodecError("truncated entry data")
    return Entry(index, term, typ, bytes(buf[off : off + n])), off + n


def decode_entry(buf: bytes | memoryview) -> Entry:
    e, off = _decode_entry_at(buf, 0)
    if off != len(buf):
        raise CodecError("trailing bytes after entry")
    return e


def encode_hard_state(hs: HardState) -> bytes:
    return _HARD.pack(VERSION, hs.term, hs.vote, hs.commit)


def decode_hard_state(buf: bytes | memoryview) -> HardState:
    if len(buf) != _HARD.size:
        raise CodecError("hard state has wrong length")
    version, term, vote, commit = _HARD.unpack(buf)
    if version != VERSION:
        raise CodecError(f"unknown hard state version {version}")
    return HardState(term, vote, commit)


def encode_snapshot(s: Snapshot) -> bytes:
    return _SNAP.pack(VERSION, s.index, s.term, len(s.data)) + s.data


def _decode_snapshot_at(buf: bytes | memoryview, off: int) -> tuple[Snapshot, int]:
    if off + _SNAP.size > len(buf):
        raise CodecError("truncated snapshot header")
    version, index, term, n = _SNAP.unpack_from(buf, off)
    if version != VERSION:
        raise CodecError(f"unknown snapshot version {version}")
    off += _SNAP.size
    if off + n > len(buf):
        raise CodecError("truncated snapshot data")
    return Snapshot(index, term, bytes(buf[off : off + n])), off + n


def decode_snapshot(buf: bytes | memoryview) -> Snapshot:
    s, off = _decode_snapshot_at(buf, 0)
    if off != len(buf):
        raise CodecError("trailing bytes after snapshot")
    return s


def encode_message(m: Message) -> bytes:
    flags = (
        (_FLAG_REJECT if m.reject else 0)
        | (_FLAG_FORCE if m.force else 0)
        | (_FLAG_SNAPSHOT if m.snapshot is not None else 0)
    )
    head = _MSG.pack(
        VERSION,
        int(m.type),
        m.to,
        m.frm,
        m.term,
        m.log_term,
        m.index,
        m.commit,
        m.reject_hint,
        flags,
        len(m.entries),
    )
    if not m.entries and m.snapshot is None:
        return head  # heartbeats, votes and responses: the header is the whole message
    parts = [head]
    parts.extend(encode_entry(e) for e in m.entries)
    if m.snapshot is not None:
        parts.append(encode_snapshot(m.snapshot))
    return b"".join(parts)


def decode_message(buf: bytes | memoryview) -> Message:
    if len(buf) < _MSG.size:
        raise CodecError("truncated message header")
    (version, typ, to, frm, term, log_term, index, commit, hint, flags, n) = _MSG.unpack_from(
        buf, 0
    )
    if version != VERSION:
        raise CodecError(f"unknown message version {version}")
    mtype = _MSG_TYPES.get(typ)
    if mtype is None:
        raise CodecError(f"unknown message type {typ}")
    if flags & ~(_FLAG_REJECT | _FLAG_FORCE | _FLAG_SNAPSHOT):
        raise CodecError(f"unknown message flags {flags}")
    off = _MSG.size
    entries = []
    for _ in range(n):
        e, off = _decode_entry_at(buf, off)
        entries.append(e)
    snap = None
    if flags & _FLAG_SNAPSHOT:
        snap, off = _decode_snapshot_at(buf, off)
    if off != len(buf):
        raise CodecError("trailing bytes after message")
    return Message(
        mtype,
        to,
        frm,
        term,
        log_term,
        index,
        tuple(entries),
        commit,
        bool(flags & _FLAG_REJECT),
        hint,
        bool(flags & _FLAG_FORCE),
        snap,
    )
