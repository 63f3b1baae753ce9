"""The page-cache model's write-backs that are not all-or-nothing (crashstates.Writeback):
some dirty pages fail while others reach the disk (block-layer errors are per bio), and a
failed page in a block the file did not have before reads back that block's previous
content (stale blocks) instead of zeros. Then why the disk log never accepts such stale
bytes: each record's checksum is chained from its predecessor's, so a stale record chains
only after exactly the bytes that preceded it when it was written; a copy of the disk log
whose records are not chained accepts them (seeded, caught here; the crash-state explorer
does not reach that layout)."""

from __future__ import annotations

import errno

import pytest

from epochgc.impl.raft.crashstates import (
    PAGE,
    Fault,
    FaultKind,
    Model,
    RecordingFS,
    WbMode,
    Writeback,
    crash_images,
)
from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.messages import HardState
from epochgc.impl.raft.storage import StorageCorruption, StorageFailed
from tests.raft import crashexplore as cx


def _fail_next(fs: RecordingFS, wb: Writeback) -> None:
    n = fs.calls["fsync"]
    fs.faults[("fsync", n)] = Fault("fsync", n, FaultKind.EIO, writeback=wb)


def _eio(call: object, *args: object) -> None:
    with pytest.raises(OSError) as e:
        call(*args)  # type: ignore[operator]
    assert e.value.errno == errno.EIO


def _disk_images(fs: RecordingFS, path: str) -> set[bytes | None]:
    """What a power loss may leave of `path` (None: no such file)."""
    return {img.files().get(path) for img in crash_images(fs.trace, Model.PAGECACHE, ["/d"])}


A, B, C = b"a" * PAGE, b"b" * PAGE, b"c" * PAGE


def _three_dirty_pages(wb: Writeback) -> RecordingFS:
    fs = RecordingFS("/d")
    fd = fs.open_append("/d/f", create=True)
    fs.write(fd, A + B + C)
    _fail_next(fs, wb)
    _eio(fs.fsync, fd)
    fs.fsync(fd)  # reported once; nothing dirty: the next barrier writes nothing
    assert fs.read("/d/f") == A + B + C  # the cache keeps every page
    return fs


@pytest.mark.parametrize(("wb", "disk"), [
    (Writeback(), bytes(3 * PAGE)),
    (Writeback(WbMode.PREFIX, 1), A + bytes(2 * PAGE)),
    (Writeback(WbMode.PREFIX, 2), A + B + bytes(PAGE)),
    (Writeback(WbMode.ONE, 0), bytes(PAGE) + B + C),
    (Writeback(WbMode.ONE, 1), A + bytes(PAGE) + C),
], ids=str)
def test_some_pages_of_a_failed_write_back_reach_the_disk(wb: Writeback, disk: bytes) -> None:
    fs = _three_dirty_pages(wb)
    assert _disk_images(fs, "/d/f") == {disk}  # at every later point, and a power loss
    assert fs.read_durable("/d/f") == disk


def test_a_syncfs_may_fail_one_files_pages_and_write_anothers() -> None:
    """Pages in (inode, page) order: the first file's page written, the second's failed;
    only the second file's errseq records the error (the first's fsync reports nothing),
    the file system's reports it to the syncfs."""
    fs = RecordingFS("/d")
    f1, f2 = fs.open_append("/d/f1", create=True), fs.open_append("/d/f2", create=True)
    fs.write(f1, b"1" * 10)
    fs.write(f2, b"2" * 10)
    root = fs.open_fs("/d")
    _fail_next(fs, Writeback(WbMode.PREFIX, 1))
    _eio(fs.syncfs, root)
    fs.fsync(f1)
    _eio(fs.fsync, f2)
    assert fs.read_durable("/d/f1") == b"1" * 10
    assert fs.read_durable("/d/f2") == bytes(10)


def test_a_new_files_failed_page_may_read_back_an_unlinked_files_blocks() -> None:
    fs = RecordingFS("/d")
    old = fs.open_append("/d/old", create=True)
    fs.write(old, b"o" * (2 * PAGE))
    fs.fsync(old)
    fs.unlink("/d/old")
    new = fs.open_append("/d/new", create=True)
    fs.write(new, b"n" * 100)
    _fail_next(fs, Writeback(stale=True))
    _eio(fs.fsync, new)
    fs.fsync(new)  # (its size reaches the disk at the next barrier)
    assert fs.read("/d/new") == b"n" * 100
    assert _disk_images(fs, "/d/new") == {b"o" * 100}
    assert fs.read_durable("/d/new") == b"o" * 100


def test_pages_past_a_truncate_may_read_back_the_files_own_old_bytes() -> None:
    """A cut frees the blocks past it; an append there whose write-back fails reads back
    the old bytes at those offsets in a block past the disk's last page, zeros in the
    partly kept page (written back, zero past the cut, by the truncate's own fsync)."""
    fs = RecordingFS("/d")
    fd = fs.open_append("/d/f", create=True)
    fs.write(fd, b"x" * 100 + b"o" * (2 * PAGE))
    fs.fsync(fd)
    fs.truncate("/d/f", 100)
    fs.write(fd, b"n" * (2 * PAGE))
    _fail_next(fs, Writeback(stale=True))
    _eio(fs.fsync, fd)
    fs.fsync(fd)
    disk = b"x" * 100 + bytes(PAGE - 100) + b"o" * (PAGE + 100)
    assert _disk_images(fs, "/d/f") == {disk}
    assert fs.read_durable("/d/f") == disk


# ---- the disk log against stale records ---------------------------------------------------------

G = "/data/n1/g1"
SEG = f"{G}/0000000000000001.seg"
NOT_CHAINED = cx.Mutant(
    "records not chained (each record's crc from 0)",
    "            crc = crc32(payload, crc)\n", "            crc = crc32(payload)\n",
    "                    seed = crc if chained else 0\n", "                    seed = 0\n",
    path2="impl/raft/diskrecovery.py")


def _history(term: int, leader: int, storage: type[DiskStorage], last: int = 8) -> RecordingFS:
    """Entries 1-3 of term 1, then a leader of term `leader` sends 4-`last` of `term` (same
    sizes: same offsets), one segment."""
    fs = RecordingFS("/data")
    s = storage(G, segment_bytes=1 << 20, fs=fs)
    s.load()
    s.write(HardState(1, 1, 3), None, cx.entries(1, 3, 1))
    s.sync()
    s.write(HardState(leader, 0, 3), None, cx.entries(4, last, term, size=200))
    s.sync()
    s.abandon()
    return fs


def _recover_spliced(storage: type[DiskStorage]) -> list[tuple[int, int]] | str:
    """The segment as a stale block leaves it: the new history (a leader of term 4 sends
    4-8 of term 2, committed) up to the end of its record 5, then the old history's bytes
    from there (records 6-8 of term 3, a deposed leader's uncommitted entries the node had:
    at exactly their old offsets, in the blocks a cut freed, or a deleted file's)."""
    old, fs = _history(3, 3, storage).read(SEG), _history(2, 4, storage)
    new, cut = fs.read(SEG), len(_history(2, 4, storage, last=5).read(SEG))
    assert old[:cut] != new[:cut] and len(old) == len(new)
    ino = fs.ns[SEG]
    fs.inodes[ino] = bytearray(new[:cut] + old[cut:])
    fs.disk[ino] = new[:cut] + old[cut:]
    try:
        init = storage(G, segment_bytes=1 << 20, fs=fs).load()
    except StorageCorruption as e:
        return str(e)
    return [(e.index, e.term) for e in init.entries]


def _not_a_log_it_had(got: list[tuple[int, int]] | str) -> list[tuple[int, int]]:
    """The recovered log, if it is no prefix of either log the node had (Raft's Log
    Matching: an entry (8, 3) after (5, 2) where the term-3 leader had other entries)."""
    if isinstance(got, str):
        return []
    had = [[*((i, 1) for i in range(1, 4)), *((i, t) for i in range(4, 9))] for t in (2, 3)]
    return [] if any(got == h[: len(got)] for h in had) else got


def test_stale_records_of_an_older_history_never_chain_after_the_new_ones() -> None:
    """The old history's records 6-8 sit exactly where records follow the new 5: they
    chain from the old 5's checksum, not the new one's, so recovery refuses (nonzero bytes
    that fail the chain: damage, to recovery) and never returns them."""
    got = _recover_spliced(DiskStorage)
    assert _not_a_log_it_had(got) == [], got
    assert isinstance(got, str) and "checksum" in got


def test_a_disk_log_without_chained_checksums_accepts_the_stale_records() -> None:
    """Seeded: each record's checksum from 0 (writer and reader). The same stale image is then
    recovered with the deposed leader's entries 6-8 of term 3 after the new leader's 4-5 of
    term 2: a log the node never had."""
    got = _recover_spliced(cx.mutant_storage(NOT_CHAINED))
    assert _not_a_log_it_had(got) == [*((i, 1) for i in range(1, 4)), (4, 2), (5, 2),
                                      (6, 3), (7, 3), (8, 3)], got


# ---- a directory's write-back error: the journal aborts ------------------------------------------


def test_a_failed_directory_fsync_aborts_the_journal() -> None:
    """A rename, then its directory's fsync fails (EIO): the new name is what reads see (the
    dentry is cached) but need not be on the device; every later barrier fails (EIO) and
    every change is refused (EROFS) until a reboot, so nothing after it is acknowledged."""
    fs = RecordingFS("/d")
    fd = fs.open_trunc("/d/f.tmp")
    fs.write(fd, b"new")
    fs.fsync(fd)
    fs.close(fd)
    fs.replace("/d/f.tmp", "/d/f")
    n = fs.calls["fsync"]
    fs.faults[("fsync", n)] = Fault("fsync", n, FaultKind.EIO)
    _eio(fs.fsync_dir, "/d")
    assert fs.aborted and fs.exists("/d/f") and not fs.exists("/d/f.tmp")
    names = {tuple(sorted(img.files())) for img in crash_images(fs.trace, Model.PAGECACHE,
                                                                ["/d"])}
    assert ("/d/f.tmp",) in names  # the rename not on the device
    _eio(fs.read_durable, "/d/f")
    _eio(fs.fsync_dir, "/d")
    with pytest.raises(OSError) as e:
        fs.open_append("/d/g", create=True)
    assert e.value.errno == errno.EROFS


def test_a_node_whose_directory_fsync_failed_stays_down_until_a_reboot() -> None:
    """The disk log's new segment, whose directory fsync fails: the node stops
    (StorageFailed), and every restart without a reboot stops again (read_durable's fsync
    fails); every crash state at that point (what a reboot's journal replay may leave)
    recovers every acknowledged entry."""
    fs = RecordingFS("/data")
    s = DiskStorage(G, segment_bytes=200, fs=fs)
    s.load()
    acked = cx.entries(1, 4, 1, size=60)
    s.write(HardState(1, 1, 0), None, acked)
    s.sync()
    s.write(None, None, cx.entries(5, 8, 1, size=60))  # cuts a segment: a directory entry
    n = fs.calls["fsync"] + 1  # (the segment's fsync, then the directory's)
    fs.faults[("fsync", n)] = Fault("fsync", n, FaultKind.EIO)
    with pytest.raises(StorageFailed):
        s.sync()
    assert fs.aborted and fs.failed[-1].call == n
    s.abandon()
    for _ in range(3):
        with pytest.raises(StorageFailed):
            DiskStorage(G, segment_bytes=200, fs=fs).load()
    for img in crash_images(fs.trace, Model.PAGECACHE, ["/data"]):
        got = DiskStorage(G, segment_bytes=200, fs=RecordingFS.from_image(img)).load()
        assert list(got.entries[: len(acked)]) == acked, img.describe()
