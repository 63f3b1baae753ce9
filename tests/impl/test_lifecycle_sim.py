"""Partition deletion and re-creation (issue 13, SPEC R32-R35) on the simulated cluster: the
real controller, brokers, fences, producer, health reports and GC round on the Raft core."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from epochgc.impl.broker.producer import PartitionDeletedError
from epochgc.impl.controller.statemachine import (
    ControllerStateMachine,
    decode,
    encode_create,
    encode_delete,
)
from epochgc.impl.gc.reports import HEALTH_PREFIX, PARTITIONS_KEY
from epochgc.impl.partition import commands as pc
from epochgc.impl.partition.fence import PartitionDeleted
from epochgc.impl.partition.statemachine import PartitionStateMachine
from epochgc.impl.raft.messages import Entry
from epochgc.impl.sim.cluster import SimCluster
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import DATA_PREFIX, parse_key
from epochgc.model.partition import INITIAL

PARTS = ("t/0", "t/1", "u/0")


def l0_keys(c: SimCluster) -> set[str]:
    return {o.key for o in c.store.list_all(DATA_PREFIX)}


def cluster(tmp_path: Path, seed: int = 3) -> SimCluster:
    c = SimCluster(seed=seed, partitions=PARTS, store=LocalStore(tmp_path, create=True))
    c.bootstrap()
    return c


def ph(epoch: int, key: str = "k") -> pc.Placeholder:
    return pc.Placeholder(epoch, key, 0, 0, 1)


# ---- the state machines --------------------------------------------------------------------


def test_controller_delete_has_its_own_revision_and_recreate_is_a_new_incarnation() -> None:
    sm = ControllerStateMachine()
    for i, data in enumerate([encode_create("u/0"), encode_delete("u/0"), encode_create("u/0")]):
        sm.apply(Entry(index=i + 1, term=1, data=data))
    assert decode(encode_delete("u/0")) == (3, "u/0")
    assert sm.revision == 3
    assert sm.partitions["u/0"].creation_revision == 3  # above the deletion's revision 2
    (old,) = sm.deleted.values()
    assert (old.creation_revision, old.deletion_revision) == (1, 2)
    assert old.group != sm.partitions["u/0"].group
    # snapshot/restore keeps the deleted incarnations (a restarted node must not bring back
    # their groups, and must still refuse their writes)
    from epochgc.impl.raft.messages import Snapshot

    back = ControllerStateMachine()
    back.restore(Snapshot(index=3, term=1, data=sm.snapshot()))
    assert back.deleted == sm.deleted and back.partitions == sm.partitions
    # deleting an absent partition is a no-op with a revision, like creating an existing one
    sm.apply(Entry(index=4, term=1, data=encode_delete("nope/0")))
    assert sm.revision == 4 and len(sm.deleted) == 1


def test_apply_refuses_placeholders_of_a_deleted_partition_or_an_earlier_incarnation() -> None:
    sm = PartitionStateMachine(creation_revision=10)
    r = sm.apply(Entry(index=1, term=1, data=pc.encode(ph(9))))  # below A2's floor: stale
    assert r is not None and not r.deleted and not r.accepted and sm.state == INITIAL
    r = sm.apply(Entry(index=2, term=1, data=pc.encode(ph(10))))
    assert r is not None and r.accepted
    sm.deleted = True
    before = sm.state
    r = sm.apply(Entry(index=3, term=1, data=pc.encode(ph(12))))
    assert r is not None and r.deleted and not r.accepted
    assert sm.state == before and len(sm.placeholders) == 1


# ---- the running (simulated) cluster -------------------------------------------------------


def test_delete_drops_groups_reports_and_snapshot_entry(tmp_path: Path) -> None:
    c = cluster(tmp_path)
    c.produce({"t/0": [b"a"], "u/0": [b"b"]})
    group = c.group_of("u/0")
    rev = c.brokers[1].controller.revision
    drev = c.delete_partition("u/0")
    assert drev == rev + 1
    for nid, b in c.brokers.items():
        assert "u/0" not in b.replicas and group not in c.ports[nid].host.groups
        assert "u/0" not in b.controller.partitions
        assert "u/0" not in json.dumps(b.status()["partitions"])
    srev = c.publish_partitions()
    doc = json.loads(c.store.get(PARTITIONS_KEY))
    created = {p: c.brokers[1].controller.partitions[p].creation_revision for p in ("t/0", "t/1")}
    assert doc == {"revision": srev, "partitions": ["t/0", "t/1"], "created": created}
    assert srev >= drev
    c.publish_health()
    for info in c.store.list_all(HEALTH_PREFIX):
        assert "u/0" not in c.store.get(info.key).decode()
    # a restarted node does not bring the group back (its tombstone survives the crash)
    c.crash(2)
    c.restart(2)
    c.run_for(2.0)
    assert group not in c.ports[2].host.groups and "u/0" not in c.brokers[2].replicas
    assert [r for _, r in c.read_all("t/0")] == [b"a"]


def test_write_to_deleted_partition_is_refused_with_its_name(tmp_path: Path) -> None:
    c = cluster(tmp_path)
    c.delete_partition("u/0")
    before = l0_keys(c)
    with pytest.raises(PartitionDeletedError, match=r"'u/0'.*refused, not acknowledged") as e:
        c.produce({"u/0": [b"x"]})
    assert e.value.acks == {} and l0_keys(c) == before  # refused before any upload
    # a batch over a live and a deleted partition: the live part is acknowledged
    with pytest.raises(PartitionDeletedError, match="u/0") as e2:
        c.produce({"t/0": [b"y"], "u/0": [b"z"]})
    assert sorted(e2.value.acks) == ["t/0"]
    assert [r for _, r in c.read_all("t/0")] == [b"y"]
    # straight at a broker's fence: refused naming the partition, on every broker
    for b in c.brokers.values():
        with pytest.raises(PartitionDeleted, match="'u/0' was deleted"):
            c.wait(b.replicate("u/0", ph(100)))


def test_replica_refuses_from_the_moment_its_controller_applies_the_deletion(
    tmp_path: Path,
) -> None:
    """R34 at apply: the controller group applies before the partition groups of the same
    Ready batch, so the replica must refuse at once, not when the deferred sync runs."""
    c = cluster(tmp_path)
    b = c.brokers[1]
    rep = b.replicas["u/0"]
    ctl = b.controller
    ctl.apply(Entry(index=ctl.last_index + 1, term=1, data=encode_delete("u/0")))
    assert rep.sm.deleted  # before the loop ran the deferred sync
    r = rep.sm.apply(Entry(index=rep.sm.last_index + 1, term=1, data=pc.encode(ph(99))))
    assert r is not None and r.deleted and not r.accepted
    c.close()


def test_write_in_flight_across_the_deletion_is_refused_not_hung(tmp_path: Path) -> None:
    c = cluster(tmp_path)
    nid = c.leader("u/0")
    assert nid is not None
    fence = c.brokers[nid].replicas["u/0"].fence
    ctrl = c.brokers[c.controller_leader() or 1]

    async def delete_meanwhile(epoch: int) -> None:
        fence.before_propose = None
        await ctrl.delete_partition("u/0")  # between the fence and the propose
        while not fence.sm.deleted:
            await asyncio.sleep(0.01)

    fence.before_propose = delete_meanwhile
    epoch = c.brokers[nid].cluster_epoch()
    task = c.spawn(c.brokers[nid].replicate("u/0", ph(max(epoch, 3))))
    with pytest.raises(PartitionDeleted, match="u/0"):
        c.wait(task, max_steps=20_000)
    assert not any(a.partition == "u/0" for a in c.acked)


def test_recreated_partition_is_a_new_incarnation(tmp_path: Path) -> None:
    c = cluster(tmp_path)
    old = c.produce({"u/0": [b"old-1", b"old-2"]})["u/0"]
    old_group = c.group_of("u/0")
    drev = c.delete_partition("u/0")
    crev = c.create_partition("u/0")
    assert crev > drev and c.group_of("u/0") != old_group
    for st in c.replica_states("u/0").values():
        assert st == INITIAL  # no state, no reports of the old incarnation
    assert c.run_until(lambda: c.leader("u/0") is not None)
    assert c.read_all("u/0") == []
    # a write stamped for the old incarnation (epoch below crev) never lands in the new one
    nid = c.leader("u/0")
    assert nid is not None
    with pytest.raises(PartitionDeleted, match="stamped for an earlier, deleted incarnation") as e:
        c.wait(c.brokers[nid].replicate("u/0", ph(old.epoch, old.key)))
    assert e.value.at.startswith("fence: below the partition's creation revision")  # no entry
    new = c.produce({"u/0": [b"new"]})["u/0"]
    assert new.epoch >= crev > old.epoch and new.base == 0
    assert [r for _, r in c.read_all("u/0")] == [b"new"]


def advance(c: SimCluster, rounds: int = 3) -> None:
    """Reconcile and housekeep the live partitions over fresh epochs, then report."""
    for _ in range(rounds):
        c.mint()
        for nid in c.brokers:
            c.refresh_cache(nid)
        for p in sorted(c.brokers[1].controller.partitions):
            c.reconcile(p)
            c.housekeep(p)
    c.publish_partitions()
    c.publish_health()


def test_gc_collects_stranded_objects_but_not_one_a_live_partition_needs(tmp_path: Path) -> None:
    c = cluster(tmp_path)
    shared = c.produce({"t/0": [b"live"], "u/0": [b"gone"]})["t/0"].key  # feeds t/0 and u/0
    stranded = c.produce({"u/0": [b"only-u"]})["u/0"].key
    c.delete_partition("u/0")
    c.mint()
    for p in ("t/0", "t/1"):
        c.housekeep(p)
    c.publish_partitions()
    c.publish_health()
    r = c.gc()
    assert r.M is not None and r.blocked is None
    # t/0's placeholder of `shared` is unreconciled: M stays below its epoch, which also
    # keeps `stranded` (same or later epoch) for now
    assert parse_key(shared).epoch > r.M
    assert {shared, stranded} <= l0_keys(c)
    advance(c)
    r = c.gc()
    assert r.M is not None and parse_key(stranded).epoch <= r.M
    assert {shared, stranded} <= set(r.deleted)
    assert [x for _, x in c.read_all("t/0")] == [b"live"]  # read from L1 now


def test_every_partition_deleted_gc_collects_every_object(tmp_path: Path) -> None:
    """The R19 change on the running cluster: an empty snapshot at revision R gives M = R."""
    c = cluster(tmp_path)
    for p in PARTS:
        c.produce({p: [b"x"]})
    c.publish_partitions()  # a snapshot listing them: the next one must replace it
    c.publish_health()
    for p in PARTS:
        c.delete_partition(p)
    srev = c.publish_partitions()
    c.publish_health()
    r = c.gc()
    assert srev == r.M and r.blocked is None
    assert l0_keys(c) == set()


def test_report_of_the_old_incarnation_never_counts_for_the_new_one(tmp_path: Path) -> None:
    """Issue 13 / R35: a health file written before the deletion, still fresh, names `u/0`;
    after `u/0` is re-created the GC reader must not count it for the new incarnation, which
    is missing (the round blocks, F4) until its own replicas report."""
    c = cluster(tmp_path)
    c.produce({"u/0": [b"old"]})
    advance(c)  # every node reports a value for the old u/0
    assert c.gc().blocked is None
    c.delete_partition("u/0")
    c.create_partition("u/0")
    assert c.run_until(lambda: c.leader("u/0") is not None)
    c.publish_partitions()  # lists the new u/0; the health files are the old ones, fresh
    assert any("u/0" in c.store.get(i.key).decode() for i in c.store.list_all(HEALTH_PREFIX))
    r = c.gc()
    assert r.M is None and r.blocked is not None and "u/0" in r.blocked
    advance(c)  # the new incarnation's replicas report: the round runs again
    r = c.gc()
    assert r.blocked is None and r.M is not None


# ---- issue 14, deep run seed 101: the published snapshot's revision went backwards --------


def test_new_controller_leader_publishes_only_after_committing_in_its_term(
        tmp_path: Path) -> None:
    """A new controller leader whose commit index still ends in an earlier term may not have
    applied entries an earlier leader committed (and published): the deep run's seed 101 saw
    node 1 (term 5, commit 43 of term 3) publish revision 40 over node 3's revision 41, so
    M over fresh reports went backwards (T4). It must refuse until a term-5 entry commits."""
    from epochgc.impl.broker.broker import CONTROLLER_GROUP
    from epochgc.impl.partition.fence import NotLeaderError

    c = cluster(tmp_path)
    first = c.publish_partitions()
    old = c.controller_leader()
    assert old is not None
    new = next(n for n in sorted(c.brokers) if n != old)
    c.ports[old].transfer_leadership(CONTROLLER_GROUP, new)
    assert c.run_until(lambda: c.ports[new].is_leader(CONTROLLER_GROUP))
    host = c.ports[new].host
    log = host.groups[CONTROLLER_GROUP].node.log
    assert log.term(log.committed) < host.term(CONTROLLER_GROUP)  # the shape: no own entry yet
    assert not host.reads_current(CONTROLLER_GROUP)
    with pytest.raises(NotLeaderError):
        c.wait(c.brokers[new].publish_partitions(), max_steps=1)
    assert json.loads(c.store.get(PARTITIONS_KEY))["revision"] == first
    # once its no-op commits and applies it serves the read, never below what was published
    assert c.run_until(lambda: host.reads_current(CONTROLLER_GROUP))
    assert c.wait(c.brokers[new].publish_partitions()) >= first
