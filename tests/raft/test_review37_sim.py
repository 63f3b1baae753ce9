"""Issue 37 item 1's Raft-level scenario, directed, on the project's Simulator with the real
disk log under CrashFS's page-cache model: 3 nodes, node 3 partitioned, follower 1's fsync
fails its write-back (EIO), its process is killed and restarted WITHOUT a reboot, the leader
commits with it, follower 1 loses power, the old leader is isolated; nodes 1 and 3 go on."""

from __future__ import annotations

import errno
import os
import random
from typing import Any

import pytest

from epochgc.impl.raft.sim import Simulator
from epochgc.impl.raft.simtypes import Faults


def scenario(seed: int, check_durability: bool = True,
             pages: random.Random | None = None) -> tuple[Simulator, bool]:
    """Runs the scenario; returns the simulator and whether follower 1 died by a plain kill
    (the page cache kept) rather than a power loss (the simulator draws which). `pages`:
    which dirty pages of the failed write-back fail is drawn from it (CrashFS
    writeback_failed: some may reach the disk); by default all fail."""
    # eio_fsync > 0 selects the killable page-cache file system; this scenario fails one
    # chosen barrier of node 1 itself (the probability is too small to fire on its own).
    s = Simulator(3, seed=seed, disk=True, faults=Faults(eio_fsync=1e-300),
                  segment_bytes=1 << 20, check_durability=check_durability)
    try:
        s.run_until(lambda: s.leader() is not None)
        lead = s.leader()
        if lead != 2:
            assert lead is not None
            s.transfer_leadership(lead, 2)
            s.run_until(lambda: s.leader() == 2)
        old = s.leader()
        assert old == 2
        s.isolate(3)
        for k in range(5):
            s.propose(old, b"a%d" % k)
        s.run_until(lambda: s.host(1).groups[1].node.log.committed >= 5 + 1)
        fs1: Any = s._fs[1]  # the KillableFS (eio_fsync > 0): its fault hook is replaced
        armed = [True]
        failed: list[tuple[int, int]] = []
        dirty: list[int] = []
        real = fs1._maybe_eio

        def fail_once(paths: list[str] | None) -> None:
            if armed[0]:
                armed[0] = False
                lost = {p: len(st.lost) for p, st in fs1._files.items()}
                dirty.extend(os.path.getsize(p) - fs1._files[p].synced for p in paths or ()
                             if p in fs1._files)
                fs1.writeback_failed(paths, pages)
                failed.extend(r for p, st in fs1._files.items() for r in st.lost[lost[p]:])
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            real(paths)

        fs1._maybe_eio = fail_once
        for k in range(10):
            s.propose(old, b"b%d" % k * 3000)  # whole pages: a later append cannot redirty them
        s.run_until(lambda: s.nodes[1].host is None, max_steps=20_000)
        assert s.nodes[1].host is None, "follower 1's failed barrier did not stop it"
        segs = [p for p in fs1._files if p.endswith(".seg")]
        kept_cache = bool(segs) and bool(fs1._files[max(segs)].lost)
        if pages is not None:  # only some pages failed, the others reached the disk
            assert 0 < sum(b - a for a, b in failed) < sum(dirty), (failed, dirty)
        s.restart(1)  # no reboot: the files (the page cache) are as the killed process left them
        for k in range(10):
            s.propose(old, b"c%d" % k)
        s.run_for(2000)
        s.crash(1, mid_write=False)  # a power loss (CrashFS keeps only what reached the device)
        s.restart(1)
        s.isolate(old)
        s.heal(1, 3)
        s.run_for(3000)
        for k in range(3):
            leader = s.leader()
            if leader is not None and leader != old:
                s.propose(leader, b"d%d" % k)
            s.run_for(500)
    except BaseException:
        s.close()  # (its temporary disks)
        raise
    return s, kept_cache


SEEDS = [0, 3, 4, 5]  # seeds where follower 1's process was killed, not powered off


@pytest.mark.parametrize("seed", SEEDS)
def test_restart_without_reboot_after_a_failed_fsync_in_a_3_node_cluster(seed: int) -> None:
    """Durability (every restart recovers what the node had synced) and Raft's invariants
    (leader completeness, state machine safety) hold; the simulator checks both as it runs."""
    s, kept_cache = scenario(seed)
    try:
        assert kept_cache, "follower 1 was powered off: the no-reboot path was not taken"
    finally:
        s.close()


@pytest.mark.parametrize("pages_seed", [1, 8])  # (page #0 fails; page #1 fails)
def test_the_scenario_when_only_some_pages_of_the_write_back_fail(pages_seed: int) -> None:
    """The same, with a write-back that fails a single page, the pages after it reaching the
    disk (per bio): the restarted follower recovers up to the hole and nothing past it."""
    s, kept_cache = scenario(SEEDS[0], pages=random.Random(pages_seed))
    try:
        assert kept_cache
    finally:
        s.close()


@pytest.mark.parametrize("check_durability", [True, False])
def test_the_scenario_finds_a_recovery_that_reads_the_cache(
    monkeypatch: pytest.MonkeyPatch, check_durability: bool
) -> None:
    """With issue 37's item 1 seeded back (load() reads the page cache), the scenario fails:
    the restarted follower acknowledges entries its disk never got. Durability check on:
    'durability: node 1 group 1 after restart 3: entry 27 (term 2) had been synced, but the
    recovered log is snapshot 0/0 + entries 1..7'; off, a Raft invariant fails."""
    from epochgc.impl.raft import sim as simmod
    from epochgc.impl.raft import simdisk
    from epochgc.impl.raft.invariants import InvariantViolation
    from tests.raft import crashexplore as cx

    mutant = cx.mutant_storage(cx.F1_READ_THROUGH_CACHE)
    monkeypatch.setattr(simdisk, "DiskStorage", mutant)
    monkeypatch.setattr(simmod, "DiskStorage", mutant)
    with pytest.raises(InvariantViolation) as ei:
        for seed in SEEDS:
            scenario(seed, check_durability)[0].close()
    print(ei.value)
