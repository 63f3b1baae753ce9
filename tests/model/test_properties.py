"""Hypothesis properties of the model over random command sequences (spec I1-I4, R23)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from epochgc.model.cluster import Report, gc_epoch, partition_epochs
from epochgc.model.fence import SeenWindow, fence
from epochgc.model.keys import format_key, gc_eligible, parse_key
from epochgc.model.logic import le_opt
from epochgc.model.partition import (
    INITIAL,
    PartitionState,
    accepts,
    apply_advance_epoch,
    apply_placeholder,
    apply_reconciled,
    inactive_epoch,
)
from epochgc.model.variants import VARIANTS, Variant

SETTINGS = settings(max_examples=150, deadline=None)
epochs = st.integers(0, 40)


@dataclass(frozen=True)
class Cmd:
    kind: str  # placeholder | advance | reconcile
    epoch: int  # the epoch, or for reconcile the LRLO asked for
    gap: int  # log offsets skipped before an apply (other commands in the log)


# Placeholders carry any epoch: a write fenced long ago by some leader may land at any time
# (system.late_land), so safety must not depend on the fence.
commands = st.lists(
    st.builds(Cmd, st.sampled_from(["placeholder", "advance", "reconcile"]), epochs,
              st.integers(0, 2)),
    max_size=40,
)
variants = st.sampled_from(sorted(VARIANTS))


def _run(cmds: list[Cmd], v: Variant) -> list[tuple[PartitionState, Cmd, int, bool | None]]:
    """Apply commands in log order; per step: (state before, command, log offset or -1,
    accepted or None), then a final (state, end marker, -1, None)."""
    s, next_off = INITIAL, 0
    out: list[tuple[PartitionState, Cmd, int, bool | None]] = []
    for c in cmds:
        before, off, accepted = s, -1, None
        if c.kind == "reconcile":  # the reconciler never passes the log end (A4)
            s = apply_reconciled(s, min(c.epoch, next_off - 1))
        else:
            off = next_off + c.gap
            next_off = off + 1
            if c.kind == "placeholder":
                r = apply_placeholder(s, c.epoch, off, v)
                s, accepted = r.state, r.accepted
            else:
                s = apply_advance_epoch(s, c.epoch, off, v)
        out.append((before, c, off, accepted))
    out.append((s, Cmd("end", 0, 0), -1, None))
    return out


@SETTINGS
@given(commands, variants)
def test_monotone_and_well_formed(cmds: list[Cmd], name: str) -> None:
    v = VARIANTS[name]
    trace = [s for s, _, _, _ in _run(cmds, v)]
    for a, b in itertools.pairwise(trace):
        assert le_opt(a.max_applied_epoch, b.max_applied_epoch)
        assert le_opt(a.min_epoch_lower_bound, b.min_epoch_lower_bound)
        assert le_opt(inactive_epoch(a, v), inactive_epoch(b, v))
        assert a.last_reconciled_log_offset <= b.last_reconciled_log_offset
    for s in trace:
        if s.max_applied_epoch is not None:
            assert s.previous_applied_epoch is not None
            assert s.previous_applied_epoch <= s.max_applied_epoch
            assert s.min_epoch_lower_bound is not None
            assert s.min_epoch_lower_bound <= s.previous_applied_epoch


@SETTINGS
@given(commands, st.sampled_from(["reference", "strict", "collapse"]))
def test_accepted_placeholders_never_below_previous(cmds: list[Cmd], name: str) -> None:
    for before, c, _, accepted in _run(cmds, VARIANTS[name]):
        if accepted and before.previous_applied_epoch is not None:
            assert c.epoch >= before.previous_applied_epoch
        if accepted is not None:
            assert accepted == accepts(before, c.epoch, VARIANTS[name])


def _exposed(cmds: list[Cmd], v: Variant) -> list[int]:
    """Epochs of accepted placeholders the reconciler has not passed that M(p) covers
    (each one is an object a GC round could delete while it is still referenced)."""
    trace = _run(cmds, v)
    final = trace[-1][0]
    m = inactive_epoch(final, v)
    return [
        c.epoch
        for _, c, off, accepted in trace[:-1]
        if accepted and off > final.last_reconciled_log_offset and m is not None and c.epoch <= m
    ]


@SETTINGS
@given(commands, st.sampled_from(["reference", "strict", "collapse"]))
def test_unreconciled_accepted_placeholders_stay_above_watermark(
    cmds: list[Cmd], name: str
) -> None:
    """The heart of safety at partition level: M(p) stays below every accepted placeholder
    that the reconciler has not passed."""
    assert _exposed(cmds, VARIANTS[name]) == []


def test_watermark_property_is_not_vacuous() -> None:
    """The same check catches F1 (fence-only) and F5 (watermark-from-max)."""
    f1 = [Cmd("placeholder", e, 0) for e in (10, 12, 13, 11)] + [Cmd("reconcile", 2, 0)]
    assert _exposed(f1, VARIANTS["reference"]) == []
    assert _exposed(f1, VARIANTS["fence-only"]) == [11]
    f5 = [Cmd("placeholder", 5, 0), Cmd("placeholder", 7, 0)]
    assert _exposed(f5, VARIANTS["watermark-from-max"]) == [5]


@SETTINGS
@given(st.data(), st.integers(0, 5), st.integers(0, 50))
def test_fence_window_contains_admitted_epoch(data: st.DataObject, term: int, e: int) -> None:
    seen = data.draw(st.none() | st.builds(
        lambda t, a, b: SeenWindow(t, min(a, b), max(a, b)), st.integers(0, 5), epochs, epochs))
    applied = INITIAL
    for off, x in enumerate(data.draw(st.lists(epochs, max_size=4))):
        applied = apply_placeholder(applied, x, off).state
    r = fence(seen, applied, term, e)
    assert r.window is not None and r.window[0] <= r.window[1]
    assert r.admitted == (r.window[0] <= e <= r.window[1])
    if r.seen is not None:
        assert r.seen.previous <= r.seen.max


reports = st.lists(
    st.builds(Report, st.sampled_from(["a", "b", "c"]), st.sampled_from(["r0", "r1", "r2"]),
              st.none() | st.integers(-1, 60)),
    max_size=9,
    unique_by=lambda r: (r.partition, r.replica),
)


@SETTINGS
@given(st.integers(0, 60), st.lists(st.sampled_from(["a", "b", "c"]), unique=True), reports)
def test_gc_epoch_bounds(rev: int, parts: list[str], reps: list[Report]) -> None:
    g = gc_epoch(rev, parts, reps)
    best = partition_epochs(parts, reps)
    if g.M is None:
        assert not parts or g.blocked is not None
        return
    assert g.blocked is None and rev >= g.M
    for p in parts:
        mp = best[p]
        assert mp is not None and mp >= g.M
        # a per-partition max: no reported value of p is above its partition epoch
        assert all(r.inactive_epoch is None or r.inactive_epoch <= mp
                   for r in reps if r.partition == p)


@SETTINGS
@given(st.integers(0, 999), st.integers(0, 10**18 - 1), st.none() | st.integers(-1, 10**18),
       st.floats(0, 1e6), st.floats(0, 1e6))
def test_eligibility_formula(prefix: int, e: int, m: int | None, age: float, grace: float) -> None:
    key = format_key(prefix, e, "obj")
    assert parse_key(key).epoch == e
    r = gc_eligible(key, age, m, grace)
    assert r.error is None
    assert r.eligible == (m is not None and e <= m and age >= grace)
