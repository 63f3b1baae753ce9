"""The harness's own checks, each on the state it exists for (issue 42): a harness whose
check compares less (a fence decision by `admitted` alone, a replica skipped, a rejection
always excused) turns every program built on it green, so each fails here when it does.
Their seeded bugs are in tests/conformance/mutants.py (class `[harness]`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from epochgc.impl.partition.commands import Placeholder
from epochgc.impl.partition.fence import FenceDecision
from epochgc.model import partition as mp
from epochgc.model.fence import fence
from tests.conformance.harness import Harness
from tests.conformance.implchecks import LandedChecks
from tests.conformance.shadow import Divergence, check_fence


def test_a_fence_decision_is_compared_whole() -> None:
    """The model's decision passes; the same with a wrong window or seen window (admitted
    unchanged) is a divergence."""
    applied = mp.apply_placeholder(mp.INITIAL, 5, 1).state
    r = fence(None, applied, 2, 7)
    assert r.admitted and r.window is not None and r.seen is not None
    right = FenceDecision(2, 7, r.admitted, "above_window", r.window, None, r.seen)
    check_fence(1, "t/0", right, applied)
    wrong_window = replace(right, window=(r.window[0], r.window[1] + 1))
    with pytest.raises(Divergence, match=r"fence decision on node 1 for t/0"):
        check_fence(1, "t/0", wrong_window, applied)
    wrong_seen = replace(right, seen_after=replace(r.seen, max=r.seen.max + 1))
    with pytest.raises(Divergence, match=r"fence decision on node 1 for t/0"):
        check_fence(1, "t/0", wrong_seen, applied)


def test_every_replica_is_compared_with_the_model_the_last_node_too(h: Harness) -> None:
    h.produce(["t/0"], 1, 1)
    h.check_step()
    last = max(h.c.brokers)
    rep = h.c.brokers[last].replicas["t/0"]
    orig = rep.sm.state
    rep.sm.state = replace(orig, last_reconciled_offset=orig.last_reconciled_offset + 1)
    try:
        with pytest.raises(Divergence, match=rf"replica state on node {last} for t/0"):
            h.check_step()
    finally:
        rep.sm.state = orig


def test_an_unexplained_apply_time_rejection_is_a_divergence() -> None:
    ph = Placeholder(5, "k", 0, 0, 1)
    checks = LandedChecks({("t/0", "k"): {3}}, set(), set())
    with pytest.raises(Divergence, match=r"apply-time rejection on node 1 of t/0's"):
        checks.check(1, "t/0", 1, 9, 3, ph, accepted=False)
    excused = LandedChecks({("t/0", "k"): {3}}, {("t/0", "k")}, set())
    assert excused.check(1, "t/0", 1, 9, 3, ph, accepted=False) is not None
    # landed in a term its fence did not admit it in
    with pytest.raises(Divergence, match=r"landed at index 9 in term 4"):
        LandedChecks({("t/0", "k"): {3}}, set(), set()).check(1, "t/0", 1, 9, 4, ph, True)
