"""The harness's speed changes (issue 14) see the same state as before: the abstraction built
from interned value objects equals one built fresh, at every step of a directed program
(produce, reconcile, GC, delete and re-create, crash and restart); and the deep profile's
simulated timing is a heartbeat every 3rd tick, CI's every tick."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from epochgc.model import system as ms
from tests.conformance.harness import Harness, incarnation_at

ROOT = Path(__file__).resolve().parents[2]


def _fresh(s: ms.System) -> ms.System:
    """`s` rebuilt from new objects (no interning)."""
    return ms.System(
        revision=s.revision, cluster_epoch=s.cluster_epoch,
        snapshot_revision=s.snapshot_revision,
        partitions=tuple(ms.Partition(
            q.created, q.creation_revision, q.state, q.log_end, q.term, q.leader,
            q.in_snapshot, tuple(ms.Replica(r.seen, r.inactive, r.reported) for r in q.replicas))
            for q in s.partitions),
        objects=tuple(ms.Obj(o.status, o.epoch) for o in s.objects),
        writes=tuple(ms.Write(w.obj, w.partition, w.status, w.offset, w.durable)
                     for w in s.writes),
    )


def test_interned_abstraction_equals_a_fresh_one_at_every_step() -> None:
    h = Harness(seed=21)
    seen_durable = seen_deleted = False
    try:
        ops = [
            lambda: h.produce(["t/0", "t/1"], 2),
            lambda: h.reconcile("t/0"),
            h.mint,
            lambda: h.produce(["t/0"], 1),
            lambda: h.service_round(),
            lambda: h.gc(),
            lambda: h.crash(2),
            lambda: h.restart(2),
            lambda: h.delete_partition("t/1"),
            h.create_partition,
            lambda: h.produce(["t/0", "t/1"], 1),
            lambda: h.service_round(),
            lambda: h.service_round(),
        ]
        for i, op in enumerate(ops):
            op()
            h.check_step()
            got = h.abstract()
            memo, h._interned = h._interned, {}
            fresh = h.abstract()  # every value object built anew
            h._interned = memo
            assert got == fresh == _fresh(got), f"after operation {i}"
            assert got.objects == fresh.objects and got.writes == fresh.writes
            seen_durable |= any(w.durable for w in got.writes)
            seen_deleted |= any(o.status == ms.DELETED for o in got.objects)
        # the program reached the states whose fields change under an interned object
        assert seen_durable and seen_deleted and len(h._interned) > 10
    finally:
        h.close()


@pytest.mark.parametrize(("profile", "override", "want"), [
    ("deep", None, 3), ("ci", None, 1), ("mutants", None, 1), ("deep", "1", 1), ("ci", "3", 3),
])
def test_heartbeat_tick_by_profile(profile: str, override: str | None, want: int) -> None:
    env = {k: v for k, v in os.environ.items() if k != "EPOCHGC_CONFORMANCE_HEARTBEAT_TICK"}
    env["EPOCHGC_CONFORMANCE_PROFILE"] = profile
    if override is not None:
        env["EPOCHGC_CONFORMANCE_HEARTBEAT_TICK"] = override
    out = subprocess.run(
        [sys.executable, "-c", "from tests.conformance import harness as h;"
         " print(h.RAFT_CONFIG.heartbeat_tick, h.RAFT_CONFIG.election_tick)"],
        cwd=ROOT, env=env, check=True, capture_output=True, text=True).stdout.split()
    assert out == [str(want), "10"]


def _incarnation_scan(ctl: Any, p: str, epoch: int) -> tuple[int, bool]:
    """`Harness._incarnation` as it was: every deleted incarnation scanned for p's."""
    return incarnation_at([(d.creation_revision, d.group) for d in ctl.deleted.values()
                           if d.name == p], ctl, p, epoch)


def test_indexed_incarnation_equals_a_scan_at_every_step() -> None:
    """The deleted-incarnation index behind `_incarnation` answers as a scan does, for every
    partition and epoch, on every node's controller and the committed one, after every
    operation of a program that deletes and re-creates partitions, crashes and restarts
    nodes (a restart's controller is restored: a new `deleted` dict) and compacts."""
    from tests.conformance.harness import ALL_PARTITIONS

    h = Harness(seed=22, disk=True)
    most_deleted = 0
    try:
        ops = [
            lambda: h.produce(["t/0", "t/1"], 1),
            lambda: h.delete_partition("t/1"),
            h.create_partition,
            h.mint,
            lambda: h.delete_partition("t/0"),
            h.create_partition,
            lambda: h.compact(1, None),
            lambda: h.crash(1),
            lambda: h.restart(1),
            lambda: h.recreate_with_old_write("t/1"),
            lambda: h.delete_partition("t/1"),
            h.create_partition,
            lambda: h.crash(2),
            lambda: h.restart(2),
            h.create_partition,
            lambda: h.delete_partition("t/0"),
            h.settle,
        ]
        for i, op in enumerate(ops):
            op()
            h.check_step()
            ctls = [h.committed_controller()] + [b.controller for b in h.c.brokers.values()]
            for ctl in ctls:
                most_deleted = max(most_deleted, len(ctl.deleted))
                for p in ALL_PARTITIONS:
                    for epoch in range(ctl.revision + 2):
                        assert h._incarnation(p, epoch, ctl) == _incarnation_scan(
                            ctl, p, epoch), f"after operation {i}: {p} at epoch {epoch}"
        assert most_deleted >= 3  # the program deleted what the index is for
    finally:
        h.close()


def _through_store(h: Harness, prefix: str) -> list[tuple[str, float]]:
    return [(i.key, i.mtime) for i in h.local.list_all(prefix)]


def test_the_harness_lists_what_the_store_lists(tmp_path: Path) -> None:
    """`stored_files` (the harness's own view of the store, by path) against the LocalStore
    listing it stands in for: at every step of a directed program, and on a tree with a temp
    file, a link, a fifo and nested directories."""
    from epochgc.impl.store.local import _TMP_PREFIX
    from epochgc.model.keys import DATA_PREFIX
    from tests.conformance.harness import HEALTH_PREFIX, _regular_file, stored_files

    h = Harness(seed=22)
    try:
        ops = [lambda: h.produce(["t/0", "t/1"], 3), h.service_round,
               lambda: h.produce(["t/0"], 2), h.mint, h.service_round, h.gc,
               lambda: h.delete_partition("t/1"), h.service_round, h.gc]
        seen = gone = 0
        before: set[str] = set()
        for op in ops:
            op()
            h.check_step()
            for prefix in (DATA_PREFIX, "_cluster/", HEALTH_PREFIX):
                want = _through_store(h, prefix)
                assert stored_files(h.local.root, prefix, True) == want
                assert stored_files(h.local.root, prefix) == [(k, 0.0) for k, _ in want]
                seen += len(want)
            # `_after_gc`'s test of what a round removed, against two listings
            now = {k for k, _ in _through_store(h, DATA_PREFIX)}
            assert {k for k in before if not _regular_file(os.path.join(h.local.root, k))} \
                == before - now
            gone += len(before - now)
            before = now
        assert seen > 50 and gone > 0
    finally:
        h.close()
    root = tmp_path / "store"
    for rel in ("level_zero/data/001/0000000005/a", "level_zero/data/001/0000000005/b",
                "level_zero/data/001/0000000005.x", "level_zero/data/002/0000000001/c",
                "_cluster/gc/m.json"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"x")
    (root / "level_zero/data/001" / f"{_TMP_PREFIX}1").write_bytes(b"partial")
    (root / "level_zero/data/002/link").symlink_to(root / "level_zero/data/001")
    (root / "level_zero/data/002/0000000001/l").symlink_to(root / "_cluster/gc/m.json")
    os.mkfifo(root / "level_zero/data/002/fifo")
    from epochgc.impl.store.local import LocalStore

    store = LocalStore(root)
    for prefix in (DATA_PREFIX, "_cluster/", "level_zero/data/002/", "absent/"):
        want = [(i.key, i.mtime) for i in store.list_all(prefix)]
        assert stored_files(root, prefix, True) == want
    assert len(stored_files(root, DATA_PREFIX)) == 4
