"""Production's fence rules as merged (issues 30, 39; spec section 6, "Production's
rules") and the ordered one-partition system their property is decided in
(model/ordered.py). The February/July cases restate `ctp_stm_state.cc` at commit
6ad594d92dc7c1b969ffe6125a606fdf526625d9 and #31110's diff (model/prodrules.py cites
the lines)."""

from __future__ import annotations

import pytest

from epochgc.model.errors import ModelError
from epochgc.model.fence import SeenWindow, fence
from epochgc.model.ordered import Entry, OState, step
from epochgc.model.partition import INITIAL, PartitionState, apply_placeholder
from epochgc.model.prodrules import follower_slide
from epochgc.model.variants import PROD_VARIANTS, VARIANTS, FenceRule, variant

JAN, FEB, JUL = variant("prod-january"), variant("prod-february"), variant("prod-july")
AUG = variant("proposal-august")


def applied(prev: int, mx: int) -> PartitionState:
    return PartitionState(mx, prev, prev, 0)


def test_every_production_variant_exists_with_release_at_enqueue() -> None:
    assert set(PROD_VARIANTS) <= set(VARIANTS)
    for name in ("prod-january", "prod-february", "prod-july", "proposal-august", "reference"):
        base, enq = variant(name), variant(f"{name}-enqueue")
        assert not base.release_at_enqueue and enq.release_at_enqueue
        assert enq.fence_rule is base.fence_rule
    # production today: July with release at enqueue, asserting at apply
    assert variant("assert-at-apply").fence_rule is FenceRule.JULY
    assert variant("assert-at-apply").assert_at_apply
    assert variant("assert-at-apply").release_at_enqueue
    assert not FEB.followers_slide and not JUL.followers_slide and JAN.followers_slide


def test_january_window_is_half_open_at_the_seen_max() -> None:
    seen = SeenWindow(1, 10, 14)
    inside = fence(seen, applied(10, 12), 1, 13, JAN)
    assert inside.admitted and not inside.exclusive and inside.window == (10, 14)
    at_max = fence(seen, applied(10, 12), 1, 14, JAN)
    assert at_max.admitted and at_max.exclusive and at_max.seen == seen  # exclusive, no slide
    above = fence(seen, applied(10, 12), 1, 15, JAN)
    assert above.admitted and above.exclusive and above.seen == SeenWindow(1, 14, 15)
    assert not fence(seen, applied(10, 12), 1, 9, JAN).admitted


def test_january_keeps_seen_and_applied_apart_in_any_term() -> None:
    # 11 is below the applied window [12, 13] but inside the seen one: admitted (F1).
    assert fence(SeenWindow(0, 10, 14), applied(12, 13), 5, 11, JAN).admitted
    # Without a seen window the applied one decides.
    assert not fence(None, applied(12, 13), 5, 11, JAN).admitted


def test_february_scopes_the_seen_window_to_its_term() -> None:
    # In its term: [previous_seen, max_seen] (epoch_in_window lines 78-82), shared.
    seen = SeenWindow(3, 10, 14)
    r = fence(seen, applied(12, 13), 3, 11, FEB)
    assert r.admitted and not r.exclusive and r.window == (10, 14)
    assert fence(seen, applied(12, 13), 3, 14, FEB).admitted  # the max: in the window
    above = fence(seen, applied(12, 13), 3, 15, FEB)
    assert above.exclusive and above.seen == SeenWindow(3, 14, 15)
    no = fence(seen, applied(12, 13), 3, 9, FEB)
    assert not no.admitted and no.window == (10, 14)
    # A newer term reads the applied window (lines 68-72, 88-91).
    assert not fence(seen, applied(12, 13), 4, 11, FEB).admitted
    assert fence(seen, applied(12, 13), 4, 12, FEB).admitted
    first = fence(seen, applied(12, 13), 4, 20, FEB)
    assert first.exclusive and first.seen == SeenWindow(4, 20, 20)  # reset to [e, e]
    # advance_max_seen_epoch (lines 18-30): a newer term's bump at or below the old max
    # leaves the old window in place; the next fence of the term reads the applied one.
    stale = fence(seen, applied(12, 13), 4, 14, FEB)
    assert stale.admitted and stale.exclusive and stale.seen == seen
    assert stale.window == (12, 13)
    # Nothing at all: every epoch is above the (empty) window.
    assert fence(None, INITIAL, 0, 7, FEB).seen == SeenWindow(0, 7, 7)


def test_july_needs_applied_evidence_below_the_seen_max() -> None:
    # Production's crash report: 132 against a collapsed window [141, 141].
    seen = SeenWindow(3, 132, 141)
    assert not fence(seen, applied(141, 141), 3, 132, JUL).admitted
    assert fence(seen, applied(141, 141), 3, 132, FEB).admitted
    assert fence(seen, applied(130, 141), 3, 132, JUL).admitted  # not collapsed
    assert fence(seen, applied(132, 132), 3, 132, JUL).admitted  # applied max below seen max
    assert fence(seen, applied(141, 141), 3, 141, JUL).admitted  # the max needs none
    # `if (!_max_applied_epoch.has_value()) return false;`: nothing applied is no evidence.
    assert not fence(SeenWindow(0, 1, 2), INITIAL, 0, 1, JUL).admitted
    assert fence(SeenWindow(0, 1, 2), INITIAL, 0, 1, FEB).admitted
    # An applied max above the seen max is none either (not reachable in one term).
    assert not fence(seen, applied(150, 150), 3, 132, JUL).admitted
    # ...and it still admits the F1 shape's 11 (#31149's trace).
    assert fence(SeenWindow(0, 10, 14), applied(12, 13), 0, 11, JUL).admitted


def test_august_edges_and_raising_the_lower_edge() -> None:
    seen = SeenWindow(2, 10, 14)
    pending = applied(10, 12)  # applied max 12 < seen max 14: a bump is pending
    for edge in (10, 14):
        r = fence(seen, pending, 2, edge, AUG)
        assert r.admitted and not r.exclusive and r.seen == seen
    raised = fence(seen, pending, 2, 12, AUG)
    assert raised.admitted and raised.exclusive and raised.seen == SeenWindow(2, 12, 14)
    settled = fence(seen, applied(12, 14), 2, 12, AUG)
    assert settled.admitted and not settled.exclusive and settled.seen == seen
    assert not fence(seen, pending, 2, 9, AUG).admitted


def test_august_new_term_resets_on_its_first_slide() -> None:
    old = SeenWindow(1, 10, 14)
    r = fence(old, applied(10, 12), 2, 20, AUG)
    assert r.seen == SeenWindow(2, 20, 20) and r.exclusive
    inside = fence(old, applied(10, 12), 2, 11, AUG)  # the applied window decides
    assert inside.admitted and inside.seen == old and inside.window == (10, 12)
    assert not fence(old, applied(10, 12), 2, 9, AUG).admitted


def test_followers_slide_to_the_applied_epoch() -> None:
    assert follower_slide(SeenWindow(1, 10, 12), 15) == SeenWindow(1, 12, 15)
    assert follower_slide(SeenWindow(1, 10, 12), 11) == SeenWindow(1, 10, 12)
    assert follower_slide(None, 15) is None


def test_assert_at_apply_crashes_instead_of_rejecting() -> None:
    s = apply_placeholder(INITIAL, 10, 0).state
    s = apply_placeholder(s, 12, 1).state
    ours = apply_placeholder(s, 9, 2, variant("prod-july"))
    assert not ours.accepted and not ours.crashed
    theirs = apply_placeholder(s, 9, 2, variant("assert-at-apply"))
    assert not theirs.accepted and theirs.crashed and theirs.state == s


def test_ordered_lock_held_waits_release_at_enqueue_does_not() -> None:
    held, enq = variant("proposal-august"), variant("proposal-august-enqueue")
    s = OState(applied=applied(10, 10), seen=(SeenWindow(0, 10, 10), None),
               queue=(Entry(10, 0),), log_end=1)
    with pytest.raises(ModelError, match="exclusive lock waits"):
        step(s, held, "fence", epoch=12)  # a slide waits for this term's replicate
    assert step(s, enq, "fence", epoch=12).queue == (Entry(10, 0), Entry(12, 0))
    assert step(s, held, "fence", epoch=10).queue[-1] == Entry(10, 0)  # shared: no wait


def test_ordered_sync_and_truncation_across_terms() -> None:
    v = variant("prod-january")
    s = step(OState(), v, "fence", epoch=5)
    s = step(s, v, "change_leader", r=1)
    with pytest.raises(ModelError, match="earlier term"):
        step(s, v, "fence", epoch=6)  # O2: sync first
    assert step(s, v, "drop").queue == ()
    landed = step(s, v, "land")
    assert landed.applied.max_applied_epoch == 5 and landed.fired == 0
    restarted = step(step(OState(), v, "phantom", epoch=3), v, "restart", r=0)
    assert restarted.term == 1 and restarted.seen[0] is None  # a restarted leader's term ends
