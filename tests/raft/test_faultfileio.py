"""FaultFileIO (the fault-injecting real file layer of `epochgc chaos` and of tests) under
Linux's write-back error semantics, as the PAGECACHE model of impl/raft/crashstates.py: a
failed write-back leaves the new bytes in the page cache (the real file) but not on the device
(read_durable, a power loss); errors reach each descriptor once (errseq); the kernel's memory
outlives the node's process (a restart without a reboot), through the fault file's
`.pagecache` state. Then the real DiskStorage restarted after such a fault, driven through the
chaos fault file, must acknowledge nothing the device lacks; with recovery reading through the
cache (issue 37's F1, seeded back) it does."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from epochgc.impl.chaos.faultfile import Faults, NodeFaults
from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.fileio import PAGE, FaultFileIO
from epochgc.impl.raft.messages import Entry, HardState
from epochgc.impl.raft.storage import StorageCorruption, StorageFailed
from tests.raft import crashexplore as cx


def _eio(call: object, *args: object) -> None:
    with pytest.raises(OSError) as e:
        call(*args)  # type: ignore[operator]
    assert e.value.errno == errno.EIO


# ---- the file layer ------------------------------------------------------------------------


def _failed_write_back(fs: FaultFileIO, f: str) -> int:
    """100 bytes synced, then two pages whose write-back fails (EIO once); the open fd."""
    fd = fs.open_append(f, create=True)
    fs.write(fd, b"a" * 100)
    fs.fsync(fd)
    fs.write(fd, b"b" * (2 * PAGE))
    fs.fail_fsync = True
    _eio(fs.fsync, fd)
    fs.fail_fsync = False
    return fd


def test_a_failed_fsync_keeps_the_bytes_cached_and_off_the_device(tmp_path: Path) -> None:
    state = str(tmp_path / "kernel")
    fs = FaultFileIO(state=state)
    f = str(tmp_path / "f")
    fd = _failed_write_back(fs, f)
    fs.fsync(fd)  # reported once to this descriptor; nothing dirty: succeeds
    assert Path(f).read_bytes() == b"a" * 100 + b"b" * (2 * PAGE)  # the page cache
    assert fs.lost_ranges(f) == [(100, 100 + 2 * PAGE)]
    fs.close(fd)
    # A process restarted without a reboot: the kernel's memory is still there.
    again = FaultFileIO(state=state)
    device = b"a" * 100 + bytes(2 * PAGE)  # a hole where the failed write-back went
    assert again.read_durable(f) == device
    assert Path(f).read_bytes() == device  # DONTNEED dropped the clean pages
    assert again.lost_ranges(f) == []


def test_a_power_loss_keeps_the_device_not_the_cache(tmp_path: Path) -> None:
    fs = FaultFileIO(state=str(tmp_path / "kernel"))
    f = str(tmp_path / "f")
    fd = _failed_write_back(fs, f)
    fs.write(fd, b"c" * 10)  # never fsynced; page 2 (its lost part too) dirty again
    fs.close(fd)
    fs.lose_unsynced()
    assert Path(f).read_bytes() == b"a" * 100 + bytes(2 * PAGE)
    assert not (tmp_path / "kernel").exists()  # a reboot: the kernel's memory is gone


def test_a_restarted_process_finds_the_kernels_memory_until_the_power_goes(
    tmp_path: Path,
) -> None:
    fs = FaultFileIO(state=str(tmp_path / "kernel"))
    f = str(tmp_path / "f")
    _failed_write_back(fs, f)
    # the process dies; a new one (no reboot) appends nothing; the power goes
    again = FaultFileIO(state=str(tmp_path / "kernel"))
    assert again.lost_ranges(f) == [(100, 100 + 2 * PAGE)]
    again.lose_unsynced()
    assert Path(f).read_bytes() == b"a" * 100 + bytes(2 * PAGE)


def test_a_later_write_into_a_lost_page_writes_the_whole_page_back(tmp_path: Path) -> None:
    fs = FaultFileIO()
    f = str(tmp_path / "f")
    fd = fs.open_append(f, create=True)
    fs.write(fd, b"a" * (PAGE + 100))
    fs.fail_fsync = True
    _eio(fs.fsync, fd)
    fs.fail_fsync = False
    fs.write(fd, b"b")  # into page 1: dirty again, all of it
    fs.fsync(fd)
    assert fs.lost_ranges(f) == [(0, PAGE)]
    assert fs.read_durable(f) == bytes(PAGE) + b"a" * 100 + b"b"


def test_errseq_reports_an_error_once_to_each_descriptor_open_before_it(tmp_path: Path) -> None:
    fs = FaultFileIO()
    f = str(tmp_path / "f")
    a = fs.open_append(f, create=True)
    b = fs.open_append(f, create=False)
    root = fs.open_fs(str(tmp_path))
    fs.write(a, b"x")
    fs.fail_fsync = True
    _eio(fs.fsync, a)
    fs.fail_fsync = False  # the device works again; the error was not reported to b, root
    fs.fsync(a)
    _eio(fs.fsync, b)
    fs.fsync(b)
    _eio(fs.syncfs, root)  # the file system's errseq (syncfs, Linux >= 5.8)
    fs.syncfs(root)
    c = fs.open_append(f, create=False)  # opened after the error was seen: nothing
    fs.fsync(c)
    for fd in (a, b, c, root):
        fs.close(fd)


def test_an_error_nobody_saw_reaches_a_restarted_process_once(tmp_path: Path) -> None:
    """A failed syncfs reports to its caller through the file system's errseq; each file's
    own is set and unseen, so the first fsync of that file on a descriptor opened later, in
    a restarted process too, reports it (errseq_sample: "If nobody has seen this error yet,
    then we can be the first")."""
    state = str(tmp_path / "kernel")
    fs = FaultFileIO(state=state)
    f = str(tmp_path / "f")
    fd = fs.open_append(f, create=True)
    root = fs.open_fs(str(tmp_path))
    fs.write(fd, b"x" * 10)
    fs.fail_fsync = True
    _eio(fs.syncfs, root)
    again = FaultFileIO(state=state)
    _eio(again.read_durable, f)
    assert again.read_durable(f) == bytes(10)


# ---- the disk log restarted after the fault, through the chaos fault file ---------------------


def _set(path: Path, f: Faults, mtime: int) -> None:
    f.write(path)
    os.utime(path, ns=(mtime, mtime * 10**9))  # a new mtime even on a coarse clock


def restart_after_eio(tmp_path: Path, storage: type[DiskStorage] = DiskStorage) -> list[str]:
    """Issue 37 item 1 on real files through the chaos plumbing (NodeFaults and its fault
    file): entries 1..3 synced; 4..10 (6 KB each: whole pages) written, the write-back fails
    (EIO, StorageFailed); the node's process dies; the disk works again and the node restarts
    without a reboot (a new process: a new NodeFaults on the same fault file); it appends and
    syncs entries after what it recovered (acknowledged), then the power goes. Returns what
    an acknowledged entry lost or a refused recovery looks like (empty: none)."""
    faults, group = tmp_path / "n1.faults.json", str(tmp_path / "g1")
    _set(faults, Faults(), 1)
    node = NodeFaults(str(faults))
    s = storage(group, fs=node.fs)
    s.load()
    acked = [Entry(i, 1, data=bytes([i]) * 10) for i in (1, 2, 3)]
    s.write(HardState(1, 1, 0), None, acked)
    s.sync()
    s.write(None, None, [Entry(i, 1, data=bytes([i]) * 6000) for i in range(4, 11)])
    _set(faults, Faults(fsync_eio=True), 2)
    node.refresh()
    with pytest.raises(StorageFailed):
        s.sync()
    s.abandon()  # the node stops on StorageFailed
    _set(faults, Faults(), 3)
    node = NodeFaults(str(faults))  # the restarted process, no reboot
    s = storage(group, fs=node.fs)
    init = s.load()
    stable = list(init.entries)
    more = [Entry(len(stable) + k, 1, data=b"m" * 100) for k in (1, 2)]
    s.write(HardState(1, 1, more[-1].index), None, more)
    s.sync()
    acked = stable + more  # the node acknowledges every entry it holds as stable
    node.fs.lose_unsynced()  # the power goes (node_main then exits at once)
    s.abandon()
    try:
        got = DiskStorage(group, fs=NodeFaults(str(faults)).fs).load()
    except StorageCorruption as e:
        return [f"after the power loss recovery refused the log: {e}"]
    have = {(e.index, e.term, e.data) for e in got.entries}
    return [
        f"entry {e.index} (term {e.term}) was acknowledged after the restart (which "
        f"recovered entries {stable[0].index}..{stable[-1].index} as stable) but after a "
        f"power loss the log is entries {[x.index for x in got.entries]}"
        for e in acked if (e.index, e.term, e.data) not in have
    ]


def test_a_restart_after_a_failed_fsync_acknowledges_only_what_the_device_holds(
    tmp_path: Path,
) -> None:
    assert restart_after_eio(tmp_path) == []


def test_the_restart_test_finds_a_recovery_that_reads_the_page_cache(tmp_path: Path) -> None:
    """Issue 37's F1 seeded back into a copy of the disk log: the test must fail on it."""
    problems = restart_after_eio(tmp_path, cx.mutant_storage(cx.F1_READ_THROUGH_CACHE))
    assert problems, "a recovery reading through the page cache went unnoticed"
    assert "acknowledged after the restart" in problems[0] or "refused" in problems[0]


def test_crashfs_a_lost_page_written_into_again_is_off_the_device_until_its_fsync(
    tmp_path: Path,
) -> None:
    """The simulator's CrashFS, the same rule: a later write dirties a lost page again, but
    until a write-back succeeds the device still lacks it (a power loss zeroes it)."""
    import random

    from epochgc.impl.raft.fileio import CrashFS

    fs = CrashFS()
    f = str(tmp_path / "f")
    fd = fs.open_append(f, create=True)
    fs.fsync_dir(str(tmp_path))
    fs.write(fd, b"a" * 100)
    fs.fsync(fd)
    fs.write(fd, b"b" * (2 * PAGE))
    fs.writeback_failed([f])
    fs.write(fd, b"c")  # page 2 dirty again, not yet written back
    fs.crash(random.Random(0))
    got = Path(f).read_bytes()
    assert got[: 100 + 2 * PAGE] == b"a" * 100 + bytes(2 * PAGE), "lost bytes survived"
