"""Explicit, versioned encoding of the partition log entries (no pickle).

Every entry starts with `>BB` = (format version, command kind); all integers are big-endian.
A decoder refuses unknown versions/kinds and trailing bytes, so a corrupt entry can never be
half-understood.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

VERSION = 1

PLACEHOLDER = 1
ADVANCE_EPOCH = 2
ADVANCE_RECONCILED = 3
SET_START_OFFSET = 4
BARRIER = 5  # a leader's "sync with the log" marker: applies to nothing
ADVANCE_GC_EPOCH = 6  # the epoch barrier's command (SPEC R36)

_HEAD = struct.Struct(">BB")
_Q = struct.Struct(">Q")
_PH = struct.Struct(">QQQI")  # epoch, byte start, byte end, record count
_RECON = struct.Struct(">qqQI")  # lro, lrlo, l1 base offset, l1 record count
_STR = struct.Struct(">H")


class CommandError(ValueError):
    """Bytes that are not a well-formed partition command."""


@dataclass(frozen=True)
class Placeholder:
    """Records [start, end) bytes of L0 object `key`, `count` records, stamped `epoch`."""

    epoch: int
    key: str
    start: int
    end: int
    count: int


@dataclass(frozen=True)
class AdvanceEpoch:
    epoch: int


@dataclass(frozen=True)
class AdvanceReconciled:
    """LRO (record offset, inclusive) and LRLO (log index); `l1_key` names the L1 object
    holding records [l1_base, l1_base + l1_count) when the reconciler copied data, "" when
    only the LRLO moves (housekeeper)."""

    lro: int
    lrlo: int
    l1_key: str = ""
    l1_base: int = 0
    l1_count: int = 0


@dataclass(frozen=True)
class SetStartOffset:
    start_offset: int


@dataclass(frozen=True)
class Barrier:
    pass


@dataclass(frozen=True)
class AdvanceGcEpoch:
    """The epoch barrier (R36): `epoch` becomes the partition's pending safe epoch, promoted
    once LRLO reaches this entry (R38); placeholders at or below it are refused (R37)."""

    epoch: int


Command = (Placeholder | AdvanceEpoch | AdvanceReconciled | SetStartOffset | Barrier
           | AdvanceGcEpoch)


def _enc_str(s: str) -> bytes:
    b = s.encode()
    if len(b) > 0xFFFF:
        raise CommandError("string too long")
    return _STR.pack(len(b)) + b


def encode(cmd: Command) -> bytes:
    if isinstance(cmd, Placeholder):
        if not 0 <= cmd.start <= cmd.end or cmd.count < 0 or cmd.epoch < 0:
            raise CommandError(f"bad placeholder {cmd}")
        return (
            _HEAD.pack(VERSION, PLACEHOLDER)
            + _PH.pack(cmd.epoch, cmd.start, cmd.end, cmd.count)
            + _enc_str(cmd.key)
        )
    if isinstance(cmd, AdvanceEpoch):
        return _HEAD.pack(VERSION, ADVANCE_EPOCH) + _Q.pack(cmd.epoch)
    if isinstance(cmd, AdvanceReconciled):
        return (
            _HEAD.pack(VERSION, ADVANCE_RECONCILED)
            + _RECON.pack(cmd.lro, cmd.lrlo, cmd.l1_base, cmd.l1_count)
            + _enc_str(cmd.l1_key)
        )
    if isinstance(cmd, SetStartOffset):
        return _HEAD.pack(VERSION, SET_START_OFFSET) + _Q.pack(cmd.start_offset)
    if isinstance(cmd, Barrier):
        return _HEAD.pack(VERSION, BARRIER)
    if isinstance(cmd, AdvanceGcEpoch):
        if cmd.epoch < 0:
            raise CommandError(f"bad advance_gc_epoch {cmd}")
        return _HEAD.pack(VERSION, ADVANCE_GC_EPOCH) + _Q.pack(cmd.epoch)
    raise CommandError(f"not a command: {cmd!r}")


def _dec_str(data: bytes, off: int) -> tuple[str, int]:
    if len(data) < off + _STR.size:
        raise CommandError("truncated string length")
    (n,) = _STR.unpack_from(data, off)
    off += _STR.size
    if len(data) < off + n:
        raise CommandError("truncated string")
    try:
        return data[off : off + n].decode(), off + n
    except UnicodeDecodeError as e:
        raise CommandError(f"bad string: {e}") from e


def decode(data: bytes) -> Command:
    if len(data) < _HEAD.size:
        raise CommandError("entry shorter than its header")
    version, kind = _HEAD.unpack_from(data)
    if version != VERSION:
        raise CommandError(f"unknown command version {version}")
    off = _HEAD.size
    try:
        if kind == PLACEHOLDER:
            epoch, start, end, count = _PH.unpack_from(data, off)
            key, off = _dec_str(data, off + _PH.size)
            cmd: Command = Placeholder(epoch, key, start, end, count)
        elif kind == ADVANCE_EPOCH:
            (epoch,) = _Q.unpack_from(data, off)
            off += _Q.size
            cmd = AdvanceEpoch(epoch)
        elif kind == ADVANCE_RECONCILED:
            lro, lrlo, base, count = _RECON.unpack_from(data, off)
            key, off = _dec_str(data, off + _RECON.size)
            cmd = AdvanceReconciled(lro, lrlo, key, base, count)
        elif kind == SET_START_OFFSET:
            (so,) = _Q.unpack_from(data, off)
            off += _Q.size
            cmd = SetStartOffset(so)
        elif kind == BARRIER:
            cmd = Barrier()
        elif kind == ADVANCE_GC_EPOCH:
            (epoch,) = _Q.unpack_from(data, off)
            off += _Q.size
            cmd = AdvanceGcEpoch(epoch)
        else:
            raise CommandError(f"unknown command kind {kind}")
    except struct.error as e:
        raise CommandError(f"truncated command kind {kind}: {e}") from e
    if off != len(data):
        raise CommandError(f"{len(data) - off} trailing bytes after command kind {kind}")
    return cmd


# ---- records inside an object: `>I length` + bytes, back to back --------------------------

_LEN = struct.Struct(">I")


def encode_records(records: list[bytes]) -> bytes:
    return b"".join(_LEN.pack(len(r)) + r for r in records)


def decode_records(data: bytes) -> list[bytes]:
    out: list[bytes] = []
    off = 0
    while off < len(data):
        if off + _LEN.size > len(data):
            raise CommandError("truncated record length")
        (n,) = _LEN.unpack_from(data, off)
        off += _LEN.size
        if off + n > len(data):
            raise CommandError("truncated record")
        out.append(data[off : off + n])
        off += n
    return out
