"""Issue 13's harness rules, driven directly (directed programs, seconds): deletion while
writes are in flight, on stale reports, across leader changes, re-creation with an old write
held at the fence; every step checked (refinement against the model, the model's invariants
on the abstraction with orphaned writes, read-back of every acknowledged record of the
partitions that exist, R32/R34 on every broker)."""

from __future__ import annotations

import pytest

from tests.conformance.harness import STATS, Harness


def program(h: Harness) -> None:
    h.produce(["t/0", "t/1"], 2)
    h.recreate_with_old_write("t/0")
    h.check_step()
    h.delete_while_writing("t/1", "t/0")  # t/1's object also feeds t/0
    h.check_step()
    h.service_round()
    h.check_step()
    h.create_partition()  # t/1 again: a new incarnation
    h.create_partition()  # t/2
    h.produce(["t/0", "t/1", "t/2"], 1)
    h.check_step()
    h.delete_on_stale_reports("t/2")
    h.check_step()
    h.recreate_on_stale_reports("t/0")  # old, fresh reports of t/0 must not count (R35)
    h.check_step()
    h.recreate_with_old_write("t/1")  # deleted and created a third time
    h.check_step()
    h.delete_across_leader_change("t/0", 2)
    h.check_step()
    h.create_partition()
    h.produce(["t/0", "t/1"], 2)
    h.check_step()
    for _ in range(3):
        h.service_round()
        h.check_step()
    h.settle()
    h.check_step()
    h.check_readback()


@pytest.mark.parametrize("seed,disk", [(1, False), (2, True), (7, False)])
def test_lifecycle_program(seed: int, disk: bool) -> None:
    h = Harness(seed, disk=disk)
    try:
        program(h)
        ctl = h._controller_sm()
        again = [p for p in h.created() if ctl.ever_deleted(p)]
        assert again, (h.created(), ctl.deleted)  # some partition is a re-created one
        h.produce(again, 2)
        h.check_step()
        assert all(h.expected[p] for p in again)  # its acks are read back
    finally:
        h.close()
    assert STATS["lifecycle.deletions_applied"] >= 3
    assert STATS["lifecycle.old_write_at_new_incarnation"] >= 1
    assert STATS["lifecycle.gc_on_old_incarnation_reports"] >= 1


def test_deleted_while_a_replica_is_isolated() -> None:
    """Found by the rules: a partition deleted while one replica is cut off; the others
    applied (and then removed) entries the isolated one has not: the model replays the
    deleted incarnation's log from what any replica applied."""
    h = Harness(0)
    try:
        h.create_and_produce()
        h.create_and_produce()
        h.isolate(1)
        h.check_step()
        h.delete_while_writing("t/0", "t/0")
        h.check_step()
        h.settle()
        h.check_step()
        h.heal()
        h.settle()
        h.check_step()
    finally:
        h.close()


def test_readback_skips_a_lagging_node_still_on_the_earlier_incarnation() -> None:
    """Found by the rules: t/0 deleted and created again while a node is cut off; it
    still holds the earlier incarnation (its controller has not applied the deletion), whose
    records are not the current one's: the read-back reads current incarnations only."""
    h = Harness(5)
    try:
        for _ in range(4):  # the earlier incarnation holds more records than the new one
            h.produce(["t/0"], 2)
        h.settle()
        ctl = h.c.controller_leader()
        cut = next(n for n in (3, 2, 1) if n != ctl)
        h.isolate(cut)
        h.check_step()
        h.delete_partition("t/0")
        h.create_partition()  # t/0 again
        h.produce(["t/0"], 2, via=ctl or 1)
        h.check_step()
        assert h.c.brokers[cut].replicas["t/0"].info.group != h.shadows["t/0"].group
        h.check_readback()
        h.heal()
        h.settle()
        h.check_step()
        h.check_readback()
    finally:
        h.close()
