"""Named variants of the design (spec section V). All share one code path; a variant only
flips the switches below, so a proof about `reference` and a counterexample for a bad
variant are about the same functions."""

from __future__ import annotations

from dataclasses import dataclass

from epochgc.model.errors import ModelError


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
    # Epoch barrier (R37): a placeholder at or below the barrier's candidate is refused
    # at apply. Off: production's barrier, safe only if the drain left nothing in flight.
    barrier_apply_check: bool = True


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

# Variants the spec expects to be safe; every other one has a counterexample (spec V*).
SAFE_VARIANTS = ("reference", "strict", "collapse")


def variant(name: str) -> Variant:
    try:
        return VARIANTS[name]
    except KeyError:
        known = ", ".join(sorted(VARIANTS))
        raise ModelError("variant", "name", f"unknown variant {name!r} (known: {known})") from None
