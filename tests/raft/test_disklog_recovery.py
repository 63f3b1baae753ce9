"""Issue 27 items 4, 5, 6 and the FRESH rule of item 3: recovery never deletes what it has not
proven redundant, recovers out-of-order sectors (etcd's torn-write rule), makes every
directory it creates durable in its parent, and binds an install to its own segment."""

from __future__ import annotations

import os
import random
import struct
import zlib
from pathlib import Path

import pytest

from epochgc.impl.raft.diskformat import QUARANTINE
from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.fileio import SECTOR, CrashFS, OsFileIO
from epochgc.impl.raft.messages import Entry, HardState, Snapshot
from epochgc.impl.raft.storage import StorageCorruption


def ents(lo: int, hi: int, term: int = 1, size: int = 10) -> list[Entry]:
    return [Entry(i, term, 1, bytes([i % 250 + 1]) * size) for i in range(lo, hi + 1)]


def segs(d: Path) -> list[Path]:
    return sorted(d.glob("*.seg"))


def shape(d: Path) -> tuple[HardState, int, list[tuple[int, int]]]:
    init = DiskStorage(str(d)).load()
    return init.hard_state, init.snapshot.index, [(e.index, e.term) for e in init.entries]


def fill(d: Path, n: int) -> DiskStorage:
    """Entries 1..n, one per write (so that the 200-byte segments roll)."""
    s = DiskStorage(str(d), segment_bytes=200)
    for i in range(1, n + 1):
        s.write(HardState(1, 1, 0) if i == 1 else None, None, ents(i, i))
    return s


# ---- item 4: a gap in the numbering ------------------------------------------------------------


def test_unlink_undone_by_a_crash_is_moved_aside_not_deleted(tmp_path: Path) -> None:
    # Compaction at 12 drops segments 1-2 (their unlinks never reached the disk: segment 1
    # comes back, 2 does not). Old code unlinked segment 1 again (evidence gone); now it is
    # read, proven covered by the snapshot, and moved into quarantine/ byte for byte.
    d = tmp_path / "g1"
    s = fill(d, 16)
    s.sync()
    first = segs(d)[0].read_bytes()
    n_before = len(segs(d))
    s.write(HardState(1, 1, 16), None, [], compacted=Snapshot(12, 1, b"twelve"))
    s.close()
    assert len(segs(d)) < n_before - 1
    want = shape(d)
    (d / "0000000000000001.seg").write_bytes(first)
    got = shape(d)
    assert got == want
    assert (d / QUARANTINE / "0000000000000001.seg").read_bytes() == first
    assert not (d / "0000000000000001.seg").exists()


def test_a_gap_before_needed_entries_is_refused_and_nothing_moves(tmp_path: Path) -> None:
    d = tmp_path / "g1"
    s = fill(d, 16)
    s.close()
    segs(d)[1].unlink()
    before = sorted(p.name for p in d.iterdir())
    with pytest.raises(StorageCorruption, match="missing") as ei:
        DiskStorage(str(d)).load()
    assert ei.value.path.endswith("0000000000000001.seg") and ei.value.offset == 0
    assert sorted(p.name for p in d.iterdir()) == before


# ---- item 5: out-of-order sectors --------------------------------------------------------------


def _unsynced_tail(d: Path) -> tuple[Path, int]:
    s = DiskStorage(str(d))
    s.write(HardState(1, 1, 0), None, ents(1, 3))
    s.sync()
    (seg,) = segs(d)
    size = seg.stat().st_size
    s.write(None, None, ents(4, 9, size=300))  # about 2 kB, never synced
    s.abandon()
    return seg, size


def test_a_later_sector_on_disk_and_an_earlier_one_not_is_a_torn_write(tmp_path: Path) -> None:
    # Page-cache writeback wrote the tail's third sector but not its second. Old code refused
    # to start ("record checksum mismatch": its rule wanted zeros to the end of the file).
    d = tmp_path / "g1"
    seg, size = _unsynced_tail(d)
    data = bytearray(seg.read_bytes())
    hole = (size // SECTOR + 1) * SECTOR
    data[hole : hole + SECTOR] = bytes(SECTOR)
    assert any(data[hole + SECTOR :])
    seg.write_bytes(bytes(data))
    _, _, got = shape(d)
    assert got[:3] == [(1, 1), (2, 1), (3, 1)]
    assert [i for i, _ in got] == list(range(1, len(got) + 1))
    assert seg.stat().st_size <= hole  # cut at the first record touching the zero sector


def test_a_failing_last_record_without_a_zero_sector_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "g1"
    seg, size = _unsynced_tail(d)
    data = bytearray(seg.read_bytes())
    data[-5] ^= 1  # bit rot in the last record: not a crash's doing
    seg.write_bytes(bytes(data))
    with pytest.raises(StorageCorruption, match="checksum mismatch") as ei:
        DiskStorage(str(d)).load()
    assert ei.value.offset > size
    assert seg.read_bytes() == bytes(data)


# ---- item 3: a FRESH segment only at the install's sequence ------------------------------------


def test_fresh_segment_at_another_sequence_than_the_install_is_refused(tmp_path: Path) -> None:
    # The install's FRESH segment renamed to the next number (its START, group and chain all
    # valid): only the snapshot file's install sequence may start a fresh log.
    d = tmp_path / "g1"
    s = DiskStorage(str(d), segment_bytes=300)
    s.write(HardState(1, 1, 0), None, ents(1, 6))
    s.sync()
    s.write(HardState(2, 0, 10), Snapshot(10, 2, b"leader"), [])
    s.close()
    fresh = segs(d)[-1]
    seq = int(fresh.stem)
    data = bytearray(fresh.read_bytes())
    struct.pack_into(">Q", data, 8 + 12 + 1 + 1 + 8, seq + 1)  # the START's sequence
    fresh.unlink()
    moved = d / f"{seq + 1:016d}.seg"
    moved.write_bytes(reseal(bytes(data)))
    with pytest.raises(StorageCorruption, match=f"FRESH segment at {seq + 1}") as ei:
        DiskStorage(str(d)).load()
    assert ei.value.path == str(moved) and ei.value.offset == 8


def reseal(data: bytes) -> bytes:
    """Recompute every record's chained checksums (what a buggy writer would produce)."""
    out, off, seed = bytearray(data[:8]), 8, 0
    while off < len(data):
        (word,) = struct.unpack_from(">I", data, off)
        n = word & 0x1FFFFFFF  # (format 5: marker bits, then a trailer byte after the payload)
        payload = data[off + 12 : off + 12 + n]
        crc = zlib.crc32(payload, seed)
        head = struct.pack(">II", word, crc)
        out += head + struct.pack(">I", zlib.crc32(head)) + payload + b"\xa5"
        seed, off = crc, off + 12 + n + 1
    return bytes(out)


# ---- item 6: every directory created is made durable in its parent -----------------------------


class RecordingFileIO(OsFileIO):
    """The real file system, with a log of the directory calls made through it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def mkdir(self, path: str) -> None:
        super().mkdir(path)
        self.calls.append(("mkdir", os.path.abspath(path)))

    def makedirs(self, path: str) -> None:
        super().makedirs(path)
        self.calls.append(("makedirs", os.path.abspath(path)))

    def fsync_dir(self, path: str) -> None:
        super().fsync_dir(path)
        self.calls.append(("fsync_dir", os.path.abspath(path)))


def _durable(calls: list[tuple[str, str]], created: str) -> bool:
    """`created` was made by mkdir and its parent fsynced after that."""
    if ("mkdir", created) not in calls:
        return False
    k = calls.index(("mkdir", created))
    return ("fsync_dir", os.path.dirname(created)) in calls[k + 1 :]


def test_every_created_directory_is_fsynced_in_its_parent(tmp_path: Path) -> None:
    # Old code: os.makedirs and no fsync of the parents (a crash could lose the group's
    # directory, with its hard state and entries, on strict POSIX).
    fs = RecordingFileIO()
    data = tmp_path / "data"
    g = data / "g1"
    s = DiskStorage(str(g), fs=fs)
    s.write(HardState(1, 1, 0), None, ents(1, 2))
    s.close()
    assert _durable(fs.calls, str(data)) and _durable(fs.calls, str(g)), fs.calls


def test_the_quarantine_folder_is_fsynced_in_its_parent(tmp_path: Path) -> None:
    g = tmp_path / "g1"
    s = fill(g, 16)
    s.sync()
    first = segs(g)[0].read_bytes()
    s.write(HardState(1, 1, 16), None, [], compacted=Snapshot(12, 1, b"twelve"))
    s.close()
    (g / "0000000000000001.seg").write_bytes(first)  # an unlink undone by a crash
    fs = RecordingFileIO()
    DiskStorage(str(g), fs=fs).load()
    assert _durable(fs.calls, str(g / QUARANTINE)), fs.calls
    assert fs.calls[-1] == ("fsync_dir", str(g))  # the rename out of it is durable too


def test_a_damaged_record_ending_in_zeros_is_not_taken_for_a_torn_write(tmp_path: Path) -> None:
    # A fsynced record whose payload ends in zeros crosses a sector boundary; it is damaged
    # (a bit flip) and another record follows it in the same sector. etcd's looser rule ("a
    # part of the record in one sector is all zeros") would call it torn and cut it and every
    # record after it; its bytes past the record are not zeros, so no crash zeroed that sector.
    d = tmp_path / "g1"
    s = DiskStorage(str(d))
    s.write(HardState(1, 1, 0), None, ents(1, 1))
    s.sync()
    (seg,) = segs(d)
    at = seg.stat().st_size  # where entry 2's record begins
    overhead = 12 + 1 + 24  # record header, kind, entry header
    tail_zeros = 40
    size = SECTOR + 20 - at  # the record ends 20 bytes into the second sector
    data = b"\x05" * (size - overhead - tail_zeros) + bytes(tail_zeros)
    s.write(None, None, [Entry(2, 1, 1, data), *ents(3, 4)])
    s.close()
    raw = bytearray(seg.read_bytes())
    assert not any(raw[SECTOR : SECTOR + 20]) and any(raw[SECTOR + 20 : 2 * SECTOR])
    raw[at + 60] ^= 1  # in the payload (the header stays valid)
    seg.write_bytes(bytes(raw))
    with pytest.raises(StorageCorruption, match="checksum mismatch") as ei:
        DiskStorage(str(d)).load()
    assert ei.value.offset == at
    assert seg.read_bytes() == bytes(raw)


def test_entries_above_the_hard_state_term_are_refused(tmp_path: Path) -> None:
    # A writer that appended entries of term 2 without ever making term 2 durable (the node
    # could vote in term 2 again after a restart): a stale hard state.
    d = tmp_path / "g1"
    s = DiskStorage(str(d))
    s.write(HardState(1, 1, 0), None, ents(1, 2, term=2))
    s.close()
    with pytest.raises(StorageCorruption, match="stale hard state"):
        DiskStorage(str(d)).load()


@pytest.mark.parametrize("name", ["1.seg", "x.seg", "00000000000000001.seg"])
def test_a_stray_file_named_like_a_segment_is_refused_by_name(tmp_path: Path, name: str) -> None:
    # Old code: ValueError or FileNotFoundError from int(name) / the 16-digit path.
    d = tmp_path / "g1"
    s = DiskStorage(str(d))
    s.write(HardState(1, 1, 0), None, ents(1, 2))
    s.close()
    (d / name).write_bytes(segs(d)[0].read_bytes())
    with pytest.raises(StorageCorruption, match="not a segment name") as ei:
        DiskStorage(str(d)).load()
    assert ei.value.path == str(d / name)


@pytest.mark.parametrize("seed", range(8))
def test_a_crash_during_recovery_s_own_moves_changes_nothing_recovered(
    tmp_path: Path, seed: int
) -> None:
    # Recovery moves a proven-redundant segment into quarantine/ and cuts a torn tail; a
    # power loss right after (before anything else is synced) must leave a directory that
    # recovers the same state, with the moved segment's bytes still somewhere.
    d = tmp_path / "g1"
    s = fill(d, 16)
    s.sync()
    first = segs(d)[0].read_bytes()
    s.write(HardState(1, 1, 16), None, [], compacted=Snapshot(12, 1, b"twelve"))
    s.sync()
    s.write(None, None, ents(17, 17))  # unsynced: torn by the crash below
    s.abandon()
    (d / "0000000000000001.seg").write_bytes(first)  # an unlink undone by an earlier crash
    with open(segs(d)[-1], "ab") as f:
        f.write(b"\0" * 30)  # and a torn tail
    fs = CrashFS()
    want = DiskStorage(str(d), fs=fs).load()
    fs.crash(random.Random(seed))
    got = DiskStorage(str(d)).load()
    assert (got.hard_state, got.snapshot, got.entries) == (
        want.hard_state,
        want.snapshot,
        want.entries,
    )
    kept = [p.read_bytes() for p in d.rglob("*.seg")]
    assert first in kept
