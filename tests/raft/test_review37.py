"""Independent review of issue 37's fixes: attacks on the torn-write rule of format 5 and on a
restart after a fault, on the real DiskStorage over RecordingFS (the PAGECACHE model)."""

from __future__ import annotations

import pytest
from epochgc.impl.raft.crashstates import RecordingFS
from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.messages import HardState
from epochgc.impl.raft.storage import StorageCorruption

from tests.raft import crashexplore as cx

G1 = "/data/n1/g1"


def _log_with_header_at(pos: int) -> tuple[RecordingFS, str, bytes, int]:
    """A fsynced log of three entries whose last record's header starts at byte `pos` of a
    512-byte sector (the first entry's size chosen for it)."""
    for size in range(24, 1200):
        fs = RecordingFS("/data")
        s = DiskStorage(G1, fs=fs)
        s.load()
        s.write(HardState(1, 1, 0), None, [cx.entry(1, 1, size), cx.entry(2, 1, 40),
                                           cx.entry(3, 1, 40)])
        s.sync()
        s.abandon()
        (seg,) = [p for p in fs.files() if p.endswith(".seg")]
        data = fs.read(seg)
        last = cx._record_starts(data)[-1]
        if last % 512 == pos:
            return fs, seg, data, last
    raise AssertionError(f"no layout with a record header at {pos} of a sector")


@pytest.mark.parametrize("pos", [509, 510, 511])
def test_one_flipped_bit_of_a_header_in_a_sectors_last_bytes_is_refused(pos: int) -> None:
    """Item 4 again, through the marker itself: with a one-bit marker (0x80) a single flip
    of that bit in a header starting in a sector's last 1-3 bytes leaves those bytes all
    zero, exactly what a lost sector leaves, and recovery cut the fsynced entry 3 as torn.
    Found on main: 'DID NOT RAISE' (load() returned entries 1..2)."""
    fs, seg, data, at = _log_with_header_at(pos)
    for i in range(at, at + 12):
        for bit in range(8):
            bad = data[:i] + bytes([data[i] ^ (1 << bit)]) + data[i + 1 :]
            with pytest.raises(StorageCorruption):
                DiskStorage(G1, fs=RecordingFS.from_image(cx._image_of(fs, {seg: bad}))).load()


def test_every_single_bit_flip_of_the_last_record_is_refused() -> None:
    """Every bit of every byte of the last record (marker, length, crcs, payload, trailer)
    of a log whose last record starts at byte 510 of a sector: refused, never cut, never
    accepted."""
    fs, seg, data, at = _log_with_header_at(510)
    for i in range(at, len(data)):
        for bit in range(8):
            bad = data[:i] + bytes([data[i] ^ (1 << bit)]) + data[i + 1 :]
            with pytest.raises(StorageCorruption):
                DiskStorage(G1, fs=RecordingFS.from_image(cx._image_of(fs, {seg: bad}))).load()
