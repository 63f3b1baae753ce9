"""Each variant differs from `reference` exactly where the spec says (spec V)."""

from __future__ import annotations

import pytest

from epochgc.model.cluster import Report, gc_epoch
from epochgc.model.errors import ModelError
from epochgc.model.fence import SeenWindow, fence
from epochgc.model.partition import INITIAL, PartitionState, apply_placeholder, inactive_epoch
from epochgc.model.variants import REFERENCE, SAFE_VARIANTS, VARIANTS, variant


def _applied(*epochs: int, v: str = "reference") -> PartitionState:
    s = INITIAL
    for offset, e in enumerate(epochs):
        s = apply_placeholder(s, e, offset, VARIANTS[v]).state
    return s


def test_lookup() -> None:
    assert variant("reference") is REFERENCE
    assert set(SAFE_VARIANTS) <= set(VARIANTS)
    with pytest.raises(ModelError, match="unknown variant"):
        variant("nope")


def test_strict_admits_only_the_newest_epoch() -> None:
    seen = SeenWindow(1, 10, 11)
    assert fence(seen, _applied(10), 1, 10).admitted
    strict = VARIANTS["strict"]
    r = fence(None, _applied(10, v="strict"), 1, 11, strict)
    assert r.window == (11, 11)
    assert not fence(r.seen, _applied(10, v="strict"), 1, 10, strict).admitted
    s = _applied(10, 11, v="strict")
    assert s.previous_applied_epoch == 11
    assert not apply_placeholder(s, 10, 5, strict).accepted
    assert apply_placeholder(_applied(10, 11), 10, 5).accepted


@pytest.mark.parametrize("name", ["fence-only", "untermed"])
def test_no_apply_time_check(name: str) -> None:
    s = _applied(10, 12, 13)  # window [12, 13]
    assert not apply_placeholder(s, 11, 3).accepted
    assert apply_placeholder(s, 11, 3, VARIANTS[name]).accepted


def test_fence_only_lower_bound_not_raised_by_applied() -> None:
    seen, applied = SeenWindow(1, 10, 14), _applied(10, 12, 13)
    assert not fence(seen, applied, 1, 11).admitted
    assert fence(seen, applied, 1, 11, VARIANTS["fence-only"]).admitted


def test_untermed_uses_a_seen_window_from_another_term() -> None:
    stale, applied = SeenWindow(1, 5, 6), _applied(5, 6, 8, 10)
    assert not fence(stale, applied, 3, 7).admitted
    assert not fence(stale, applied, 3, 7, VARIANTS["fence-only"]).admitted
    r = fence(stale, applied, 3, 7, VARIANTS["untermed"])
    assert r.admitted and r.window == (6, 7)


def test_watermark_from_max_ignores_reconciler() -> None:
    s = _applied(5, 7)
    assert inactive_epoch(s) == 4
    assert inactive_epoch(s, VARIANTS["watermark-from-max"]) == 6


def test_skip_missing_does_not_block() -> None:
    reps = [Report("a", "r0", 4)]
    assert gc_epoch(9, ["a", "b"], reps).M is None
    assert gc_epoch(9, ["a", "b"], reps, VARIANTS["skip-missing"]).M == 4


def test_uncapped_ignores_snapshot_revision() -> None:
    reps = [Report("a", "r0", 40)]
    assert gc_epoch(9, ["a"], reps).M == 9
    assert gc_epoch(9, ["a"], reps, VARIANTS["uncapped"]).M == 40


def test_collapse_first_slide_after_restart_or_new_term() -> None:
    collapse = VARIANTS["collapse"]
    applied = _applied(10, 11)
    assert fence(None, applied, 1, 12).window == (11, 12)
    assert fence(None, applied, 1, 12, collapse).window == (12, 12)
    assert fence(SeenWindow(1, 10, 11), applied, 2, 12, collapse).window == (12, 12)
    # within its own term the slide is the normal one
    assert fence(SeenWindow(2, 12, 12), applied, 2, 13, collapse).window == (12, 13)
