"""The leader's fence (spec R8-R12): an in-memory seen window scoped to a term that
decides early admission. It only decides liveness; safety is the apply-time check."""

from __future__ import annotations

from dataclasses import dataclass

from epochgc.model.errors import ModelError, require_int  # noqa: F401 (ModelError: contracts)
from epochgc.model.partition import PartitionState, accepts, well_formed  # noqa: F401 (contracts)
from epochgc.model.variants import REFERENCE, FenceRule, Variant


@dataclass(frozen=True)
class SeenWindow:
    term: int
    previous: int
    max: int


@dataclass(frozen=True)
class FenceResult:
    admitted: bool
    window: tuple[int, int] | None  # the effective window after the decision
    seen: SeenWindow | None  # the leader's seen window after the decision
    exclusive: bool = False  # the decision took the exclusive lock (it moved the window)


def _max_present(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def effective_window(
    seen: SeenWindow | None, applied: PartitionState, term: int, variant: Variant = REFERENCE
) -> tuple[int | None, int | None]:
    """R9: (lo, hi) from the seen window (if it counts in this term) and the applied one."""
    valid = seen is not None and (seen.term == term or not variant.term_scoped_seen)
    s_prev = seen.previous if seen is not None and valid else None
    s_max = seen.max if seen is not None and valid else None
    if variant.fence_lo_from_applied:
        return (
            _max_present(s_prev, applied.previous_applied_epoch),
            _max_present(s_max, applied.max_applied_epoch),
        )
    # Production before its fixes: `previous_seen ?? previous_applied`.
    return (
        s_prev if s_prev is not None else applied.previous_applied_epoch,
        s_max if s_max is not None else applied.max_applied_epoch,
    )


def r8_claimed(variant: Variant) -> bool:
    """Variants whose fence claims R8's admission side: our rule with a term-scoped seen
    window and the applied floor (not `strict`, which admits only at or above the max)."""
    return (variant.fence_rule is FenceRule.REFERENCE and not variant.single_epoch
            and variant.fence_lo_from_applied and variant.term_scoped_seen)


def r8_above(seen: SeenWindow | None, applied: PartitionState, term: int, epoch: int) -> bool:
    """R8's admission side, written apart from `effective_window`: `epoch` is at or above
    the floor of the window that counts in `term` (a seen window of another term does
    not count), or there is no window at all."""
    floors = [f for f in (seen.previous if seen is not None and seen.term == term else None,
                          applied.previous_applied_epoch) if f is not None]
    return not floors or epoch >= max(floors)


def fence(
    seen: SeenWindow | None,
    applied: PartitionState,
    term: int,
    epoch: int,
    variant: Variant = REFERENCE,
) -> FenceResult:
    """R10-R12: admit above the window (sliding the seen window), admit inside it, reject
    below it reporting the window.

    pre: seen is None or seen.previous <= seen.max
    pre: well_formed(applied)
    raises: ModelError
    post: __return__.seen is None or __return__.seen.previous <= __return__.seen.max
    post: __return__.admitted or (__return__.window is not None and epoch < __return__.window[1])
    post: not (__return__.admitted and variant.fence_lo_from_applied) or accepts(applied, epoch)
    post: not r8_claimed(variant) or not r8_above(seen, applied, term, epoch) or __return__.admitted
    """
    require_int("fence", "term", term)
    require_int("fence", "epoch", epoch)
    if variant.fence_rule is not FenceRule.REFERENCE:
        from epochgc.model.prodrules import prod_fence  # imports this module

        return prod_fence(seen, applied, term, epoch, variant)
    valid = seen is not None and (seen.term == term or not variant.term_scoped_seen)
    lo, hi = effective_window(seen, applied, term, variant)
    if hi is None or epoch > hi:
        if variant.single_epoch or (variant.collapse_first_slide and not valid):
            new = SeenWindow(term, epoch, epoch)
        else:
            new = SeenWindow(term, epoch if hi is None else hi, epoch)
        return FenceResult(True, (new.previous, new.max), new, exclusive=True)
    assert lo is not None
    floor = hi if variant.single_epoch else lo
    if epoch >= floor:
        return FenceResult(True, (lo, hi), seen)
    return FenceResult(False, (lo, hi), seen)
