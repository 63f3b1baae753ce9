"""Partition deletion and re-creation in the system model (spec R19 changed, R32-R35), and
the liveness witness: after every partition is deleted, one GC round collects every stored
object (reference); under `empty-is-nothing` no round ever does."""

from __future__ import annotations

from typing import Any

import pytest

import epochgc.model.system as ms
from epochgc.model.actions import step
from epochgc.model.invariants import holds
from epochgc.model.system import (
    ACCEPTED,
    DELETED,
    FENCED,
    IDLE,
    ORPHANED,
    STORED,
    NotEnabled,
    System,
    initial,
)
from epochgc.model.variants import REFERENCE, Variant, variant

Ops = list[tuple[str, dict[str, Any]]]


def run(s: System, ops: Ops, v: Variant = REFERENCE) -> System:
    for action, params in ops:
        s = step(s, v, action, **params)
        assert holds(s, v) is True, (action, params)
    return s


# o0 feeds p0 and p1; o1 feeds p0 only. w0 accepted on p0, w1 fenced on p1, w2 fenced on p0.
SETUP: Ops = [
    ("create_partition", {"p": 0}), ("create_partition", {"p": 1}), ("mint", {}),
    ("upload", {"o": 0, "cache": 3}), ("fence_write", {"w": 0}), ("land_write", {"w": 0}),
    ("fence_write", {"w": 1}), ("upload", {"o": 1, "cache": 3}), ("fence_write", {"w": 2}),
    ("publish_snapshot", {}),
]


def base() -> System:
    return run(initial(2, 2, [(0, 0), (0, 1), (1, 0)], 2), SETUP)


def test_delete_is_a_command_that_drops_the_partition_and_orphans_its_writes() -> None:
    s = base()
    t = run(s, [("delete_partition", {"p": 0})])
    part = t.partitions[0]
    assert t.revision == s.revision + 1  # its own revision (R32)
    assert not part.created and not part.in_snapshot and part.log_end == 0
    assert part.state == ms.INITIAL and all(r == ms.Replica() for r in part.replicas)
    assert [w.status for w in t.writes] == [ORPHANED, FENCED, ORPHANED]
    assert t.partitions[1] == s.partitions[1]  # the other partition is untouched
    with pytest.raises(NotEnabled, match="does not exist"):
        step(t, REFERENCE, "delete_partition", p=0)  # deleting an unknown one


def test_writes_to_a_deleted_partition_are_refused() -> None:
    t = run(base(), [("delete_partition", {"p": 0})])
    for action, params in (("fence_write", {"w": 2}), ("land_write", {"w": 2}),
                           ("other_write", {"p": 0, "epoch": 3}),
                           ("late_land", {"p": 0, "epoch": 3}),
                           ("housekeep", {"p": 0, "cache": 3, "lrlo": -1})):
        with pytest.raises(NotEnabled):
            step(t, REFERENCE, action, **params)
    fresh = run(initial(1, 1, [(0, 0)], 1), [("create_partition", {"p": 0}),
                                            ("delete_partition", {"p": 0})])
    with pytest.raises(NotEnabled, match="does not exist"):
        step(fresh, REFERENCE, "upload", o=0, cache=0)


def test_recreation_is_a_new_incarnation_above_the_deletion() -> None:
    t = run(base(), [("delete_partition", {"p": 0}), ("create_partition", {"p": 0})])
    assert t.partitions[0].creation_revision == t.revision > 4  # deletion was revision 4
    # The old incarnation's writes stay orphaned, below the new creation revision (R35).
    for w in (0, 2):
        assert t.writes[w].status == ORPHANED
        assert t.objects[t.writes[w].obj].epoch < t.partitions[0].creation_revision
    assert t.partitions[0].state == ms.INITIAL and not t.partitions[0].in_snapshot
    with pytest.raises(NotEnabled):
        step(t, REFERENCE, "land_write", w=2)


def test_object_feeding_a_deleted_and_a_live_partition_stays_protected() -> None:
    """o0 feeds deleted p0 and live p1 (w1 fenced, still acceptable): no round deletes it."""
    t = run(base(), [("delete_partition", {"p": 0}), ("mint", {}), ("publish_snapshot", {}),
                     ("sync_replica", {"p": 1, "r": 0}), ("report", {"p": 1, "r": 0})])
    t = run(t, [("gc_compute", {"foreign": ()})])
    assert t.gc_m is None  # p1 has no window yet: blocked, nothing deleted
    t = run(t, [("land_write", {"w": 1}), ("sync_replica", {"p": 1, "r": 0}),
                ("report", {"p": 1, "r": 0}), ("gc_compute", {"foreign": ()})])
    assert t.writes[1].status == ACCEPTED and t.gc_m is not None
    assert t.gc_m < t.objects[0].epoch
    with pytest.raises(NotEnabled, match="above the round's M"):
        step(t, REFERENCE, "gc_delete", o=0)
    # Once p1's data is in L1 and its floor passes epoch 3, o1 (which fed only the deleted
    # p0) and o0 are both collectible.
    t = run(t, [("copy_to_l1", {"w": 1}), ("housekeep", {"p": 1, "cache": 5, "lrlo": 1}),
                ("mint", {}), ("housekeep", {"p": 1, "cache": 6, "lrlo": 2}),
                ("sync_replica", {"p": 1, "r": 0}), ("report", {"p": 1, "r": 0}),
                ("publish_snapshot", {}), ("gc_compute", {"foreign": ()})])
    assert t.gc_m is not None and t.objects[1].epoch <= t.gc_m
    t = run(t, [("gc_delete", {"o": 1}), ("gc_delete", {"o": 0})])
    assert t.objects[1].status == DELETED and t.objects[0].status == DELETED


def all_deleted(v: Variant) -> System:
    """Every partition deleted, a snapshot published after it."""
    return run(base(), [("delete_partition", {"p": 0}), ("delete_partition", {"p": 1}),
                        ("publish_snapshot", {})], v)


def test_liveness_witness_one_round_collects_every_stored_object() -> None:
    """Explicit model run (not a proof): with every partition deleted, one GC round's M is
    the snapshot revision (R19 changed), above every stored object's epoch."""
    s = all_deleted(REFERENCE)
    assert [o.status for o in s.objects] == [STORED, STORED]
    s = run(s, [("gc_compute", {"foreign": ()})])
    assert s.gc_m == s.snapshot_revision
    s = run(s, [("gc_delete", {"o": o}) for o in range(len(s.objects))])
    assert all(o.status == DELETED for o in s.objects)


def test_empty_is_nothing_strands_objects_in_every_round() -> None:
    """The old R19: the same state, and every later round (any number of mints, snapshots,
    reports) computes no M, so no object is ever deleted. (Bounded here; the prove report
    has the general argument.)"""
    old = variant("empty-is-nothing")
    s = run(all_deleted(old), [("gc_compute", {"foreign": ()})], old)
    assert s.gc_m is None
    for _ in range(5):
        s = run(s, [("mint", {}), ("publish_snapshot", {}), ("gc_compute", {"foreign": ()})],
                old)
        assert s.gc_m is None
        for o in range(len(s.objects)):
            with pytest.raises(NotEnabled):
                step(s, old, "gc_delete", o=o)
    assert all(o.status == STORED for o in s.objects)


def test_idle_write_of_a_deleted_partition_can_serve_the_new_incarnation() -> None:
    s = run(initial(1, 1, [(0, 0)], 1),
            [("create_partition", {"p": 0}), ("delete_partition", {"p": 0}),
             ("create_partition", {"p": 0}), ("mint", {}), ("upload", {"o": 0, "cache": 4})])
    assert s.writes[0].status != IDLE and s.objects[0].epoch >= s.partitions[0].creation_revision
