"""The producer, reconciler, reads and a GC round on the S3 backend, against the loopback
S3-protocol server (moto in server mode): data goes to S3 as L0, is read back from L0,
copied to L1 on S3, read back from L1, and survives the GC of its L0 objects."""

from __future__ import annotations

import pytest

from epochgc.impl.cluster.payload import check_record, make_record
from epochgc.impl.sim.cluster import SimCluster
from epochgc.impl.store.s3 import S3Store
from epochgc.model.keys import DATA_PREFIX

pytestmark = pytest.mark.s3

PARTS = ("t/0", "t/1")


def where(c: SimCluster, partition: str) -> set[str]:
    """Which level each record of the partition is served from, on its leader."""
    nid = c.leader(partition)
    assert nid is not None
    sm = c.brokers[nid].replicas[partition].sm
    return {loc[0] for o in range(sm.next_offset) if (loc := sm.locate(o)) is not None}


def test_produce_reconcile_and_read_back_through_l0_and_l1_on_s3(
    s3_endpoint: str, s3_bucket: str
) -> None:
    store = S3Store(s3_bucket, "cluster-a", endpoint_url=s3_endpoint)
    c = SimCluster(seed=5, partitions=PARTS, store=store)
    c.bootstrap()
    sent: dict[str, list[bytes]] = {p: [] for p in PARTS}
    keys = set()
    for i in range(3):
        batch = {p: [make_record("s3", p, 3 * i + j) for j in range(3)] for p in PARTS}
        acks = c.produce(batch)
        keys |= {a.key for a in acks.values()}
        for p in PARTS:
            sent[p] += batch[p]
        c.mint()
        c.refresh_cache(1)
    # The L0 objects are on S3 (one per batch, shared by both partitions).
    assert {o.key for o in store.list_all(DATA_PREFIX)} == keys and len(keys) == 3

    for p in PARTS:  # before reconciling: every record is served from L0 on S3
        assert where(c, p) == {"l0"}
        assert [r for _, r in c.read_all(p)] == sent[p]

    for p in PARTS:
        res = c.reconcile(p)
        assert res.records == 9 and res.l1_key is not None
        assert store.head(res.l1_key) is not None  # the L1 object is durable on S3
        assert where(c, p) == {"l1"}
        got = c.read_all(p)
        assert [r for _, r in got] == sent[p]
        assert all(check_record(r, p) for _, r in got)

    # Move every window on so M covers the early epochs, then GC the L0 objects on S3.
    for _ in range(2):
        c.mint()
        c.refresh_cache(1)
        for p in PARTS:
            c.housekeep(p)
    c.publish_partitions()
    c.publish_health()
    r = c.gc()
    assert r.M is not None and r.deleted
    assert set(r.deleted) <= keys
    remaining = {o.key for o in store.list_all(DATA_PREFIX)}
    assert remaining == keys - set(r.deleted)
    for p in PARTS:  # reads still whole: they come from L1 on S3
        assert [x for _, x in c.read_all(p)] == sent[p]
