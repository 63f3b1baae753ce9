"""Produce path, reconciler, housekeeper, health reports and GC on the simulated cluster;
determinism of the in-memory mode."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from epochgc.impl.broker.producer import ProduceError
from epochgc.impl.gc.reports import read_cluster_view
from epochgc.impl.sim.cluster import SimCluster
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import DATA_PREFIX, MAX_EPOCH, parse_key

PARTS = ("t/0", "t/1", "t/2")


def l0_keys(c: SimCluster) -> list[str]:
    return [o.key for o in c.store.list_all(DATA_PREFIX)]


def test_one_object_many_partitions_and_stamp(tmp_path: Path) -> None:
    c = SimCluster(seed=11, partitions=PARTS, store=LocalStore(tmp_path, create=True))
    c.bootstrap()
    acks = c.produce({"t/0": [b"a"], "t/1": [b"b", b"c"], "t/2": [b"d"]})
    assert len({a.key for a in acks.values()}) == 1 == len(l0_keys(c))
    epoch = parse_key(acks["t/0"].key).epoch
    rev = max(c.brokers[1].creation_revision(p) for p in PARTS)
    assert epoch == max(c.brokers[1].cluster_epoch(), rev)
    assert [r for _, r in c.read_all("t/1")] == [b"b", b"c"]


def test_bad_epochs_refused_before_upload(tmp_path: Path) -> None:
    c = SimCluster(seed=2, partitions=("t/0",), store=LocalStore(tmp_path, create=True))
    c.bootstrap()
    for bad in (-1, MAX_EPOCH + 1):
        with pytest.raises(ProduceError, match="refusing"):
            c.produce({"t/0": [b"x"]}, epoch=bad)
    assert l0_keys(c) == []


def test_unreachable_store_fails_clearly_nothing_acked(tmp_path: Path) -> None:
    root = tmp_path / "store"
    c = SimCluster(seed=2, partitions=("t/0",), store=LocalStore(root, create=True))
    c.bootstrap()
    shutil.rmtree(root)
    root.write_bytes(b"not a directory")  # the store's root is gone: every put fails
    with pytest.raises(ProduceError, match="object store unreachable"):
        c.produce({"t/0": [b"x"]})
    assert c.acked == []
    os.unlink(root)
    root.mkdir()
    c.run_for(0.5)
    for st in c.replica_states("t/0").values():
        assert st.max_applied_epoch is None  # no placeholder was replicated


def test_stale_cache_retries_with_new_object_and_gc_removes_orphan(tmp_path: Path) -> None:
    c = SimCluster(seed=5, partitions=("t/0",), store=LocalStore(tmp_path, create=True))
    c.bootstrap()
    for _ in range(3):
        c.mint()
    c.refresh_cache(2)
    c.produce({"t/0": [b"new"]}, via=2)  # window now at the latest epoch
    c.lag_cache(1, value=1)  # broker 1's cache is stuck far below the window
    acks = c.produce({"t/0": [b"x"]}, via=1)
    keys = l0_keys(c)
    assert len(keys) == 3  # first object, the orphan of the stale attempt, the retry
    orphan = [k for k in keys if parse_key(k).epoch == 1]
    assert len(orphan) == 1 and acks["t/0"].key != orphan[0]
    # Drive GC: reconcile, housekeep over new epochs, publish reports, collect.
    for _ in range(3):
        c.mint()
        c.refresh_cache(1)
        c.refresh_cache(2)
        c.reconcile("t/0")
        c.housekeep("t/0")
    c.publish_partitions()
    c.publish_health()
    r = c.gc()
    assert r.M is not None and orphan[0] in r.deleted
    assert [x for _, x in c.read_all("t/0")] == [b"new", b"x"]


def test_partition_created_after_snapshot_gets_epochs_above_it(tmp_path: Path) -> None:
    c = SimCluster(seed=9, partitions=("t/0",), store=LocalStore(tmp_path, create=True))
    c.bootstrap()
    rev = c.publish_partitions()
    created = c.create_partition("late/0")
    assert created > rev
    assert c.run_until(lambda: c.leader("late/0") is not None)
    acks = c.produce({"late/0": [b"z"]})
    assert acks["late/0"].epoch >= created > rev
    c.publish_health()
    view = read_cluster_view(c.store, c.wall(), 60)
    assert view.revision == rev and "late/0" not in view.partitions


def test_reads_from_l1_after_gc_and_no_referenced_object_deleted(tmp_path: Path) -> None:
    c = SimCluster(seed=21, partitions=PARTS, store=LocalStore(tmp_path, create=True))
    c.bootstrap()
    sent: dict[str, list[bytes]] = {p: [] for p in PARTS}
    for i in range(6):
        batch = {p: [f"{p}-{i}-{j}".encode() for j in range(2)] for p in PARTS}
        c.produce(batch)
        for p in PARTS:
            sent[p] += batch[p]
        c.mint()
        c.refresh_cache(1)
        if i % 2:
            for p in PARTS:
                c.reconcile(p)
                c.housekeep(p)
    c.publish_partitions()
    c.publish_health()
    r = c.gc()
    assert r.M is not None and r.deleted
    live = set(l0_keys(c))
    for b in c.brokers.values():
        for p in PARTS:
            for ph in b.replicas[p].sm.unreconciled():
                assert ph.key in live  # in_use_deleted == 0
    for p in PARTS:
        assert [x for _, x in c.read_all(p)] == sent[p]


def _scenario(seed: int, tmp: Path) -> tuple[dict[tuple[int, int], str], str]:
    c = SimCluster(seed=seed, partitions=("t/0", "t/1"), store=LocalStore(tmp, create=True))
    c.bootstrap()
    for i in range(4):
        c.produce({"t/0": [b"a%d" % i], "t/1": [b"b%d" % i]})
        if i == 1:
            victim = c.leader("t/0")
            assert victim is not None
            c.crash(victim)
            c.run_for(2.0)
            c.restart(victim)
        c.mint()
        c.reconcile("t/1")
    c.run_for(2.0)
    groups = sorted(c.sim.group_ids)
    digests = {(n, g): c.log_digest(n, g) for n in sorted(c.brokers) for g in groups}
    return digests, c.sim.trace_digest()


def test_determinism_same_seed_same_logs_byte_for_byte(tmp_path: Path) -> None:
    d1, t1 = _scenario(4, tmp_path / "a")
    d2, t2 = _scenario(4, tmp_path / "b")
    assert d1 == d2 and t1 == t2
    for g in {g for _, g in d1}:
        assert len({d1[(n, g)] for n in (1, 2, 3)}) == 1  # every replica, same log
