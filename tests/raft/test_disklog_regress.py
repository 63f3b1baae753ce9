"""Issue 10 regressions: every defect of the old disk log, reproduced (each of these failed on
the code before the fix) and pinned."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.fileio import CrashFS
from epochgc.impl.raft.host import MultiRaftHost
from epochgc.impl.raft.messages import Entry, HardState, Message, MsgType, Snapshot
from epochgc.impl.raft.node import Config
from epochgc.impl.raft.raftlog import LogInvariantError, RaftLog
from epochgc.impl.raft.storage import MemStorage, StorageCorruption, StorageFailed

RECORD = 12 + 1 + 24 + 10  # record header, kind, entry header, 10 data bytes


def ents(lo: int, hi: int, term: int = 1) -> list[Entry]:
    return [Entry(i, term, 1, bytes([i % 256]) * 10) for i in range(lo, hi + 1)]


def compact(s: DiskStorage, index: int, term: int = 1) -> None:
    s.write(None, None, [], compacted=Snapshot(index, term, b"state@%d" % index))
    s.sync()


def shape(s: DiskStorage) -> tuple[int, list[tuple[int, int]]]:
    init = s.load()
    return init.snapshot.index, [(e.index, e.term) for e in init.entries]


# ---- snapshot records replayed without their context -----------------------------------------


def test_silent_loss_compaction_marker_then_segment_deletion(tmp_path: Path) -> None:
    # Segment 1 holds 1-5, segment 2 holds 6-8 (all fsynced); a compaction at 3 writes its
    # record into segment 2, a compaction at 5 deletes segment 1. Old code: snapshot 5 and
    # no entries at all.
    s = DiskStorage(str(tmp_path), segment_bytes=5 * RECORD)
    s.write(HardState(1, 1, 0), None, ents(1, 5))
    s.sync()
    s.write(None, None, ents(6, 8))
    s.sync()
    assert len(list(tmp_path.glob("*.seg"))) == 2
    compact(s, 3)
    compact(s, 5)
    assert len(list(tmp_path.glob("*.seg"))) == 1
    s.close()
    assert shape(DiskStorage(str(tmp_path))) == (5, [(6, 1), (7, 1), (8, 1)])


def test_refusal_gap_after_two_compactions_and_a_new_entry(tmp_path: Path) -> None:
    # Old code: "gap: entry 9 after 5", the node cannot start.
    s = DiskStorage(str(tmp_path), segment_bytes=5 * RECORD)
    s.write(HardState(1, 1, 0), None, ents(1, 5))
    s.sync()
    s.write(None, None, ents(6, 8))
    s.sync()
    compact(s, 3)
    compact(s, 5)
    s.write(None, None, ents(9, 9))
    s.close()
    assert shape(DiskStorage(str(tmp_path))) == (5, [(i, 1) for i in range(6, 10)])


def test_installed_snapshot_does_not_resurrect_discarded_entries(tmp_path: Path) -> None:
    # Segment 1: 1-20, segment 2: 21-30 (term 1). The leader installs a snapshot at (20, 4),
    # which discards the local log; segment 1 is deleted. Old code: 21-30 of term 1 came back
    # after a snapshot of term 4 (terms going down).
    s = DiskStorage(str(tmp_path), segment_bytes=100)
    s.write(HardState(1, 0, 0), None, ents(1, 20))
    s.sync()
    s.write(None, None, ents(21, 30))
    s.sync()
    s.write(HardState(4, 0, 20), Snapshot(20, 4, b"leader's"), [])
    s.sync()
    s.close()
    init = DiskStorage(str(tmp_path)).load()
    assert init.snapshot == Snapshot(20, 4, b"leader's")
    assert init.entries == ()


def test_install_then_new_entries_survive_with_the_old_log_still_on_disk(tmp_path: Path) -> None:
    s = DiskStorage(str(tmp_path), segment_bytes=1 << 20)
    s.write(HardState(1, 0, 0), None, ents(1, 30))
    s.sync()
    s.write(HardState(5, 0, 20), Snapshot(20, 4, b"x"), ents(21, 22, term=5))
    s.sync()
    s.close()
    assert shape(DiskStorage(str(tmp_path))) == (20, [(21, 5), (22, 5)])


# ---- commit index past the recovered log ------------------------------------------------------


def test_raftlog_refuses_commit_past_last_entry() -> None:
    # Old code clamped commit 5 to 3 silently; etcd panics: the log lost committed entries.
    with pytest.raises(LogInvariantError, match=r"commit 5 .* last entry 3.*node-7-disk"):
        RaftLog(Snapshot(), ents(1, 3), 5, origin="node-7-disk")


def test_disk_log_with_commit_past_its_end_refuses_naming_the_file(tmp_path: Path) -> None:
    s = DiskStorage(str(tmp_path))
    s.write(HardState(1, 1, 5), None, ents(1, 5))
    s.sync()
    s.write(None, None, ents(4, 4, term=1))  # truncates below the commit (a lost suffix)
    s.close()
    with pytest.raises(StorageCorruption, match=r"\.seg at byte offset \d+: commit index 5"):
        DiskStorage(str(tmp_path)).load()


# ---- torn writes -------------------------------------------------------------------------------


def test_zero_filled_payload_of_the_last_record_is_a_torn_write(tmp_path: Path) -> None:
    s = DiskStorage(str(tmp_path))
    s.write(HardState(1, 1, 0), None, ents(1, 3))
    s.sync()
    s.close()
    (seg,) = tmp_path.glob("*.seg")
    size = seg.stat().st_size
    s = DiskStorage(str(tmp_path))
    s.load()
    s.write(None, None, [Entry(4, 1, 1, b"y" * 2000)])
    s.abandon()
    data = bytearray(seg.read_bytes())
    data[size + 12 :] = bytes(len(data) - size - 12)  # header reached the disk, payload did not
    seg.write_bytes(bytes(data))
    assert shape(DiskStorage(str(tmp_path))) == (0, [(1, 1), (2, 1), (3, 1)])
    assert seg.stat().st_size == size


def test_a_bad_payload_that_is_not_the_last_record_still_refuses(tmp_path: Path) -> None:
    s = DiskStorage(str(tmp_path))
    s.write(HardState(1, 1, 0), None, ents(1, 3))
    s.close()
    (seg,) = tmp_path.glob("*.seg")
    data = bytearray(seg.read_bytes())
    start = len(data) - 2 * RECORD  # the second-to-last record: zero its payload
    data[start + 12 : start + RECORD] = bytes(RECORD - 12)
    seg.write_bytes(bytes(data))
    with pytest.raises(StorageCorruption, match="record checksum mismatch"):
        DiskStorage(str(tmp_path)).load()


def test_old_segment_is_fsynced_before_the_next_is_cut(tmp_path: Path) -> None:
    fs = CrashFS()
    s = DiskStorage(str(tmp_path), segment_bytes=100, fs=fs)
    s.write(HardState(1, 1, 0), None, ents(1, 5))
    first = sorted(tmp_path.glob("*.seg"))[0]
    s.write(None, None, ents(6, 6))  # cuts segment 2
    assert fs.synced_length(str(first)) == first.stat().st_size


def test_crash_after_a_cut_never_leaves_a_torn_segment_before_the_last(tmp_path: Path) -> None:
    # Nothing synced by the caller; the crash may tear anything. Old code: a torn first
    # segment followed by a surviving second one refused to start.
    refused = []
    for seed in range(40):
        d = tmp_path / str(seed)
        fs = CrashFS()
        s = DiskStorage(str(d), segment_bytes=100, fs=fs)
        s.write(HardState(1, 1, 0), None, ents(1, 5))
        s.write(None, None, ents(6, 8))
        fs.crash(random.Random(seed))
        try:
            got = shape(DiskStorage(str(d), fs=fs))[1]
        except StorageCorruption as e:
            refused.append((seed, str(e)))
            continue
        assert got == [(i, 1) for i in range(1, len(got) + 1)]
    assert refused == []


# ---- short writes, full disk, failed fsync -----------------------------------------------------


def test_short_writes_are_completed(tmp_path: Path) -> None:
    fs = CrashFS(short_writes=True, rng=random.Random(3))
    s = DiskStorage(str(tmp_path), segment_bytes=300, fs=fs)
    for i in range(1, 21):
        s.write(HardState(1, 1, i - 1), None, ents(i, i))
        s.sync()
    s.close()
    assert shape(DiskStorage(str(tmp_path)))[1] == [(i, 1) for i in range(1, 21)]


def test_full_disk_is_fatal_and_sticky(tmp_path: Path) -> None:
    fs = CrashFS(space_left=1000)
    s = DiskStorage(str(tmp_path), fs=fs)
    s.write(HardState(1, 1, 0), None, ents(1, 5))
    s.sync()
    with pytest.raises(StorageFailed, match=r"No space left on device.*seg"):
        s.write(None, None, ents(6, 40))
    fs.space_left = None  # space freed: the log is still refused until restart
    with pytest.raises(StorageFailed):
        s.sync()
    with pytest.raises(StorageFailed):
        s.write(None, None, ents(41, 41))
    s.abandon()
    assert shape(DiskStorage(str(tmp_path)))[1][:5] == [(i, 1) for i in range(1, 6)]


def test_failed_fsync_is_fatal_and_never_retried(tmp_path: Path) -> None:
    fs = CrashFS()
    s = DiskStorage(str(tmp_path), fs=fs)
    s.write(HardState(1, 1, 0), None, ents(1, 2))
    fs.fail_fsync = True
    with pytest.raises(StorageFailed, match="fsync"):
        s.sync()
    fs.fail_fsync = False  # a retried fsync would "succeed": the page cache may have lost it
    with pytest.raises(StorageFailed):
        s.sync()


def _single_node_host(storage: DiskStorage | MemStorage) -> MultiRaftHost:
    h = MultiRaftHost(1, lambda to, g, m: None, random.Random(1), Config(election_tick=2))
    h.add_group(1, [1], storage, _SM())
    for _ in range(10):
        h.tick()
        h.process_ready()
    assert h.is_leader(1)
    return h


class _SM:
    def __init__(self) -> None:
        self.applied: list[Entry] = []
        self.restored: Snapshot | None = None

    def apply(self, entry: Entry) -> None:
        self.applied.append(entry)

    def snapshot(self) -> bytes:
        return b"%d" % len(self.applied)

    def restore(self, snapshot: Snapshot) -> None:
        self.restored = snapshot


def test_full_disk_stops_the_host_and_acknowledges_nothing(tmp_path: Path) -> None:
    fs = CrashFS()
    h = _single_node_host(DiskStorage(str(tmp_path), fs=fs))
    fs.space_left = 200
    p = h.propose(1, b"x" * 500)
    with pytest.raises(StorageFailed):
        h.process_ready()
    assert not p.done
    with pytest.raises(StorageFailed):  # the host does not carry on after a storage failure
        h.process_ready()
    assert not p.done


# ---- applied index ------------------------------------------------------------------------------


def test_applied_index_waits_for_the_state_machine_restore() -> None:
    sm = _SM()
    h = MultiRaftHost(2, lambda to, g, m: None, random.Random(1))
    h.add_group(1, [1, 2, 3], MemStorage(), sm)
    h.process_ready()
    h.receive(1, Message(MsgType.SNAP, 2, 1, 1, snapshot=Snapshot(10, 1, b"s")))
    assert h.applied_index(1) == 0  # old code: 10, before the state machine had it
    h.process_ready()
    assert sm.restored == Snapshot(10, 1, b"s") and h.applied_index(1) == 10
