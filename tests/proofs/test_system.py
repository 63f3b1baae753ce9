"""The system model's actions on concrete values: each requirement's behaviour, and the
invariants along random runs (a cheap cross-check of what the proofs cover)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochgc.model.actions import ACTIONS, step
from epochgc.model.errors import ModelError
from epochgc.model.invariants import TRANSITION_INVARIANTS, holds
from epochgc.model.system import ACCEPTED, DELETED, FAILED, STORED, UNKNOWN, NotEnabled, initial
from epochgc.model.variants import REFERENCE


def _run(ops: list[tuple[str, dict]]):  # type: ignore[no-untyped-def]
    s = initial(2, 3, [(0, 0), (0, 1), (1, 0)], 2)
    for a, kw in ops:
        s = step(s, REFERENCE, a, **kw)
    return s


def test_mint_and_create_share_the_revision_line() -> None:
    s = _run([("mint", {}), ("create_partition", {"p": 0}), ("mint", {})])
    assert (s.revision, s.cluster_epoch, s.partitions[0].creation_revision) == (3, 3, 2)


def test_upload_stamps_at_least_every_creation_revision() -> None:
    s = _run([("mint", {}), ("create_partition", {"p": 0}), ("create_partition", {"p": 1}),
              ("upload", {"o": 0, "cache": 1})])
    assert s.objects[0] == s.objects[0].__class__(STORED, 3)


def test_cache_never_leads() -> None:
    with pytest.raises(ModelError, match="never above the cluster epoch"):
        _run([("create_partition", {"p": 0}), ("upload", {"o": 1, "cache": 5})])


def test_late_partition_blocks_then_gc_collects_after_reconcile() -> None:
    ops = [("create_partition", {"p": 0}), ("create_partition", {"p": 1}), ("mint", {}),
           ("publish_snapshot", {}), ("upload", {"o": 0, "cache": 3}),
           ("fence_write", {"w": 0}), ("fence_write", {"w": 1}),
           ("land_write", {"w": 0}), ("land_write", {"w": 1}), ("gc_compute", {})]
    s = _run(ops)
    assert s.last_gc is not None and s.last_gc.blocked is not None and s.gc_m is None
    with pytest.raises(NotEnabled, match="above the round's M"):
        step(s, REFERENCE, "gc_delete", o=0)
    sync = [(a, {"p": p, "r": r}) for p in (0, 1) for r in range(3)
            for a in ("sync_replica", "report")]
    l1 = [("copy_to_l1", {"w": w}) for w in range(3)]
    ops2 = [*ops, ("mint", {}), ("upload", {"o": 1, "cache": 4}), ("fence_write", {"w": 2}),
            ("land_write", {"w": 2}), ("housekeep", {"p": 1, "cache": 4, "lrlo": -1}), *l1,
            ("reconcile", {"p": 0, "lrlo": 1}), ("reconcile", {"p": 1, "lrlo": 1}),
            *sync, ("gc_compute", {})]
    s2 = _run(ops2)
    # Reconciled, but the floor is the window's lower end (3): GC lags one window behind.
    assert s2.last_gc is not None and s2.last_gc.M == 2 == s2.gc_m
    with pytest.raises(NotEnabled, match="above the round's M"):
        step(s2, REFERENCE, "gc_delete", o=0)
    ops3 = [*ops2, ("mint", {}),
            ("housekeep", {"p": 0, "cache": 5, "lrlo": 2}),
            ("housekeep", {"p": 1, "cache": 5, "lrlo": 2}), *sync, ("publish_snapshot", {}),
            ("gc_compute", {}), ("gc_delete", {"o": 0})]
    s3 = _run(ops3)
    assert s3.last_gc is not None and s3.last_gc.M == 3
    assert s3.objects[0].status == DELETED and s3.objects[1].status == STORED
    assert holds(s3) is True


def test_reconcile_and_housekeeper_never_pass_a_placeholder_not_in_l1() -> None:
    """R27/R28 (issue 11 item 2): LRLO passes a placeholder only once it is durable in L1."""
    ops = [("create_partition", {"p": 0}), ("mint", {}), ("upload", {"o": 1, "cache": 2}),
           ("fence_write", {"w": 2}), ("land_write", {"w": 2})]
    s = _run(ops)
    with pytest.raises(NotEnabled, match="only placeholders in L1"):
        step(s, REFERENCE, "reconcile", p=0, lrlo=0)
    with pytest.raises(NotEnabled, match="unreconciled placeholder"):
        step(s, REFERENCE, "housekeep", p=0, cache=2, lrlo=1)
    s2 = step(step(s, REFERENCE, "copy_to_l1", w=2), REFERENCE, "housekeep", p=0, cache=2,
              lrlo=1)
    assert s2.partitions[0].state.last_reconciled_log_offset == 1
    assert holds(s2) is True


def test_failed_replicate_stays_in_flight_and_may_still_land() -> None:
    """Issue 11 item 3: a replicate whose caller saw a failure may still commit."""
    ops = [("create_partition", {"p": 0}), ("mint", {}), ("upload", {"o": 1, "cache": 2}),
           ("fence_write", {"w": 2}), ("fail_replicate", {"w": 2})]
    s = _run(ops)
    assert s.writes[2].status == UNKNOWN
    with pytest.raises(NotEnabled, match="may still land"):
        step(s, REFERENCE, "give_up", w=2)
    landed = step(s, REFERENCE, "land_write", w=2)
    assert landed.writes[2].status == ACCEPTED and holds(landed) is True
    passed = _run([*ops, ("mint", {}), ("other_write", {"p": 0, "epoch": 3}),
                   ("other_write", {"p": 0, "epoch": 3}), ("mint", {}),
                   ("other_write", {"p": 0, "epoch": 4})])
    assert step(passed, REFERENCE, "give_up", w=2).writes[2].status == FAILED


def test_failed_fence_marks_write_failed() -> None:
    s = _run([("create_partition", {"p": 0}), ("mint", {}), ("mint", {}),
              ("other_write", {"p": 0, "epoch": 3}), ("upload", {"o": 1, "cache": 1}),
              ("fence_write", {"w": 2})])
    assert s.writes[2].status == FAILED


_ACTION_NAMES = sorted(ACTIONS)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from(_ACTION_NAMES),
                          st.integers(0, 2), st.integers(0, 2), st.integers(-1, 8)),
                max_size=40))
def test_invariants_hold_on_random_runs(steps: list[tuple[str, int, int, int]]) -> None:
    s = initial(2, 3, [(0, 0), (0, 1), (1, 1)], 2)
    accepted = 0
    for name, i, j, n in steps:
        kw = {}
        for pname, kind in ACTIONS[name][1]:
            kw[pname] = {"partition": i % 2, "replica": j, "object": i % 2, "write": j,
                         "epoch": n, "offset": n,
                         "foreign": () if n < 0 else (n,)}[kind]
        try:
            t = step(s, REFERENCE, name, **kw)
        except ModelError:
            continue
        assert holds(t) is True, (name, kw)
        for tname, tinv in TRANSITION_INVARIANTS.items():
            assert tinv(s, t) is True, (tname, name, kw)
        accepted += sum(w.status == ACCEPTED for w in t.writes)
        s = t
