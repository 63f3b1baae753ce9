"""Issue 27 items 1 and 2: an interrupted snapshot install. Both failed on the code before
the fix (see the comments); each pins the rule that only term and vote may be made durable
before the snapshot file, and the commit only once the snapshot has landed."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.fileio import CrashFS
from epochgc.impl.raft.messages import Entry, HardState, Snapshot
from epochgc.impl.raft.storage import StorageFailed


def ents(lo: int, hi: int, term: int = 1) -> list[Entry]:
    return [Entry(i, term, 1, bytes([i % 256]) * 10) for i in range(lo, hi + 1)]


def _old_log(path: Path, fs: CrashFS, last: int, commit: int) -> DiskStorage:
    s = DiskStorage(str(path), segment_bytes=600, fs=fs)
    s.write(HardState(1, 1, commit), None, ents(1, last))
    s.sync()
    return s


def test_enospc_on_the_snapshot_file_does_not_commit_the_old_uncommitted_entries(
    tmp_path: Path,
) -> None:
    # The follower holds 1-6 of term 1 but only 1-2 are committed; the leader of term 2 sends
    # a snapshot at 10 (its 3-6 differ). The disk fills while the snapshot file is written.
    # Old code: the STATE record made durable first said commit = min(10, 6) = 6, so the
    # restarted node recovered 3-6 as committed and applied them (assert 6 <= 2 failed).
    fs = CrashFS()
    s = _old_log(tmp_path / "g1", fs, 6, 2)
    fs.space_left = 40  # room for the STATE record (37 bytes), not for the snapshot file
    with pytest.raises(StorageFailed):
        s.write(HardState(2, 0, 10), Snapshot(10, 2, b"leader state" * 20), [])
    s.abandon()
    fs.space_left = None
    fs.crash(random.Random(1))
    init = DiskStorage(str(tmp_path / "g1"), fs=fs).load()
    assert init.hard_state.commit <= 2
    assert init.hard_state.term == 2  # the term may (and must) precede the snapshot file
    assert init.snapshot.index == 0 and [e.index for e in init.entries] == list(range(1, 7))


@pytest.mark.parametrize("seed", range(24))
def test_install_with_next_entries_over_a_longer_log_restarts_after_any_crash(
    tmp_path: Path, seed: int
) -> None:
    # Old log 1-30 (commit 5); one Ready: snapshot at (25, 2), entries 26-28 of term 2,
    # commit 28; the crash comes before the fsync. Old code refused to start in most crash
    # images: "commit index 28 is past the last entry 25".
    fs = CrashFS()
    s = _old_log(tmp_path / "g1", fs, 30, 5)
    s.write(HardState(2, 0, 28), Snapshot(25, 2, b"leader state"), ents(26, 28, term=2))
    fs.crash(random.Random(seed))
    init = DiskStorage(str(tmp_path / "g1"), fs=fs).load()
    last = init.entries[-1].index if init.entries else init.snapshot.index
    assert init.hard_state.commit <= last
    assert init.hard_state.term == 2
    if init.snapshot.index == 25:  # the install landed: the old 26-30 of term 1 are gone
        assert all(e.term == 2 for e in init.entries)
    else:  # it did not: the old log, with nothing of it newly committed
        assert init.hard_state.commit <= 5
