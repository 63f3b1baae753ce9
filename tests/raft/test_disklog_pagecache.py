"""The disk log under Linux's write-back error semantics (issue 37): the PAGECACHE model of
impl/raft/crashstates.py itself, then a restart after a failed fsync without a reboot (item
1) and a syncfs barrier that another tenant's write-back error must reach (item 2)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from epochgc.impl.raft.crashstates import (
    PAGE,
    Fault,
    FaultKind,
    Image,
    Model,
    RecordingFS,
    crash_images,
)
from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.groupcommit import GroupCommit
from epochgc.impl.raft.messages import Entry, HardState
from epochgc.impl.raft.storage import StorageCorruption, StorageFailed, sync_all
from tests.raft import crashexplore as cx

G1 = "/data/n1/g1"


def fail_next_fsync(fs: RecordingFS) -> None:
    """The next fsync-like call's write-back fails (EIO)."""
    n = fs.calls["fsync"]
    fs.faults[("fsync", n)] = Fault("fsync", n, FaultKind.EIO)


# ---- the model ------------------------------------------------------------------------------


def test_failed_writeback_keeps_the_cache_marks_it_clean_and_a_second_fsync_succeeds() -> None:
    fs = RecordingFS("/d")
    fd = fs.open_append("/d/f", create=True)
    fs.write(fd, b"a" * 100)
    fs.fsync(fd)
    fs.write(fd, b"b" * (2 * PAGE))
    fail_next_fsync(fs)
    with pytest.raises(OSError) as e:
        fs.fsync(fd)
    assert e.value.errno == errno.EIO
    fs.fsync(fd)  # reported once to this descriptor; nothing dirty: succeeds
    assert fs.read("/d/f") == b"a" * 100 + b"b" * (2 * PAGE)  # the cache still has it
    # ... the disk does not, at this barrier or any later one, nor at a power loss
    disk = b"a" * 100 + bytes(2 * PAGE)
    assert {img.files()["/d/f"] for img in crash_images(fs.trace, Model.PAGECACHE, ["/d"])} \
        == {disk}
    # (the kinder models persist it at the second fsync)
    assert {img.files()["/d/f"] for img in crash_images(fs.trace, Model.EXT4_ORDERED, ["/d"])} \
        == {b"a" * 100 + b"b" * (2 * PAGE)}
    assert fs.read_durable("/d/f") == disk  # fsync, drop the clean pages, read the device
    assert fs.read("/d/f") == disk


def test_a_write_into_a_lost_page_writes_the_whole_page_back() -> None:
    fs = RecordingFS("/d")
    fd = fs.open_append("/d/f", create=True)
    fs.write(fd, b"x" * (PAGE + 10))
    fail_next_fsync(fs)
    with pytest.raises(OSError):
        fs.fsync(fd)
    fs.write(fd, b"y")  # dirties page 1 again, not page 0
    fs.fsync(fd)
    (img,) = {i.digest: i for i in crash_images(fs.trace, Model.PAGECACHE, ["/d"])}.values()
    assert img.files()["/d/f"] == bytes(PAGE) + b"x" * 10 + b"y"


def test_errseq_reports_to_each_descriptor_once_and_a_later_opener_only_if_unseen() -> None:
    fs = RecordingFS("/d")
    a = fs.open_append("/d/f", create=True)
    b = fs.open_append("/d/f", create=False)
    fs.write(a, b"z")
    fail_next_fsync(fs)
    with pytest.raises(OSError):
        fs.fsync(a)  # seen by a
    with pytest.raises(OSError):
        fs.fsync(b)  # b was opened before the error: reported to it too, once
    fs.fsync(b)
    c = fs.open_append("/d/f", create=False)
    fs.fsync(c)  # opened after the error was seen: never reported (what a restart gets)
    # syncfs: the file system's errseq, sampled at open_fs
    held = fs.open_fs("/d")
    fs.write(a, b"w")
    assert fs.other_tenant_syncfs(fail=True)  # another process sees the error first
    with pytest.raises(OSError):
        fs.syncfs(held)  # the descriptor held since before: reported
    fresh = fs.open_fs("/d")
    fs.syncfs(fresh)  # opened after another process saw it: returns 0
    # a reboot drops the cache: reads see the disk
    fs.drop_cache()
    assert fs.read("/d/f") == b"\0\0"  # both lost pages ("z", then "w"): a hole


# ---- item 1: a restart after a failed fsync -----------------------------------------------------


def restart_after_failed_fsync(storage: type[DiskStorage] = DiskStorage) -> list[str]:
    """Entries 1..3 synced; 4..10 written, their fsync fails (StorageFailed, the process is
    killed); a new process (no reboot: the cache is kept) recovers: what load() returns Raft
    takes as stable and acknowledges; it appends two more entries and syncs; the power goes.
    Returns every way a recovery from a PAGECACHE image loses what was acknowledged."""
    fs = RecordingFS("/data")
    s = storage(G1, fs=fs)
    s.load()
    s.write(HardState(1, 1, 0), None, cx.entries(1, 3, 1))
    s.sync()
    s.write(HardState(1, 1, 3), None, cx.entries(4, 10, 1, size=1000))
    fail_next_fsync(fs)
    with pytest.raises(StorageFailed):
        s.sync()
    s.abandon()  # killed
    s2 = storage(G1, fs=fs)
    init = s2.load()
    acked = list(init.entries)
    last = acked[-1].index
    more = cx.entries(last + 1, last + 2, 1, size=1000)
    s2.write(HardState(1, 1, last + 2), None, more)
    s2.sync()
    acked += more
    s2.abandon()
    problems = []
    for img in crash_images(fs.trace, Model.PAGECACHE, ["/data"]):
        got = storage(G1, fs=RecordingFS.from_image(img)).load()
        if list(got.entries[: len(acked)]) != acked or got.hard_state.term < 1:
            problems.append(
                f"load() after the restart returned entries {init.entries[0].index}.."
                f"{last} as stable; after a power loss the log is "
                f"{[e.index for e in got.entries]} with hard state {got.hard_state}"
            )
    return problems


def test_item1_restart_after_a_failed_fsync_acknowledges_only_what_the_disk_holds() -> None:
    """Found on the old code (load() read the page cache): 'load() after the restart
    returned entries 1..10 as stable; after a power loss the log is [1, 2, 3] with hard state
    HardState(term=1, vote=1, commit=0)'."""
    assert restart_after_failed_fsync() == []


def test_item1_load_reads_the_device_not_the_cache() -> None:
    fs = RecordingFS("/data")
    s = DiskStorage(G1, fs=fs)
    s.load()
    s.write(HardState(1, 1, 0), None, cx.entries(1, 3, 1))
    s.sync()
    s.write(HardState(1, 1, 3), None, cx.entries(4, 10, 1, size=1000))
    fail_next_fsync(fs)
    with pytest.raises(StorageFailed):
        s.sync()
    s.abandon()
    init = DiskStorage(G1, fs=fs).load()
    assert [e.index for e in init.entries] == [1, 2, 3]
    assert init.hard_state == HardState(1, 1, 0)


def test_item1_an_unseen_writeback_error_stops_the_restart() -> None:
    """The write-back failed after the process died (nobody saw it): the restart's own fsync
    reports it (errseq sampled as 0) and the node does not start; the next restart does,
    with what the disk holds."""
    fs = RecordingFS("/data")
    s = DiskStorage(G1, fs=fs)
    s.load()
    s.write(HardState(1, 1, 0), None, cx.entries(1, 3, 1))
    s.sync()
    s.write(None, None, cx.entries(4, 10, 1, size=1000))
    s.abandon()  # killed before its sync; then the flusher's write-back fails
    fs._writeback_failed(list(fs.inodes))
    fs.sb_err.seen = False
    with pytest.raises(StorageFailed, match="reading what the disk holds"):
        DiskStorage(G1, fs=fs).load()
    init = DiskStorage(G1, fs=fs).load()
    assert [e.index for e in init.entries] == [1, 2, 3]


# ---- item 2: a syncfs barrier and another tenant's write-back error -----------------------------


def tenant_error_reaches_the_barrier(gc_factory: type[GroupCommit] = GroupCommit) -> bool:
    """Node A's two groups write; another tenant of the file system syncs it and the disk
    fails A's pages (the tenant sees the EIO); A's group-commit barrier must fail too."""
    fs = RecordingFS("/data")
    gc = gc_factory("/data/n1", fs, mode="syncfs")
    storages = [DiskStorage(f"/data/n1/g{g}", fs=fs, group_commit=gc) for g in (1, 2)]
    for st in storages:
        st.load()
        st.write(HardState(1, 1, 0), None, [Entry(1, 1, data=b"x")])
    sync_all(storages)
    for st in storages:
        st.write(HardState(1, 1, 1), None, [Entry(2, 1, data=b"y")])
    assert fs.other_tenant_syncfs(fail=True)
    try:
        sync_all(storages)
    except StorageFailed:
        return True
    return False


def test_item2_another_tenants_writeback_error_fails_the_group_commit_barrier() -> None:
    """Found with a descriptor opened per barrier (the old GroupCommit): the barrier
    returned 0 after the other tenant saw the EIO, and A acknowledged entries 2 the disk
    never got ('assert False')."""
    assert tenant_error_reaches_the_barrier()


# ---- items 3 and 4: the torn-write rule looks only at bytes a crash could have zeroed ---------


def test_items_3_4_bit_damage_of_a_fsynced_log_is_refused_never_cut() -> None:
    """Every single-bit flip of every byte of a small fsynced log (laid out so that a record's
    header starts in a sector's last 3 bytes and the last record, a hard state with zero vote
    and commit, ends a few bytes into a fresh sector; flips that leave the byte nonzero)
    either makes recovery refuse (StorageCorruption) or changes nothing it recovers. Found on
    the old code (format 4): 187 such images recovered a shorter log and an older hard state:
    'byte 512 ^ 0x1: recovered 4 entries, hard state HardState(term=1, vote=1, commit=0);
    the log holds 10' (item 4: a record header at 509, its length's zero high bytes taken
    for a zeroed sector) and 42 cut the last record (item 3: its zero tail starting the
    sector at 1024, e.g. 'byte 1009 ^ 0x1: recovered 10 entries, hard state
    HardState(term=1, vote=1, commit=0)')."""
    cut = cx.damage_findings()
    assert not cut, "\n".join(cut[:20]) + f"\n({len(cut)} in all)"


def test_a_flipped_bit_in_a_record_header_is_refused_not_cut() -> None:
    """Issue 37's first seeded bug of the family (a damaged header taken for a torn one cut
    every later entry silently): a flip in any header byte of a middle record of the last
    segment is refused."""
    fs = RecordingFS("/data")
    s = DiskStorage(G1, fs=fs)
    s.load()
    s.write(HardState(1, 1, 0), None, cx.entries(1, 6, 1))
    s.sync()
    s.abandon()
    (seg,) = [p for p in fs.files() if p.endswith(".seg")]
    data = fs.read(seg)
    at = cx._record_starts(data)[3]
    for i in range(at, at + 12):
        for mask in (0x01, 0x10, 0x80):
            bad = data[:i] + bytes([data[i] ^ mask]) + data[i + 1 :]
            if not data[i] ^ mask:
                continue
            with pytest.raises(StorageCorruption):
                DiskStorage(G1, fs=RecordingFS.from_image(cx._image_of(fs, {seg: bad}))).load()


def test_a_damaged_last_record_ending_on_a_sector_boundary_is_refused() -> None:
    """The second seeded bug of the family: a damaged final record that ends exactly on a
    512-byte boundary (no piece of a next sector to look at) is refused, not cut as torn."""
    for size in range(24, 600):
        fs = RecordingFS("/data")
        s = DiskStorage(G1, fs=fs)
        s.load()
        s.write(HardState(1, 1, 0), None, [cx.entry(1, 1, 100), cx.entry(2, 1, size)])
        s.sync()
        s.abandon()
        (seg,) = [p for p in fs.files() if p.endswith(".seg")]
        data = fs.read(seg)
        if len(data) % 512 == 0:
            break
    else:
        raise AssertionError("no such layout")
    last = cx._record_starts(data)[-1]
    for i in range(last + 13, len(data) - 1, 7):
        bad = data[:i] + bytes([data[i] ^ 0x01 or 0x02]) + data[i + 1 :]
        with pytest.raises(StorageCorruption):
            DiskStorage(G1, fs=RecordingFS.from_image(cx._image_of(fs, {seg: bad}))).load()


BEFORE_ISSUE_37 = "8b99b6f"  # format 4, load() through the page cache


def _old_storage() -> type[DiskStorage]:
    try:
        return cx.storage_at(BEFORE_ISSUE_37)
    except Exception as e:  # a shallow clone without that commit
        pytest.skip(f"disklog.py at {BEFORE_ISSUE_37} unavailable: {e}")


def test_a_format4_log_is_read_and_continued_in_a_format5_segment() -> None:
    """Format-4 segments (no marker bit, no trailer) are read with their own framing and
    never appended to: the first write after the upgrade cuts a format-5 segment chained
    from the last format-4 one; a torn format-4 tail is still cut."""
    fs = RecordingFS("/data")
    s = _old_storage()(G1, fs=fs, segment_bytes=400)
    s.load()
    s.write(HardState(1, 1, 0), None, cx.entries(1, 8, 1, size=60))
    s.sync()
    s.write(None, None, cx.entries(9, 9, 1))  # unsynced: then a crash leaves half of it
    s.abandon()
    (last,) = [p for p in sorted(fs.files()) if p.endswith(".seg")][-1:]
    fs.inodes[fs.ns[last]] = fs.inodes[fs.ns[last]][:-20]
    s2 = DiskStorage(G1, fs=fs, segment_bytes=400)
    assert [e.index for e in s2.load().entries] == list(range(1, 9))
    s2.write(HardState(1, 1, 8), None, cx.entries(9, 12, 1, size=60))
    s2.sync()
    s2.abandon()
    segs = [fs.read(p) for p in sorted(fs.files()) if p.endswith(".seg")]
    assert [g[7] for g in segs][-2:] == [4, 5]
    init = DiskStorage(G1, fs=fs, segment_bytes=400).load()
    assert [e.index for e in init.entries] == list(range(1, 13))
    assert init.hard_state == HardState(1, 1, 8)


def _format4_segment(ents: list[Entry]) -> bytes:
    """A format-4 segment of group 1 (no marker bit, no trailer), written with the module's
    own format-4 framing: the hard state 1/1/0, then these entries."""
    from epochgc.impl.raft import diskformat as dl
    from epochgc.impl.raft.codec import encode_entry

    start = dl._START.pack(0, 1, 1, 0, 0, 0, 0, 1, 1, 0)
    rec, crc = dl._record(dl.KIND_START, start, 0, dl.FORMAT4)
    parts = [dl.MAGIC4, rec]
    for e in ents:
        rec, crc = dl._record(dl.KIND_ENTRY, encode_entry(e), crc, dl.FORMAT4)
        parts.append(rec)
    return b"".join(parts)


def test_a_damaged_format4_record_ending_in_zeros_is_refused() -> None:
    """Format-4 segments keep their own torn rule (a record's own zeros may look lost there):
    a fsynced format-4 record whose payload ends in zeros 20 bytes into a sector, damaged,
    with another record after it in that sector, is refused (the bytes past it are not
    zeros: no crash zeroed the sector), not cut with everything after it as etcd's looser
    rule would."""
    at = len(_format4_segment(cx.entries(1, 1, 1)))
    size = 512 + 20 - at
    data = b"\x05" * (size - (12 + 1 + 24) - 40) + bytes(40)
    raw = bytearray(_format4_segment([*cx.entries(1, 1, 1), Entry(2, 1, data=data),
                                      *cx.entries(3, 4, 1)]))
    assert not any(raw[512:532]) and any(raw[532:1024])
    seg = G1 + "/0000000000000001.seg"
    img = Image((("/", None), ("/data", None), ("/data/n1", None), (G1, None),
                 (seg, bytes(raw))), ())
    assert [e.index for e in DiskStorage(G1, fs=RecordingFS.from_image(img)).load().entries] \
        == [1, 2, 3, 4]
    raw[at + 60] ^= 1
    img = Image((*img.entries[:-1], (seg, bytes(raw))), ())
    with pytest.raises(StorageCorruption, match="checksum mismatch"):
        DiskStorage(G1, fs=RecordingFS.from_image(img)).load()


def test_os_read_durable_reads_every_byte_past_the_cache(tmp_path: Path) -> None:
    """The real call (fsync, DONTNEED, O_DIRECT with its aligned buffer, short last block):
    what it returns is the file, for sizes around the 4 KiB alignment."""
    from epochgc.impl.raft.fileio import OsFileIO

    fs = OsFileIO()
    for n in (0, 1, 511, 4095, 4096, 4097, 9000, 3 * 4096):
        p = f"{tmp_path}/f{n}"
        data = bytes((i * 7 + n) % 251 for i in range(n))
        with open(p, "wb") as f:
            f.write(data)
        assert fs.read_durable(p) == data, n
