"""Group commit across groups: a node's DiskStorages share one GroupCommit, so one Ready batch
costs one barrier (syncfs) for every group that wrote in it, and a power loss after it keeps
every group's acknowledged entries (CrashFS models syncfs as covering the whole file system,
and the parallel mode is each storage's own fsync, issued from a thread pool)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.fileio import CrashFS
from epochgc.impl.raft.groupcommit import GroupCommit, syncfs, syncfs_usable
from epochgc.impl.raft.host import MultiRaftHost
from epochgc.impl.raft.messages import Entry, Snapshot
from epochgc.impl.raft.node import Config
from epochgc.impl.raft.storage import StorageFailed, sync_all

GROUPS = 16


class _SM:
    def apply(self, entry: Entry) -> None:
        pass

    def snapshot(self) -> bytes:
        return b""

    def restore(self, snapshot: Snapshot) -> None:
        pass


def _host(base: Path, fs: CrashFS, gc: GroupCommit | None) -> MultiRaftHost:
    h = MultiRaftHost(1, lambda to, g, m: None, random.Random(1), Config(election_tick=2))
    for g in range(1, GROUPS + 1):
        st = DiskStorage(str(base / f"g{g}"), segment_bytes=1 << 20, fs=fs, group_commit=gc)
        h.add_group(g, [1], st, _SM())
    return h


@pytest.mark.parametrize("mode", ["syncfs", "parallel"])
def test_one_barrier_per_batch_for_every_group_and_a_crash_keeps_all_acks(
    tmp_path: Path, mode: str
) -> None:
    for seed in range(5):
        base = tmp_path / str(seed)
        fs = CrashFS()
        gc = GroupCommit(str(base), fs, mode=mode)
        h = _host(base, fs, gc)
        for _ in range(10):
            h.tick()
            h.process_ready()
        assert all(h.is_leader(g) for g in range(1, GROUPS + 1))
        acked: dict[int, list[int]] = {g: [] for g in range(1, GROUPS + 1)}
        rng = random.Random(seed)
        for _round in range(20):
            ps = [h.propose(g, b"x" * rng.randint(1, 300)) for g in range(1, GROUPS + 1)]
            before = (fs.fsyncs, fs.syncfs_calls, gc.barriers)
            batches = 0
            while h.has_work():  # append + persist, then commit + apply
                batches += h.process_ready() > 0
            # One barrier per batch for the 16 groups.
            assert 1 <= gc.barriers - before[2] <= batches
            if mode == "syncfs":  # and no per-group fsync at all
                assert fs.syncfs_calls - before[1] == gc.barriers - before[2]
                assert fs.fsyncs - before[0] == fs.syncfs_calls - before[1]
            for p in ps:
                assert p.done and p.error is None
                acked[p.group].append(p.index)
            if rng.random() < 0.3:
                h.propose(1, b"unsynced")
                h.process_ready(crash_before_sync=True)
                break
        fs.crash(rng)
        h2 = _host(base, fs, gc)
        for g, idxs in acked.items():
            log = h2.groups[g].node.log
            assert log.last_index() >= max(idxs), (seed, g)


def test_without_group_commit_each_group_fsyncs(tmp_path: Path) -> None:
    fs = CrashFS()
    h = _host(tmp_path, fs, None)
    for _ in range(10):
        h.tick()
        h.process_ready()
    for g in range(1, GROUPS + 1):
        h.propose(g, b"x")
    before = fs.fsyncs
    h.process_ready()
    assert fs.fsyncs - before >= GROUPS and fs.syncfs_calls == 0


@pytest.mark.parametrize("mode", ["syncfs", "parallel"])
def test_a_failed_barrier_fails_every_group_in_it(tmp_path: Path, mode: str) -> None:
    fs = CrashFS()
    gc = GroupCommit(str(tmp_path), fs, mode=mode)
    sts = [DiskStorage(str(tmp_path / f"g{i}"), fs=fs, group_commit=gc) for i in range(3)]
    for st in sts:
        st.load()
        st.write(None, None, [Entry(1, 1)])
    fs.fail_fsync = True
    with pytest.raises(StorageFailed):
        sync_all(sts)
    fs.fail_fsync = False
    for st in sts:
        with pytest.raises(StorageFailed):
            st.sync()


@pytest.mark.skipif(not syncfs_usable(), reason="syncfs(2) with error reporting: Linux >= 5.8")
def test_real_syncfs_call(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    syncfs(str(tmp_path))  # raises OSError on failure
