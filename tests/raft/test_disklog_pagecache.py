"""The disk log under Linux's write-back error semantics (issue 37): the PAGECACHE model of
impl/raft/crashstates.py itself, then a restart after a failed fsync without a reboot (item
1) and a syncfs barrier that another tenant's write-back error must reach (item 2)."""

from __future__ import annotations

import errno
import struct

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


def _damaged_images(data: bytes) -> list[tuple[int, int, bytes]]:
    """Every single-bit flip (bit 0, bit 7) of every byte that leaves the byte nonzero: damage
    that cannot complete an all-zero piece of a sector (what a lost sector leaves), so a
    recovery that cuts at it has taken bit rot in fsynced data for a torn write."""
    out = []
    for i, b in enumerate(data):
        for mask in (0x01, 0x80):
            if b ^ mask:
                out.append((i, mask, data[:i] + bytes([b ^ mask]) + data[i + 1 :]))
    return out


def _small_log(sizes: list[int]) -> tuple[RecordingFS, str]:
    """Entries of these sizes, then a new term's hard state without a vote or a commit (its
    record ends in 16 zero bytes), all fsynced."""
    fs = RecordingFS("/data")
    s = DiskStorage(G1, fs=fs)
    s.load()
    s.write(HardState(1, 1, 0), None, [])
    for idx, n in enumerate(sizes, start=1):
        s.write(None, None, [cx.entry(idx, 1, n)])
    s.write(HardState(2, 0, 0), None, [])
    s.sync()
    s.abandon()
    (seg,) = [p for p in fs.files() if p.endswith(".seg")]
    return fs, seg


def _record_starts(data: bytes) -> list[int]:
    out, off = [], 8
    while off + 12 <= len(data):
        out.append(off)
        (n,) = struct.unpack_from(">I", data, off)
        n &= 0x7FFFFFFF
        off += 12 + n + (1 if data[7] >= 5 else 0)
    return out


def _exposed_log() -> tuple[RecordingFS, str]:
    """A small fsynced log in which a record's header starts in the last 3 bytes of a sector
    (item 4) and the last record, a hard state with vote and commit 0, ends a few bytes into
    a fresh sector (item 3)."""
    for a in range(24, 700):
        for b in (24, 60, 100):
            fs, seg = _small_log([a, 40, 40, 40, 40, 40, 40, 40, 40, b])
            data = fs.read(seg)
            head_at_end = any(s % 512 >= 509 for s in _record_starts(data))
            if head_at_end and 0 < len(data) % 512 <= 12:
                return fs, seg
    raise AssertionError("no such layout")


def test_items_3_4_bit_damage_of_a_fsynced_log_is_refused_never_cut() -> None:
    """Every single-bit flip of every byte of a small fsynced log (that leaves the byte
    nonzero) either makes recovery refuse (StorageCorruption) or changes nothing it
    recovers; never a shorter log or an older hard state. Found on the old code (format 4):
    recovery cut the log at a record whose header began in a sector's last bytes (its
    length's high zero bytes taken for a zeroed sector) and at a last record whose zero tail
    began a sector: e.g. 'byte 2052 ^ 0x1: recovered 12 entries, hard state
    HardState(term=1, vote=1, commit=0); the log holds 13' (list printed)."""
    fs, seg = _exposed_log()
    want = DiskStorage(G1, fs=RecordingFS.from_image(_image(fs))).load()
    data = fs.read(seg)
    cut = []
    for i, mask, bad in _damaged_images(data):
        img = _image(fs, {seg: bad})
        try:
            got = DiskStorage(G1, fs=RecordingFS.from_image(img)).load()
        except StorageCorruption:
            continue
        if (got.entries, got.hard_state) != (want.entries, want.hard_state):
            cut.append(f"byte {i} ^ {mask:#x}: recovered {len(got.entries)} entries, hard "
                       f"state {got.hard_state}; the log holds {len(want.entries)}")
    assert not cut, "\n".join(cut[:20]) + f"\n({len(cut)} in all)"


def _image(fs: RecordingFS, replace: dict[str, bytes] | None = None) -> Image:
    files = {**fs.files(), **(replace or {})}
    dirs = [p for p, v in fs.ns.items() if v == -1]
    entries = sorted([(d, None) for d in dirs] + list(files.items()), key=lambda e: e[0])
    return Image(tuple(entries), ())


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
