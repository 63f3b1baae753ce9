"""Flat-input harnesses for CrossHair (checked beside the model's own PEP 316 contracts).

CrossHair spends most of a budget building dataclass inputs that pass a `well_formed`
precondition, and in `gc_epoch` its input validation (string ids, duplicate checks) even
made CrossHair report "Confirmed over all paths" for a broken revision cap. Here every
input is a plain int (or an optional one) and the precondition is the shape itself, so the
same postconditions are searched in a fraction of the budget: a seeded break of
`apply_reconciled`'s well-formedness or of the cap is found in about a second.
"""

from __future__ import annotations

from epochgc.model.cluster import GcEpoch, Report, gc_epoch_of_valid
from epochgc.model.errors import ModelError  # noqa: F401 (named by the contracts)
from epochgc.model.logic import le_opt  # noqa: F401 (named by the contracts)
from epochgc.model.partition import (
    PartitionState,
    apply_advance_epoch,  # noqa: F401 (named by the contracts)
    apply_placeholder,
    apply_reconciled,
    inactive_epoch,
    well_formed,  # noqa: F401 (named by the contracts)
)


def _state(windowed: bool, maxe: int, prev: int, floor: int, woff: int, lrlo: int,
           lro: int) -> PartitionState:
    if not windowed:
        return PartitionState(last_reconciled_offset=lro, last_reconciled_log_offset=lrlo)
    return PartitionState(maxe, prev, floor, woff, lro, lrlo)


def reconciled(windowed: bool, maxe: int, prev: int, floor: int, woff: int, lrlo: int,
               lro: int, new_lrlo: int) -> tuple[PartitionState, PartitionState]:
    """apply_reconciled on every well-formed state shape.

    pre: 0 <= floor <= prev <= maxe and woff >= 0 and lrlo >= -1 and lro >= -1
    raises: ModelError
    post: well_formed(__return__[1])
    post: __return__[1].last_reconciled_log_offset >= lrlo
    post: le_opt(__return__[0].min_epoch_lower_bound, __return__[1].min_epoch_lower_bound)
    post: __return__[1].min_epoch_lower_bound is None or __return__[1].min_epoch_lower_bound <= prev
    """
    st = _state(windowed, maxe, prev, floor, woff, lrlo, lro)
    return st, apply_reconciled(st, new_lrlo)


def placeholder(windowed: bool, maxe: int, prev: int, floor: int, woff: int, lrlo: int,
                lro: int, epoch: int, offset: int) -> tuple[PartitionState, PartitionState, bool]:
    """apply_placeholder and apply_advance_epoch on every well-formed state shape.

    pre: 0 <= floor <= prev <= maxe and woff >= 0 and lrlo >= -1 and lro >= -1
    raises: ModelError
    post: well_formed(__return__[1])
    post: le_opt(__return__[0].max_applied_epoch, __return__[1].max_applied_epoch)
    post: le_opt(__return__[0].min_epoch_lower_bound, __return__[1].min_epoch_lower_bound)
    post: __return__[2] or __return__[1] == __return__[0]
    post: well_formed(apply_advance_epoch(__return__[0], epoch, offset))
    """
    st = _state(windowed, maxe, prev, floor, woff, lrlo, lro)
    r = apply_placeholder(st, epoch, offset)
    return st, r.state, r.accepted


def watermark(maxe: int, prev: int, floor: int, woff: int) -> int | None:
    """M(p) is below every epoch the window still accepts.

    pre: 0 <= floor <= prev <= maxe and woff >= 0
    post: __return__ is not None and __return__ < floor
    """
    return inactive_epoch(PartitionState(maxe, prev, floor, woff))


def capped(rev: int, a: int | None, b: int | None, c: int | None) -> GcEpoch:
    """M over two partitions (p0 with two replicas), capped by the snapshot revision.

    pre: rev >= 0 and all(x is None or x >= -1 for x in (a, b, c))
    post: __return__.M is None or __return__.M <= rev
    post: __return__.blocked is None or __return__.M is None
    post: __return__.M is None or (c is not None and __return__.M <= c)
    """
    reps = [Report("p0", "r0", a), Report("p0", "r1", b), Report("p1", "r0", c)]
    return gc_epoch_of_valid(rev, ["p0", "p1"], reps)
