"""Unit tests of the partition state machine (spec R1-R7)."""

from __future__ import annotations

import pytest

from epochgc.model.errors import ModelError
from epochgc.model.partition import (
    INITIAL,
    PartitionState,
    accepts,
    apply_advance_epoch,
    apply_placeholder,
    apply_reconciled,
    apply_set_start_offset,
    inactive_epoch,
    window,
)


def _placeholders(*epochs: int) -> PartitionState:
    s = INITIAL
    for offset, e in enumerate(epochs):
        s = apply_placeholder(s, e, offset).state
    return s


def test_initial_state_has_no_window_and_no_watermark() -> None:
    assert window(INITIAL) is None
    assert inactive_epoch(INITIAL) is None
    assert accepts(INITIAL, 0)


def test_first_placeholder_sets_every_field() -> None:
    r = apply_placeholder(INITIAL, 7, 3)
    assert r.accepted
    assert r.state == PartitionState(7, 7, 7, 3)
    assert inactive_epoch(r.state) == 6


def test_slide_keeps_old_max_as_previous() -> None:
    s = _placeholders(5, 9)
    assert (s.previous_applied_epoch, s.max_applied_epoch, s.window_offset) == (5, 9, 1)
    assert s.min_epoch_lower_bound == 5  # the floor only moves with the reconciler


def test_in_window_placeholder_is_accepted_without_change() -> None:
    s = _placeholders(5, 9)
    r = apply_placeholder(s, 6, 2)
    assert r.accepted and r.state == s


def test_placeholder_below_previous_is_rejected_and_changes_nothing() -> None:
    s = _placeholders(5, 9, 12)  # window [9, 12]
    r = apply_placeholder(s, 8, 3)
    assert not r.accepted and r.state == s
    assert apply_placeholder(s, 9, 3).accepted  # lower edge inclusive


def test_advance_epoch_slides_and_is_never_rejected() -> None:
    s = _placeholders(5, 9)
    s2 = apply_advance_epoch(s, 20, 2)
    assert window(s2) == (9, 20) and s2.window_offset == 2
    assert apply_advance_epoch(s2, 1, 3) == s2  # below: a no-op, not an error
    assert window(apply_advance_epoch(INITIAL, 4, 0)) == (4, 4)


def test_reconciled_raises_floor_only_at_window_offset() -> None:
    s = _placeholders(5, 9, 12)  # window offset 2, previous 9
    assert apply_reconciled(s, 1).min_epoch_lower_bound == 5
    done = apply_reconciled(s, 2)
    assert done.min_epoch_lower_bound == 9 and inactive_epoch(done) == 8


def test_reconciled_offsets_never_move_back() -> None:
    s = apply_reconciled(_placeholders(5), 4, lro=10)
    s2 = apply_reconciled(s, 1, lro=3)
    assert (s2.last_reconciled_log_offset, s2.last_reconciled_offset) == (4, 10)


def test_reconciled_on_empty_partition_leaves_floor_unset() -> None:
    s = apply_reconciled(INITIAL, 5)
    assert s.min_epoch_lower_bound is None and s.last_reconciled_log_offset == 5


def test_start_offset_only_moves_forward() -> None:
    s = apply_set_start_offset(INITIAL, 10)
    assert apply_set_start_offset(s, 3).start_offset == 10


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: apply_placeholder(INITIAL, -1, 0), "epoch"),
        (lambda: apply_placeholder(INITIAL, True, 0), "epoch"),
        (lambda: apply_placeholder(INITIAL, 1, -1), "offset"),
        (lambda: apply_placeholder(_placeholders(1, 2), 3, 1), "offset"),  # not after offset 1
        (lambda: apply_advance_epoch(INITIAL, 1.5, 0), "epoch"),  # type: ignore[arg-type]
        (lambda: apply_reconciled(INITIAL, -2), "lrlo"),
        (lambda: apply_reconciled(INITIAL, 0, lro=-2), "lro"),
        (lambda: apply_set_start_offset(INITIAL, -1), "start_offset"),
    ],
)
def test_bad_input_names_the_field(call: object, field: str) -> None:
    with pytest.raises(ModelError) as e:
        call()  # type: ignore[operator]
    assert e.value.field == field
