"""Unit tests of the leader's fence (spec R8-R12)."""

from __future__ import annotations

import pytest

from epochgc.model.errors import ModelError
from epochgc.model.fence import SeenWindow, effective_window, fence
from epochgc.model.partition import INITIAL, PartitionState, apply_placeholder


def _applied(*epochs: int) -> PartitionState:
    s = INITIAL
    for offset, e in enumerate(epochs):
        s = apply_placeholder(s, e, offset).state
    return s


def test_first_fence_admits_and_seeds_seen_window() -> None:
    r = fence(None, INITIAL, 1, 10)
    assert r.admitted and r.window == (10, 10) and r.seen == SeenWindow(1, 10, 10)


def test_above_window_slides_old_hi_to_lo() -> None:
    r = fence(SeenWindow(1, 10, 12), _applied(10), 1, 15)
    assert r.admitted and r.seen == SeenWindow(1, 12, 15) and r.window == (12, 15)


def test_in_window_admits_without_change() -> None:
    seen = SeenWindow(1, 10, 12)
    r = fence(seen, _applied(10), 1, 11)
    assert r.admitted and r.seen is seen and r.window == (10, 12)


def test_below_window_rejects_reporting_window() -> None:
    seen = SeenWindow(1, 10, 12)
    r = fence(seen, _applied(10), 1, 9)
    assert not r.admitted and r.window == (10, 12) and r.seen is seen


def test_lower_bound_raised_by_previous_applied() -> None:
    # F1: a phantom bump left seen.previous at 10, but the log has moved to [12, 13].
    r = fence(SeenWindow(1, 10, 14), _applied(10, 12, 13), 1, 11)
    assert not r.admitted and r.window == (12, 14)


def test_seen_window_from_another_term_is_ignored() -> None:
    stale = SeenWindow(1, 5, 6)
    applied = _applied(8, 10)
    assert effective_window(stale, applied, 3) == (8, 10)
    assert not fence(stale, applied, 3, 7).admitted
    r = fence(stale, applied, 3, 12)
    assert r.seen == SeenWindow(3, 10, 12)  # the new seen window belongs to the new term


def test_applied_window_counts_when_seen_is_behind() -> None:
    assert effective_window(SeenWindow(1, 3, 4), _applied(8, 10), 1) == (8, 10)


@pytest.mark.parametrize(("term", "epoch", "field"), [(-1, 1, "term"), (1, -1, "epoch"),
                                                       (False, 1, "term"), (1, "2", "epoch")])
def test_bad_input_names_the_field(term: object, epoch: object, field: str) -> None:
    with pytest.raises(ModelError) as e:
        fence(None, INITIAL, term, epoch)  # type: ignore[arg-type]
    assert e.value.field == field
