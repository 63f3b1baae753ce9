"""The per-partition window state machine, applied in log order on every replica
(spec R1-R10). Pure functions: a frozen state in, a new frozen state out.

Absent values are `None`; offsets that have not happened yet are -1 (nothing reconciled).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import cast

from epochgc.model.errors import ModelError, require_int
from epochgc.model.logic import (
    any_of,
    le_opt,  # noqa: F401 (used by the PEP 316 contracts)
)
from epochgc.model.variants import REFERENCE, Variant


@dataclass(frozen=True)
class PartitionState:
    max_applied_epoch: int | None = None
    previous_applied_epoch: int | None = None
    min_epoch_lower_bound: int | None = None
    window_offset: int | None = None  # log offset where max_applied_epoch was applied
    last_reconciled_offset: int = -1  # LRO, in record offsets
    last_reconciled_log_offset: int = -1  # LRLO, in log offsets
    start_offset: int = 0
    # The epoch barrier (R36-R38): the highest advance_gc_epoch candidate applied and the
    # log offset of its command (the *pending* safe epoch), and the safe epoch promoted
    # from it once LRLO reached that offset. -1: none (like LRLO's "nothing yet"; every
    # epoch, >= 0, is above it), so the proofs need no case split on them.
    barrier_epoch: int = -1
    barrier_offset: int = -1
    gc_safe_epoch: int = -1


INITIAL = PartitionState()


@dataclass(frozen=True)
class Applied:
    state: PartitionState
    accepted: bool
    # assert-at-apply: the placeholder was outside the window and the replica crashed on it
    # (nothing applied; replaying the entry crashes again).
    crashed: bool = False


def well_formed(state: PartitionState) -> bool:
    """The shape every reachable state has (spec I3): the four window fields are set
    together, floor <= previous <= max, offsets in range."""
    fields = (state.max_applied_epoch, state.previous_applied_epoch,
              state.min_epoch_lower_bound, state.window_offset)
    if state.last_reconciled_log_offset < -1 or state.last_reconciled_offset < -1:
        return False
    if not _barrier_well_formed(state):
        return False
    if all(f is None for f in fields):
        return True
    if any(f is None for f in fields):
        return False
    assert state.max_applied_epoch is not None and state.previous_applied_epoch is not None
    assert state.min_epoch_lower_bound is not None and state.window_offset is not None
    return (
        0 <= state.min_epoch_lower_bound <= state.previous_applied_epoch
        <= state.max_applied_epoch
        and state.window_offset >= 0
    )


def _barrier_well_formed(state: PartitionState) -> bool:
    """R36-R38: none (-1) or a pending epoch with its command's offset; a promoted safe
    epoch has a pending one at or above it."""
    if state.barrier_epoch < 0:
        return state.gc_safe_epoch < 0
    return state.barrier_offset >= 0 and state.gc_safe_epoch <= state.barrier_epoch


def window(state: PartitionState) -> tuple[int, int] | None:
    """The applied admission window [previous_applied_epoch, max_applied_epoch]."""
    if state.max_applied_epoch is None or state.previous_applied_epoch is None:
        return None
    return (state.previous_applied_epoch, state.max_applied_epoch)


def accepts(state: PartitionState, epoch: int, variant: Variant = REFERENCE) -> bool:
    """Would a placeholder with this epoch be accepted if it were applied now (R3)?

    Monotone: once False for an epoch it stays False, because the window only moves up.
    """
    if state.max_applied_epoch is None or not variant.apply_time_check:
        return True
    if variant.single_epoch:
        return epoch >= state.max_applied_epoch
    assert state.previous_applied_epoch is not None
    return epoch >= state.previous_applied_epoch


def above_barrier(state: PartitionState, epoch: int, variant: Variant = REFERENCE) -> bool:
    """R37: would a placeholder with this epoch pass the barrier's apply-time check: no
    barrier applied, or above its candidate (always, without `barrier_apply_check`)?
    Monotone like `accepts`: the barrier epoch only moves up."""
    if not variant.barrier_apply_check:
        return True
    return cast(bool, any_of((state.barrier_epoch < 0, epoch > state.barrier_epoch)))


def _check_offset(where: str, state: PartitionState, offset: int) -> None:
    require_int(where, "offset", offset)
    if state.window_offset is not None and offset <= state.window_offset:
        raise ModelError(
            where,
            "offset",
            f"log offsets must increase: {offset} is not after the window offset "
            f"{state.window_offset}",
        )


def _slide(state: PartitionState, epoch: int, offset: int, variant: Variant) -> PartitionState:
    """Move max_applied_epoch up to `epoch` (caller checked it is above), R2."""
    if state.max_applied_epoch is None:
        return replace(
            state,
            max_applied_epoch=epoch,
            previous_applied_epoch=epoch,
            min_epoch_lower_bound=epoch,
            window_offset=offset,
        )
    previous = epoch if variant.single_epoch else state.max_applied_epoch
    return replace(
        state, max_applied_epoch=epoch, previous_applied_epoch=previous, window_offset=offset
    )


def apply_placeholder(
    state: PartitionState, epoch: int, offset: int, variant: Variant = REFERENCE
) -> Applied:
    """R3: accepted iff nothing was applied yet or `epoch >= previous_applied_epoch`, and
    (R37) above the barrier's candidate; a rejected placeholder changes nothing. An
    accepted epoch above max slides the window.

    pre: well_formed(state)
    raises: ModelError
    post: well_formed(__return__.state)
    post: le_opt(state.max_applied_epoch, __return__.state.max_applied_epoch)
    post: le_opt(state.min_epoch_lower_bound, __return__.state.min_epoch_lower_bound)
    post: __return__.accepted or __return__.state == state
    post: not (__return__.accepted and variant.apply_time_check) or accepts(state, epoch)
    post: not __return__.crashed or not accepts(state, epoch, variant)
    """
    require_int("apply_placeholder", "epoch", epoch)
    _check_offset("apply_placeholder", state, offset)
    if not accepts(state, epoch, variant):
        return Applied(state, False, crashed=variant.assert_at_apply)
    if not above_barrier(state, epoch, variant):  # R37: ours only, never a crash
        return Applied(state, False)
    if state.max_applied_epoch is None or epoch > state.max_applied_epoch:
        return Applied(_slide(state, epoch, offset, variant), True)
    return Applied(state, True)


def apply_advance_epoch(
    state: PartitionState, epoch: int, offset: int, variant: Variant = REFERENCE
) -> PartitionState:
    """R4: the same slide as a placeholder, never rejected; a no-op unless above max.

    pre: well_formed(state)
    raises: ModelError
    post: well_formed(__return__)
    post: le_opt(state.max_applied_epoch, __return__.max_applied_epoch)
    post: le_opt(state.min_epoch_lower_bound, __return__.min_epoch_lower_bound)
    """
    require_int("apply_advance_epoch", "epoch", epoch)
    _check_offset("apply_advance_epoch", state, offset)
    if state.max_applied_epoch is None or epoch > state.max_applied_epoch:
        return _slide(state, epoch, offset, variant)
    return state


def apply_reconciled(
    state: PartitionState, lrlo: int, lro: int | None = None
) -> PartitionState:
    """R5: LRLO (and LRO) only move forward; once LRLO reaches the window offset every
    placeholder applied before the current window is reconciled, so the floor rises to
    previous_applied_epoch.

    pre: well_formed(state)
    raises: ModelError
    post: well_formed(__return__)
    post: __return__.last_reconciled_log_offset >= state.last_reconciled_log_offset
    post: le_opt(state.min_epoch_lower_bound, __return__.min_epoch_lower_bound)
    """
    require_int("apply_reconciled", "lrlo", lrlo, minimum=-1)
    new_lrlo = max(state.last_reconciled_log_offset, lrlo)
    new_lro = state.last_reconciled_offset
    if lro is not None:
        require_int("apply_reconciled", "lro", lro, minimum=-1)
        new_lro = max(new_lro, lro)
    out = replace(state, last_reconciled_log_offset=new_lrlo, last_reconciled_offset=new_lro)
    if state.window_offset is not None and state.window_offset <= new_lrlo:
        out = replace(out, min_epoch_lower_bound=state.previous_applied_epoch)
    if state.barrier_offset <= new_lrlo:  # (none: -1 <= LRLO, and -1 stays -1)
        # R38: every entry before the barrier's command is reconciled, and every
        # placeholder after it is above the candidate (R37): promote the pending epoch.
        out = replace(out, gc_safe_epoch=state.barrier_epoch)
    return out


def apply_advance_gc_epoch(state: PartitionState, epoch: int, offset: int) -> PartitionState:
    """R36: the barrier's command: `epoch` becomes the pending safe epoch, at `offset`,
    if it is above the one pending (it ratchets; a lower or equal one is a no-op). It is
    promoted by `apply_reconciled` once LRLO reaches `offset` (R38), never here.

    pre: well_formed(state)
    raises: ModelError
    post: well_formed(__return__)
    post: le_opt(state.barrier_epoch, __return__.barrier_epoch)
    post: __return__.gc_safe_epoch == state.gc_safe_epoch
    """
    require_int("apply_advance_gc_epoch", "epoch", epoch)
    _check_offset("apply_advance_gc_epoch", state, offset)
    if epoch > state.barrier_epoch:
        return replace(state, barrier_epoch=epoch, barrier_offset=offset)
    return state


def apply_set_start_offset(state: PartitionState, start_offset: int) -> PartitionState:
    """R6: the start offset only moves forward (prefix truncation)."""
    require_int("apply_set_start_offset", "start_offset", start_offset)
    return replace(state, start_offset=max(state.start_offset, start_offset))


def _floor_or_barrier(m: int, state: PartitionState) -> bool:
    """M(p) is the promoted barrier epoch, or (floor - 1) below max_applied_epoch."""
    return m == state.gc_safe_epoch or (
        state.max_applied_epoch is not None and m < state.max_applied_epoch)


def inactive_epoch(state: PartitionState, variant: Variant = REFERENCE) -> int | None:
    """R7: M(p) = min_epoch_lower_bound - 1: every epoch <= M(p) is no longer referenced
    by this partition; R38: or the promoted barrier epoch, when higher. None while no
    epoch was ever applied and no barrier promoted.

    pre: well_formed(state)
    post: __return__ is None or variant.watermark_from_max or _floor_or_barrier(__return__, state)
    """
    if variant.watermark_from_max:
        return None if state.max_applied_epoch is None else state.max_applied_epoch - 1
    g = state.gc_safe_epoch if state.gc_safe_epoch >= 0 else None
    if state.min_epoch_lower_bound is None:
        return g
    m = state.min_epoch_lower_bound - 1
    if g is None or g <= m:
        return m
    return g
