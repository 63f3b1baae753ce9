"""Production's variants' verdicts (proofs/variants_prod.py): shortest counterexamples
really are shortest, the shipped vectors are the ones the search produces, the five-step
shape's verdicts, and a seeded rule bug flips a verdict row."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochgc.model import prodrules
from epochgc.model.fence import FenceResult
from epochgc.model.ordered import quiet
from epochgc.model.variants import variant
from epochgc.proofs import variants_prod as vp
from epochgc.proofs.symsolver import RLIMIT

VECTORS = Path(__file__).resolve().parents[2] / "spec" / "vectors"


@pytest.mark.parametrize("name", ["prod-january", "prod-february", "proposal-august",
                                  "reference"])
def test_shortest_is_shortest(name: str) -> None:
    v = variant(name)
    tr, _ = vp.shortest(v, 5)
    assert tr is not None and len(tr.steps) == vp.EXPECTED[name]
    assert not quiet(tr.states[-1])
    assert vp.shortest(v, 4)[0] is None  # exhaustive to depth 4: nothing shorter


def test_july_as_coded_has_none_within_the_bound_and_is_checked_not_found() -> None:
    rows = vp.task_prod("prod-july")
    assert rows[0].status == "checked" and "no counterexample within 6" in rows[0].name + \
        rows[0].detail
    assert not any(isinstance(o.trace, dict) and o.trace.get("file", "").startswith(
        "prod-shortest-") for o in rows)
    assert not (VECTORS / "prod-shortest-prod-july.jsonl").exists()


@pytest.mark.parametrize("i", range(len(vp.SEPARATING)),
                         ids=[s.name for s in vp.SEPARATING])
def test_separating_traces(i: int) -> None:
    rows = vp.task_separating(i)
    assert [o.status for o in rows] == ["found", "found"], [o.detail for o in rows]


@pytest.mark.parametrize("name", vp.RULES)
def test_rule_vectors_replay_under_their_rule_and_disagree_under_the_others(
        name: str) -> None:
    from epochgc.model.replay import mismatched, replay_file

    (row,) = vp.task_rule_vector(name)
    assert row.status == "found", row.detail
    path = VECTORS / row.trace["file"]
    assert path.read_text(encoding="utf-8") == row.trace["jsonl"]
    assert mismatched(replay_file(path, name)) == []
    assert mismatched(replay_file(path, f"{name}-enqueue")) == []  # no step differs
    for other in vp.RULES:
        if other != name:
            assert mismatched(replay_file(path, other)), other


@pytest.mark.parametrize("name", vp.SEARCHED)
def test_five_step_shape_verdicts(name: str) -> None:
    assert vp.f1_verdict(variant(name))[0] == vp.EXPECTED_F1[name]


@pytest.mark.parametrize("name", ["prod-february", "prod-july-enqueue", "proposal-august",
                                  "assert-at-apply"])
def test_shipped_vectors_are_the_searched_ones(name: str) -> None:
    rows = vp.task_prod(name)
    assert all(o.status == "found" for o in rows), [o.detail for o in rows]
    files = [o.trace for o in rows if isinstance(o.trace, dict)]
    assert len(files) == 2
    for f in files:
        assert (VECTORS / f["file"]).read_text(encoding="utf-8") == f["jsonl"]


def test_a_seeded_rule_bug_flips_a_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    """August without the raise of the lower edge admits the F1 shape's 11."""
    real = prodrules.per_term

    def no_raise(seen, applied, term, epoch, v):  # type: ignore[no-untyped-def]
        r = real(seen, applied, term, epoch, v)
        if r.exclusive and seen is not None and r.seen is not None and seen.term == term \
                and r.seen.max == seen.max and r.seen.previous > seen.previous:
            return FenceResult(True, (seen.previous, seen.max), seen)
        return r

    monkeypatch.setattr(prodrules, "per_term", no_raise)
    rows = vp.task_prod("proposal-august")
    assert [o.status for o in rows] == ["found", "failed"]
    assert "11 admitted" in rows[1].name


def test_ours_holds_for_any_fence_rule() -> None:
    rows = vp.task_ours_any_fence(11, RLIMIT)
    assert rows and all(o.status in ("proved", "found") for o in rows), [
        (o.name, o.status, o.detail) for o in rows if o.status not in ("proved", "found")]
    assert any("below the applied window" in o.name for o in rows)
    assert any("other_write" in o.name for o in rows)  # another producer's fence too


def test_each_rules_python_corresponds_to_the_any_fence_formulas(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """July's Python on every state of a shape; a fence that admits while the formula
    forbids is a failed row: `other_write` that skips the apply-time window check."""
    from epochgc.model import actions

    rows = vp.task_prod_correspondence("prod-july")
    assert rows and all(o.status == "proved" for o in rows), [o.detail for o in rows]
    real = actions.apply_placeholder

    def unchecked(state, epoch, offset, v):  # type: ignore[no-untyped-def]
        from dataclasses import replace
        return real(state, epoch, offset, replace(v, apply_time_check=False))

    monkeypatch.setattr(actions, "apply_placeholder", unchecked)
    bad = [o for o in vp.task_prod_correspondence("prod-july") if o.status != "proved"]
    assert bad and any("other_write" in o.name or "land" in o.name for o in bad)


def test_an_inclusive_january_max_edge_is_an_equivalent_mutant(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Written `[previous, max_seen]`, January admits `e = max_seen` in the shared mode
    instead of taking the exclusive lock for a slide that moves nothing. With the decision
    and its enqueue one step (O1) no admission and no queue order changes, so no verdict
    can: why proofs/mutants.py carries no such mutant."""
    real = prodrules.seen_kept_apart

    def inclusive(seen, applied, term, epoch, v):  # type: ignore[no-untyped-def]
        r = real(seen, applied, term, epoch, v)
        if seen is not None and epoch == seen.max:
            return FenceResult(True, r.window, seen)  # shared, not exclusive
        return r

    monkeypatch.setattr(prodrules, "seen_kept_apart", inclusive)
    assert all(o.status == "found" for o in vp.task_prod("prod-january"))
