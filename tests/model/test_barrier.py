"""The epoch barrier in the model (SPEC R36-R38): the command, the pending safe epoch, its
promotion, the apply-time check, and production's rule without that check (B1)."""

from __future__ import annotations

from typing import Any

import pytest

from epochgc.model.actions import step
from epochgc.model.invariants import INVARIANTS, inv_safety
from epochgc.model.partition import (
    INITIAL,
    apply_advance_gc_epoch,
    apply_placeholder,
    apply_reconciled,
    inactive_epoch,
    well_formed,
)
from epochgc.model.system import DELETED, REJECTED, NotEnabled, System, initial
from epochgc.model.variants import REFERENCE, variant


def run(s: System, ops: list[tuple[str, dict[str, Any]]], vname: str = "reference") -> System:
    v = variant(vname)
    for a, p in ops:
        s = step(s, v, a, **p)
    return s


def test_pending_until_lrlo_reaches_the_command() -> None:
    st = apply_placeholder(INITIAL, 3, 0).state  # window [3, 3], floor 3, M(p) = 2
    st = apply_advance_gc_epoch(st, 7, 1)
    assert (st.barrier_epoch, st.barrier_offset, st.gc_safe_epoch) == (7, 1, -1)
    assert inactive_epoch(st) == 2  # pending: M(p) unchanged
    st = apply_reconciled(st, 0)
    assert st.gc_safe_epoch == -1 and inactive_epoch(st) == 2  # LRLO 0 < offset 1
    st = apply_reconciled(st, 1)
    assert st.gc_safe_epoch == 7 and inactive_epoch(st) == 7  # promoted
    assert well_formed(st)


def test_idle_partition_gets_m_from_the_barrier_alone() -> None:
    st = apply_advance_gc_epoch(INITIAL, 5, 0)
    assert inactive_epoch(st) is None
    assert inactive_epoch(apply_reconciled(st, 0)) == 5


def test_ratchet_and_apply_time_refusal() -> None:
    st = apply_advance_gc_epoch(INITIAL, 5, 0)
    assert apply_advance_gc_epoch(st, 4, 1) == st  # lower: a no-op
    assert apply_advance_gc_epoch(st, 5, 1) == st
    assert apply_advance_gc_epoch(st, 6, 1).barrier_offset == 1
    assert not apply_placeholder(st, 5, 1).accepted  # at the candidate: refused (R37)
    assert apply_placeholder(st, 6, 1).accepted
    # production's rule (no apply-time check of the candidate) accepts it
    assert apply_placeholder(st, 5, 1, variant("barrier-prod")).accepted


B1 = [("create_partition", {"p": 0}), ("mint", {}), ("upload", {"o": 0, "cache": 2}),
      ("fence_write", {"w": 0}), ("fail_replicate", {"w": 0}), ("mint", {}),
      ("invalidate_caches", {}), ("barrier", {"p": 0, "epoch": 2}),
      ("land_write", {"w": 0}), ("reconcile", {"p": 0, "lrlo": 0}),
      ("sync_replica", {"p": 0, "r": 0}), ("report", {"p": 0, "r": 0}),
      ("publish_snapshot", {}), ("gc_compute", {"foreign": ()}), ("gc_delete", {"o": 0})]


def test_b1_unknown_outcome_commits_after_the_barrier() -> None:
    """Production's rule: the drain counts the unknown-outcome replicate as answered, its
    placeholder commits after the command, the promoted epoch covers it: a live object
    deleted. Reference refuses it at apply; the deletion is then of garbage."""
    s0 = initial(1, 1, [(0, 0)], 1)
    prod = run(s0, B1, "barrier-prod")
    assert prod.objects[0].status == DELETED
    assert inv_safety(prod, variant("barrier-prod")) is False
    ref = run(s0, B1)
    assert ref.writes[0].status == REJECTED and ref.objects[0].status == DELETED
    assert all(f(ref, REFERENCE) is True for f in INVARIANTS.values())


def test_barrier_preconditions() -> None:
    s = run(initial(1, 1, [(0, 0)], 1), [("create_partition", {"p": 0}), ("mint", {}),
                                         ("upload", {"o": 0, "cache": 2})])
    with pytest.raises(NotEnabled, match="invalidated"):  # no invalidation above 2 yet
        step(s, REFERENCE, "barrier", p=0, epoch=1)
    s = run(s, [("mint", {}), ("invalidate_caches", {})])
    with pytest.raises(NotEnabled, match="in flight"):  # w0 (epoch 2) is uploaded
        step(s, REFERENCE, "barrier", p=0, epoch=2)
    step(s, REFERENCE, "barrier", p=0, epoch=1)  # below the write's epoch: not waited for
    with pytest.raises(NotEnabled, match="invalidated"):  # a cache below the floor
        run(initial(1, 1, [(0, 0)], 1), [("create_partition", {"p": 0}), ("mint", {}),
                                         ("mint", {}), ("invalidate_caches", {}),
                                         ("upload", {"o": 0, "cache": 2})])
