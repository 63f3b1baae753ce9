"""Named variants of the design (spec section V). All share one code path; a variant only
flips the switches below, so a proof about `reference` and a counterexample for a bad
variant are about the same functions."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

from epochgc.model.errors import ModelError


class FenceRule(Enum):
    """Which admission rule the leader's fence runs (spec section 6, "Production's rules")."""

    REFERENCE = "reference"  # this project's rule (R9-R12)
    JANUARY = "january"  # merged (#29218, #29405): [previous, max_seen), seen kept apart
    FEBRUARY = "february"  # merged (#29570): the seen window scoped to its term, no slide
    JULY = "july"  # merged (#31110): February, below the seen max only with applied evidence
    AUGUST = "august"  # a proposal (#31149, #31493, closed without merge)


@dataclass(frozen=True)
class Variant:
    name: str
    # Apply time (the replicated state machine).
    apply_time_check: bool = True  # reject placeholders below previous_applied_epoch
    single_epoch: bool = False  # strict: accept only e >= max, window collapses to [e, e]
    # Fence (the leader's in-memory layer).
    fence_lo_from_applied: bool = True  # lo = max(seen.previous, previous_applied)
    term_scoped_seen: bool = True  # the seen window counts only in its own term
    collapse_first_slide: bool = False  # first slide of a term/after restart -> [e, e]
    # Watermark and cluster GC epoch.
    watermark_from_max: bool = False  # M(p) = max_applied - 1 (F5)
    skip_missing: bool = False  # absent partitions are skipped instead of blocking (F4)
    cap_at_revision: bool = True  # M <= snapshot revision (F4, late partitions)
    empty_is_nothing: bool = False  # old R19: an empty snapshot collects nothing (F7)
    # Production's rules since the design notes (issue 30).
    fence_rule: FenceRule = FenceRule.REFERENCE
    followers_slide: bool = False  # every replica slides its seen window when it applies
    # The fence's units are released once the placeholder is queued into Raft, not when
    # its replicate ends (assumption: within a term, queue order is log order).
    release_at_enqueue: bool = False
    # A placeholder outside the applied window crashes the replica at apply (and again on
    # every replay of that entry) instead of being rejected as a no-op.
    assert_at_apply: bool = False
    # Epoch barrier (R37): a placeholder at or below the barrier's candidate is refused
    # at apply. Off: production's barrier, safe only if the drain left nothing in flight.
    barrier_apply_check: bool = True


def with_release_at_enqueue(v: Variant) -> Variant:
    """The same variant with release-at-enqueue (named `<name>-enqueue`)."""
    return replace(v, name=f"{v.name}-enqueue", release_at_enqueue=True)


REFERENCE = Variant("reference")

VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        REFERENCE,
        Variant("strict", single_epoch=True),
        Variant("fence-only", apply_time_check=False, fence_lo_from_applied=False),
        Variant(
            "untermed",
            apply_time_check=False,
            fence_lo_from_applied=False,
            term_scoped_seen=False,
        ),
        Variant("watermark-from-max", watermark_from_max=True),
        Variant("skip-missing", skip_missing=True),
        Variant("uncapped", cap_at_revision=False),
        Variant("collapse", collapse_first_slide=True),
        Variant("empty-is-nothing", empty_is_nothing=True),
        Variant("barrier-prod", barrier_apply_check=False),
    )
}

# Production's fence rules as merged (issue 39; spec section 6, "Production's rules"),
# each with our apply-time rejection (so "never deletes in-use data" is about the same RSM
# as reference) and each also with release-at-enqueue. The rules are restated in
# `model/prodrules.py`, which cites the code each restates. `assert-at-apply` is what
# production runs today (July + release at enqueue, #31386) with production's assertion at
# apply (`epoch_window_checker::check_epoch`'s vassert) instead of our rejection.
_PROD = (
    # January (#29218, #29405): the seen window kept apart from the applied one, whatever its
    # term; every replica's apply path slides it too.
    Variant("prod-january", fence_rule=FenceRule.JANUARY, fence_lo_from_applied=False,
            term_scoped_seen=False, followers_slide=True),
    # February (#29570): `_seen_window_term`; apply no longer touches the seen window.
    Variant("prod-february", fence_rule=FenceRule.FEBRUARY, fence_lo_from_applied=False),
    # July (#31110, merged 2026-07-16): February plus "applied evidence" below the seen max.
    Variant("prod-july", fence_rule=FenceRule.JULY, fence_lo_from_applied=False),
)
# "August" (#31149, #31493) was proposed and closed without merge: a named proposal.
_PROPOSALS = (
    Variant("proposal-august", fence_rule=FenceRule.AUGUST, fence_lo_from_applied=False),
)
PROD_VARIANTS: tuple[str, ...] = (
    *(n for v in (*_PROD, *_PROPOSALS) for n in (v.name, f"{v.name}-enqueue")),
    "assert-at-apply")
# What production runs today: July with release at enqueue (#31386, merged 2026-07-31).
PRODUCTION_TODAY = "prod-july-enqueue"
VARIANTS.update({v.name: v for v in (*_PROD, *_PROPOSALS)})
VARIANTS.update({f"{v.name}-enqueue": with_release_at_enqueue(v) for v in (*_PROD, *_PROPOSALS)})
VARIANTS["reference-enqueue"] = with_release_at_enqueue(REFERENCE)
VARIANTS["assert-at-apply"] = replace(VARIANTS[PRODUCTION_TODAY], name="assert-at-apply",
                                      assert_at_apply=True)

# Production's rules with our apply-time rejection: the spec claims ours ("never deletes
# in-use data") for each, proved by model/system.py's own induction under each
# (`proofs/runner.py`, task_induction_prod); each `-enqueue` twin shares those rows.
PROD_SAFE = ("prod-january", "prod-february", "prod-july", "proposal-august")

# Variants the spec expects to be safe; every other one has a counterexample (spec V*).
SAFE_VARIANTS = ("reference", "strict", "collapse")


def variant(name: str) -> Variant:
    try:
        return VARIANTS[name]
    except KeyError:
        known = ", ".join(sorted(VARIANTS))
        raise ModelError("variant", "name", f"unknown variant {name!r} (known: {known})") from None
