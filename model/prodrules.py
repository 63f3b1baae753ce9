"""Production's fence admission rules (issue 39; spec section 6, "Production's rules"),
restated from production's merged code in our own words. Like `model.fence.fence` they
decide admission only; what reaches the log is checked at apply.

Sources (redpanda-data/redpanda, `src/v/cloud_topics/level_zero/stm/`):

- `ctp_stm_state.cc` at commit 6ad594d92dc7c1b969ffe6125a606fdf526625d9 (February's rule,
  after #29570; before #31110): `advance_max_seen_epoch` lines 18-30,
  `get_previous_seen_epoch` 57-63, `epoch_in_window` 65-83, `epoch_above_window` 85-95,
  `advance_epoch` 102-116 (the apply path: the applied window only).
- `ctp_stm.cc` at the same commit: `ctp_stm::fence_epoch` (in window: one shared unit;
  above it: the whole semaphore, `advance_max_seen_epoch`, demoted to one unit; else
  `stale_cluster_epoch` with `[previous_seen(term) ?? previous_applied, max_seen(term) ??
  max_applied]`) and `epoch_window_checker::check_epoch` (the vassert at apply).
- #31110 (merged 2026-07-16; diff `@@ -79,7 +79,35 @@ bool ctp_stm_state::epoch_in_window`):
  the term's branch of `epoch_in_window` admits a below-max epoch only with applied
  evidence; `if (!_max_applied_epoch.has_value()) return false;`.
- January (#29218, #29405; merged 2026-01): our reading of the PRs (the seen and applied
  windows kept apart, `advance_epoch` also moving the seen window); the code of that
  month is not in the stored snapshot (see the issue 39 report).

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
    """July's applied evidence for an epoch below the seen max `hi` (#31110, the lines
    after `if (epoch == end) return true;`): with nothing applied there is none
    (`if (!_max_applied_epoch.has_value()) return false;`); an applied max below `hi` is
    evidence; an applied max equal to `hi` is evidence only when the applied window did not
    collapse (`_previous_applied_epoch.value_or(end) < end`); an applied max above `hi`
    is none."""
    m, p = applied.max_applied_epoch, applied.previous_applied_epoch
    if m is None:
        return False
    if m < hi:
        return True
    return m == hi and (hi if p is None else p) < hi


def seen_kept_apart(
    seen: SeenWindow | None, applied: PartitionState, term: int, epoch: int, v: Variant
) -> FenceResult:
    """January: the window is the node's seen window alone, whatever its term (followers
    keep theirs current by sliding on apply), or the applied window when the node has
    none. Admitted in the shared mode when `previous <= e < max_seen`; `e >= max_seen`
    takes the exclusive lock and slides to `[max_seen, e]` (a first window is `[e, e]`);
    below `previous`: rejected."""
    base = (seen.previous, seen.max) if seen is not None else _applied(applied)
    if base is None:
        new = SeenWindow(term, epoch, epoch)
        return FenceResult(True, (epoch, epoch), new, exclusive=True)
    lo, hi = base
    if epoch >= hi:
        new = SeenWindow(term, hi, epoch) if epoch > hi else SeenWindow(term, lo, hi)
        return FenceResult(True, (new.previous, new.max), new, exclusive=True)
    if epoch >= lo:
        return FenceResult(True, (lo, hi), seen)
    return FenceResult(False, (lo, hi), seen)


def advance_max_seen(seen: SeenWindow | None, term: int, epoch: int) -> SeenWindow | None:
    """`advance_max_seen_epoch` (lines 18-30): only when `term >= _seen_window_term` and
    `epoch > _max_seen_epoch` (none is below every epoch); a newer term resets the window
    to `[e, e]`, the same term slides it to `[max, e]`. Otherwise nothing changes, so a
    newer term's bump at or below an older term's stale max leaves that window in place
    (the case #31168 described; it was closed without merge)."""
    if seen is not None and (term < seen.term or epoch <= seen.max):
        return seen
    if seen is None or term > seen.term:
        return SeenWindow(term, epoch, epoch)
    return SeenWindow(term, seen.max, epoch)


def term_window(
    seen: SeenWindow | None, applied: PartitionState, term: int, epoch: int, v: Variant
) -> FenceResult:
    """February (#29570) and July (#31110), `ctp_stm::fence_epoch`. The seen window counts
    only in its own term (`term > _seen_window_term`: the applied window decides, lines
    68-72 and 88-91). In the window (`epoch_in_window`): admitted in the shared mode
    (July: below the seen max only with `_evidence`). Above it (`epoch_above_window`):
    admitted with the exclusive lock, `advance_max_seen`. Otherwise rejected, reporting
    `[previous_seen(term) ?? previous_applied, max_seen(term) ?? max_applied]`."""
    visible = seen is not None and term <= seen.term
    w = _applied(applied)
    if seen is not None and visible:
        lo, hi = seen.previous, seen.max
        inside = lo <= epoch <= hi and (
            v.fence_rule is not FenceRule.JULY or epoch == hi or _evidence(applied, hi))
        above = epoch > hi
        shown: tuple[int, int] | None = (lo, hi)
    else:
        inside = w is not None and w[0] <= epoch <= w[1]
        above = w is None or epoch > w[1]
        shown = w
    if inside:
        return FenceResult(True, shown, seen)
    if above:
        new = advance_max_seen(seen, term, epoch)
        # The window the next fence of this term reads: the new seen window, or (a stale
        # older term's window left in place) the applied one.
        win = (new.previous, new.max) if new is not None and new.term >= term else w
        return FenceResult(True, win, new, exclusive=True)
    return FenceResult(False, shown, seen)


def per_term(
    seen: SeenWindow | None, applied: PartitionState, term: int, epoch: int, v: Variant
) -> FenceResult:
    """"August", a proposal (#31149, #31493; both closed without merge): the seen window counts
    only in its own term. With none in this term, the applied window decides: below it
    rejected, inside it admitted (shared), above it admitted with the seen window reset to
    `[e, e]` (exclusive; our reading of "a new term always resets it to [e, e]": the reset
    is the new term's first slide). In the term: above the max, slide to `[max, e]`
    (exclusive); the two edges admitted (shared); an interior epoch admitted in the shared
    mode unless a bump is pending (applied max below the seen max), then only by raising the
    seen lower edge to it (exclusive); below the lower edge rejected."""
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
    if v.fence_rule is FenceRule.JANUARY:
        return seen_kept_apart(seen, applied, term, epoch, v)
    return term_window(seen, applied, term, epoch, v)


def follower_slide(seen: SeenWindow | None, epoch: int) -> SeenWindow | None:
    """A replica applying a placeholder slides its seen window up to its epoch (January only:
    February's `advance_epoch`, lines 102-116, no longer touches the seen window); a node
    without one keeps none (its fence then reads the applied window)."""
    if seen is None or epoch <= seen.max:
        return seen
    return SeenWindow(seen.term, seen.max, epoch)
