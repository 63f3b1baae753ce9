"""Production's fence admission rules since the design notes (issue 30; spec section 6,
"Production's rules"), written from the rules' statements in our own words. Like
`model.fence.fence` they decide admission only; what reaches the log is checked at apply.

Every rule reads the leader's seen window and the applied window and answers a
`FenceResult`; `exclusive` says the decision took the exclusive lock (it slid or raised
the seen window), which `model.ordered` uses for the lock discipline.
"""

from __future__ import annotations

from epochgc.model.fence import FenceResult, SeenWindow
from epochgc.model.partition import PartitionState
from epochgc.model.variants import FenceRule, Variant


def _applied(applied: PartitionState) -> tuple[int, int] | None:
    if applied.max_applied_epoch is None or applied.previous_applied_epoch is None:
        return None
    return (applied.previous_applied_epoch, applied.max_applied_epoch)


def _evidence(applied: PartitionState, hi: int) -> bool:
    """July's "applied evidence" for an epoch below the seen max: the applied max is below
    the seen max (nothing applied counts as below), or the applied window is not
    collapsed."""
    w = _applied(applied)
    return w is None or w[1] < hi or w[0] < w[1]


def seen_kept_apart(
    seen: SeenWindow | None, applied: PartitionState, term: int, epoch: int, v: Variant
) -> FenceResult:
    """January (and July): the window is the node's seen window alone, whatever its term
    (followers keep theirs current by sliding on apply), or the applied window when the
    node has none. Admitted in the shared mode when `previous <= e < max_seen` (July: only
    with applied evidence, else rejected); `e >= max_seen` takes the exclusive lock and
    slides to `[max_seen, e]` (a first window is `[e, e]`); below `previous`: rejected."""
    base = (seen.previous, seen.max) if seen is not None else _applied(applied)
    if base is None:
        new = SeenWindow(term, epoch, epoch)
        return FenceResult(True, (epoch, epoch), new, exclusive=True)
    lo, hi = base
    if epoch >= hi:
        new = SeenWindow(term, hi, epoch) if epoch > hi else SeenWindow(term, lo, hi)
        return FenceResult(True, (new.previous, new.max), new, exclusive=True)
    if epoch >= lo and (v.fence_rule is not FenceRule.JULY or _evidence(applied, hi)):
        return FenceResult(True, (lo, hi), seen)
    return FenceResult(False, (lo, hi), seen)


def per_term(
    seen: SeenWindow | None, applied: PartitionState, term: int, epoch: int, v: Variant
) -> FenceResult:
    """August: the seen window counts only in its own term. With none in this term, the
    applied window decides: below it rejected, inside it admitted (shared), above it
    admitted with the seen window reset to `[e, e]` (exclusive; our reading of "a new term
    always resets it to [e, e]": the reset is the new term's first slide). In the term:
    above the max, slide to `[max, e]` (exclusive); the two edges admitted (shared); an
    interior epoch admitted in the shared mode unless a bump is pending (applied max below
    the seen max), then only by raising the seen lower edge to it (exclusive); below the
    lower edge rejected."""
    if seen is None or seen.term != term:
        w = _applied(applied)
        if w is not None and epoch < w[0]:
            return FenceResult(False, w, seen)
        if w is not None and epoch <= w[1]:
            return FenceResult(True, w, seen)
        new = SeenWindow(term, epoch, epoch)
        return FenceResult(True, (epoch, epoch), new, exclusive=True)
    lo, hi = seen.previous, seen.max
    if epoch > hi:
        new = SeenWindow(term, hi, epoch)
        return FenceResult(True, (hi, epoch), new, exclusive=True)
    if epoch in (lo, hi):
        return FenceResult(True, (lo, hi), seen)
    if epoch < lo:
        return FenceResult(False, (lo, hi), seen)
    w = _applied(applied)
    if w is None or w[1] < hi:  # a bump is pending: raise the lower edge
        new = SeenWindow(term, epoch, hi)
        return FenceResult(True, (epoch, hi), new, exclusive=True)
    return FenceResult(True, (lo, hi), seen)


def prod_fence(
    seen: SeenWindow | None, applied: PartitionState, term: int, epoch: int, v: Variant
) -> FenceResult:
    """The production rule `v.fence_rule` names (not REFERENCE)."""
    if v.fence_rule is FenceRule.AUGUST:
        return per_term(seen, applied, term, epoch, v)
    return seen_kept_apart(seen, applied, term, epoch, v)


def follower_slide(seen: SeenWindow | None, epoch: int) -> SeenWindow | None:
    """A replica applying a placeholder slides its seen window up to its epoch (January and
    July: "followers slide too"); a node without one keeps none (its fence then reads the
    applied window)."""
    if seen is None or epoch <= seen.max:
        return seen
    return SeenWindow(seen.term, seen.max, epoch)
