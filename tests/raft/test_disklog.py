"""DiskStorage: recovery round trips, torn tails, corruption refusal, atomic replacement."""

from __future__ import annotations

import os
import struct
import tempfile
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochgc.impl.raft.atomicfile import atomic_write
from epochgc.impl.raft.diskformat import MAGIC
from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.messages import Entry, HardState, Snapshot
from epochgc.impl.raft.storage import StorageCorruption, StorageFailed


def ents(lo: int, hi: int, term: int = 1, size: int = 10) -> list[Entry]:
    return [Entry(i, term, 1, bytes([i % 256]) * size) for i in range(lo, hi + 1)]


def segs(d: Path) -> list[Path]:
    return sorted(d.glob("*.seg"))


def reopen(d: Path) -> DiskStorage:
    return DiskStorage(str(d))


def offsets(seg: Path) -> list[int]:
    """Offset of every record in a segment (the first is its START record)."""
    data = seg.read_bytes()
    out, off = [], len(MAGIC)
    while off + 12 <= len(data):
        (n,) = struct.unpack_from(">I", data, off)
        out.append(off)
        off += 12 + (n & 0x1FFFFFFF) + 1  # (format 5: marker bits, trailer byte)
    return out


def test_round_trip_of_entries_hard_state_and_truncation(tmp_path: Path) -> None:
    s = DiskStorage(str(tmp_path))
    assert s.load().entries == ()
    s.write(HardState(2, 1, 0), None, ents(1, 5))
    s.sync()
    s.write(HardState(3, 0, 4), None, ents(4, 6, term=3))  # replaces 4..5
    s.sync()
    s.close()
    init = reopen(tmp_path).load()
    assert init.hard_state == HardState(3, 0, 4)
    assert [(e.index, e.term) for e in init.entries] == [
        (1, 1),
        (2, 1),
        (3, 1),
        (4, 3),
        (5, 3),
        (6, 3),
    ]


def test_segments_roll_and_compaction_drops_covered_prefix(tmp_path: Path) -> None:
    s = DiskStorage(str(tmp_path), segment_bytes=200)
    for i in range(1, 41):
        s.write(HardState(1, 0, 0) if i == 1 else None, None, ents(i, i))
        s.sync()
    assert len(segs(tmp_path)) > 5
    n_before = len(segs(tmp_path))
    s.write(None, None, [], compacted=Snapshot(30, 1, b"state"))
    s.sync()
    assert len(segs(tmp_path)) < n_before
    s.close()
    init = reopen(tmp_path).load()
    assert init.snapshot == Snapshot(30, 1, b"state")
    assert [e.index for e in init.entries] == list(range(31, 41))


def test_installed_snapshot_replaces_conflicting_log(tmp_path: Path) -> None:
    s = DiskStorage(str(tmp_path))
    s.write(HardState(1, 0, 0), None, ents(1, 10, term=1))
    s.sync()
    s.write(HardState(5, 0, 20), Snapshot(20, 4, b"x"), ents(21, 22, term=5))
    s.sync()
    s.close()
    init = reopen(tmp_path).load()
    assert init.snapshot.index == 20
    assert [(e.index, e.term) for e in init.entries] == [(21, 5), (22, 5)]


def test_torn_tail_is_truncated(tmp_path: Path) -> None:
    s = DiskStorage(str(tmp_path))
    s.write(HardState(1, 0, 0), None, ents(1, 3))
    s.sync()
    s.close()
    (seg,) = segs(tmp_path)
    size = seg.stat().st_size
    with open(seg, "ab") as f:
        rec = ents(4, 4)[0]
        head = struct.pack(">II", 100 | 0xE0000000, 0)  # the crash hit mid-record: header
        # whole, body not
        f.write(head + struct.pack(">I", zlib.crc32(head)) + b"partial")
    init = reopen(tmp_path).load()
    assert [e.index for e in init.entries] == [1, 2, 3]
    assert seg.stat().st_size == size  # truncated back to the last whole record
    assert rec.index == 4


def test_zero_filled_tail_is_truncated(tmp_path: Path) -> None:
    s = DiskStorage(str(tmp_path))
    s.write(HardState(1, 0, 0), None, ents(1, 2))
    s.sync()
    s.close()
    (seg,) = segs(tmp_path)
    with open(seg, "ab") as f:
        f.write(bytes(64))
    assert [e.index for e in reopen(tmp_path).load().entries] == [1, 2]


def test_appends_after_torn_tail_recovery_are_readable(tmp_path: Path) -> None:
    s = DiskStorage(str(tmp_path))
    s.write(HardState(1, 0, 0), None, ents(1, 2))
    s.sync()
    s.close()
    (seg,) = segs(tmp_path)
    with open(seg, "ab") as f:
        f.write(b"\x00\x00\x01")
    s = reopen(tmp_path)
    s.load()
    s.write(None, None, ents(3, 4))
    s.close()
    assert [e.index for e in reopen(tmp_path).load().entries] == [1, 2, 3, 4]


def test_mid_file_corruption_refuses_naming_file_and_offset(tmp_path: Path) -> None:
    s = DiskStorage(str(tmp_path))
    s.write(HardState(1, 0, 0), None, ents(1, 5))
    s.sync()
    s.close()
    (seg,) = segs(tmp_path)
    data = bytearray(seg.read_bytes())
    second = offsets(seg)[2]  # START, the entry 1, then entry 2
    data[second + 20] ^= 0xFF  # flip a byte inside the second record's payload
    seg.write_bytes(bytes(data))
    with pytest.raises(StorageCorruption) as ei:
        reopen(tmp_path).load()
    assert ei.value.path == str(seg) and ei.value.offset == second
    assert str(seg) in str(ei.value) and f"offset {second}" in str(ei.value)


@pytest.mark.parametrize("byte", [0, 1, 2, 3])
def test_damaged_length_mid_file_is_corruption_not_a_torn_tail(tmp_path: Path, byte: int) -> None:
    s = DiskStorage(str(tmp_path))
    s.write(HardState(1, 0, 0), None, ents(1, 10))
    s.sync()
    s.close()
    (seg,) = segs(tmp_path)
    data = bytearray(seg.read_bytes())
    size = len(data)
    fifth = offsets(seg)[5]
    data[fifth + byte] ^= 0x40  # a length that now runs past the end of the file
    seg.write_bytes(bytes(data))
    with pytest.raises(StorageCorruption) as ei:
        reopen(tmp_path).load()
    assert ei.value.offset == fifth and "header checksum" in str(ei.value)
    assert seg.stat().st_size == size  # nothing truncated: fsynced records are not dropped


def test_corruption_in_an_older_segment_refuses(tmp_path: Path) -> None:
    s = DiskStorage(str(tmp_path), segment_bytes=120)
    for i in range(1, 10):
        s.write(HardState(1, 0, 0) if i == 1 else None, None, ents(i, i))
    s.close()
    first = segs(tmp_path)[0]
    with open(first, "ab") as f:
        f.write(b"\x00\x00")  # an incomplete record is only tolerated in the last segment
    with pytest.raises(StorageCorruption) as ei:
        reopen(tmp_path).load()
    assert ei.value.path == str(first)


def test_bad_segment_header_refuses(tmp_path: Path) -> None:
    s = DiskStorage(str(tmp_path))
    s.write(HardState(1, 0, 0), None, ents(1, 2))
    s.close()
    (seg,) = segs(tmp_path)
    seg.write_bytes(b"NOTALOG!" + seg.read_bytes()[8:])
    with pytest.raises(StorageCorruption, match="offset 0: bad segment header"):
        reopen(tmp_path).load()


def test_corrupt_state_record_refuses(tmp_path: Path) -> None:
    s = DiskStorage(str(tmp_path))
    s.write(HardState(3, 2, 0), None, [])
    s.write(HardState(1, 0, 0), None, ents(1, 2))
    s.close()
    (seg,) = segs(tmp_path)
    state = offsets(seg)[1]
    raw = bytearray(seg.read_bytes())
    raw[state + 14] ^= 1
    seg.write_bytes(bytes(raw))
    with pytest.raises(StorageCorruption, match=f"offset {state}: record checksum"):
        reopen(tmp_path).load()


def test_snapshot_replacement_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = DiskStorage(str(tmp_path))
    s.write(HardState(1, 1, 0), None, ents(1, 10))
    s.write(None, None, [], compacted=Snapshot(3, 1, b"three"))
    s.close()

    def crash(src: str, dst: str) -> None:
        raise OSError("power lost before rename")

    s = reopen(tmp_path)
    s.load()
    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(StorageFailed):
        s.write(None, None, [], compacted=Snapshot(6, 1, b"six"))
    monkeypatch.undo()
    # The old snapshot is intact and the half-written temp file is cleaned up on recovery.
    assert (tmp_path / "snapshot.tmp").exists()
    init = reopen(tmp_path).load()
    assert init.snapshot == Snapshot(3, 1, b"three")
    assert [e.index for e in init.entries] == list(range(4, 11))
    assert not (tmp_path / "snapshot.tmp").exists()


def test_atomic_write_replaces_content(tmp_path: Path) -> None:
    p = tmp_path / "f"
    atomic_write(str(p), b"one")
    atomic_write(str(p), b"two")
    assert p.read_bytes() == b"two"


def test_format_2_directory_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    (tmp_path / "hardstate").write_bytes(b"\x00" * 8)
    with pytest.raises(StorageCorruption, match="on-disk format 2"):
        reopen(tmp_path).load()
    (tmp_path / "hardstate").unlink()
    (tmp_path / "0000000000000001.seg").write_bytes(b"EGRLOG\x00\x02" + b"\x01" * 30)
    with pytest.raises(StorageCorruption, match="on-disk format 2"):
        reopen(tmp_path).load()
    (tmp_path / "0000000000000001.seg").unlink()
    body = b"\x01" + bytes(20)  # a format-2 snapshot file: codec version 1 first
    (tmp_path / "snapshot").write_bytes(struct.pack(">I", zlib.crc32(body)) + body)
    with pytest.raises(StorageCorruption, match="format 2 or older are refused"):
        reopen(tmp_path).load()


@settings(max_examples=60, derandomize=True, deadline=None)
@given(
    batches=st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=8),
    synced=st.integers(min_value=0, max_value=8),
    cut=st.floats(min_value=0.0, max_value=1.0),
)
def test_losing_any_unsynced_suffix_recovers_every_synced_entry(
    batches: list[int], synced: int, cut: float
) -> None:
    # Batches [0, synced) are fsynced; the crash keeps an arbitrary byte prefix of the rest.
    with tempfile.TemporaryDirectory() as d:
        s = DiskStorage(d, segment_bytes=1 << 20)
        nxt = 1
        durable_last = 0
        durable_size = len(MAGIC)
        for i, n in enumerate(batches):
            s.write(HardState(1, 0, 0) if i == 0 else None, None, ents(nxt, nxt + n - 1))
            nxt += n
            if i < synced:
                s.sync()
                durable_last = nxt - 1
                durable_size = s._size
        (seg,) = segs(Path(d))
        size = seg.stat().st_size
        keep = durable_size + int((size - durable_size) * cut)
        os.truncate(seg, keep)
        got = [e.index for e in DiskStorage(d).load().entries]
        assert got == list(range(1, len(got) + 1))  # a gap-free prefix
        assert len(got) >= durable_last  # nothing synced was lost
        os.close(s._fd)
