"""Induction queries: they prove the reference model, and they catch a broken one with a
counterexample that replays on the concrete model."""

from __future__ import annotations

import pytest

from epochgc.model.actions import ACTIONS
from epochgc.model.invariants import INVARIANTS, holds
from epochgc.model.variants import REFERENCE, variant
from epochgc.proofs import obligations, scenarios

T = scenarios.INDUCTION_TEMPLATE


def test_init_satisfies_every_invariant() -> None:
    out = obligations.init_obligations(T, REFERENCE)
    assert {o.status for o in out} == {"proved"}
    assert len(out) == len(INVARIANTS)


@pytest.mark.parametrize("action", ["land_write", "reconcile", "late_land", "fence_write"])
def test_reference_actions_preserve_every_invariant(action: str) -> None:
    out = obligations.induction(T, REFERENCE, [action])
    assert {o.status for o in out if o.kind != "vacuity"} == {"proved"}, [
        (o.name, o.detail) for o in out]
    assert [o.status for o in out if o.kind == "vacuity"] == ["found"]


def test_fence_only_fails_induction_with_a_replayed_counterexample() -> None:
    v = variant("fence-only")
    out = obligations.induction(T, v, ["land_write"])
    failed = {o.name: o for o in out if o.status == "failed"}
    assert "floor preserved by land_write" in failed
    cex = failed["floor preserved by land_write"].trace
    post = ACTIONS["land_write"][0](cex["pre"], v, **cex["params"])
    assert INVARIANTS["floor"](post, v) is False


def test_watermark_from_max_fails_reports_or_safety() -> None:
    v = variant("watermark-from-max")
    out = obligations.induction(T, v, ["gc_delete"])
    assert any(o.status == "failed" for o in out)


# -- issue 11 item 5: refused input is a failure, and vacuity is measured ------------------


def _strict_offset_check(where: str, state, offset: int) -> None:  # type: ignore[no-untyped-def]
    """A seeded bug: the offset check also refuses the next legitimate offset."""
    from epochgc.model.errors import ModelError, require_int

    require_int(where, "offset", offset)
    if state.window_offset is not None and offset <= state.window_offset + 1:
        raise ModelError(where, "offset", "refused")


@pytest.mark.parametrize("action", ["land_write", "other_write", "late_land"])
def test_model_error_on_an_admitted_path_fails(action: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from epochgc import model

    monkeypatch.setattr(model.partition, "_check_offset", _strict_offset_check)
    out = obligations.induction(T, REFERENCE, [action])
    failed = [o for o in out if o.status == "failed"]
    assert failed, [(o.name, o.status) for o in out]
    vac = next(o for o in out if o.kind == "vacuity")
    assert vac.status == "failed" and "refused" in vac.detail
    assert vac.trace is not None and holds(vac.trace["pre"], REFERENCE) is True


def test_every_obligation_counts_its_paths() -> None:
    out = obligations.induction(T, REFERENCE, ["reconcile"])
    vac = [o for o in out if o.kind == "vacuity"]
    assert len(vac) == 1 and vac[0].status == "found" and vac[0].paths
    assert holds(vac[0].trace["pre"], REFERENCE) is True
    for o in out:
        assert o.paths == vac[0].paths and o.status in ("proved", "found")


def test_an_action_never_enabled_is_vacuous(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from epochgc import model
    from epochgc.model.system import NotEnabled

    def never(s, v, p, lrlo):  # type: ignore[no-untyped-def]
        raise NotEnabled("reconcile", "precondition", "never")

    monkeypatch.setitem(model.actions.ACTIONS, "reconcile", (never, ACTIONS["reconcile"][1]))
    out = obligations.induction(T, REFERENCE, ["reconcile"])
    assert {o.status for o in out} == {"failed"}
    assert all("vacuous" in o.detail for o in out)


def test_variants_explored_jointly_keep_their_own_rows() -> None:
    """mint never reads collapse's switch, fence_write does: either way the joint
    exploration gives collapse the rows (statuses, path counts) of exploring it alone."""
    from epochgc.model.variants import VARIANTS

    for action in ("mint", "fence_write"):
        runs = obligations.induction_variants(T, action, [REFERENCE, VARIANTS["collapse"]])
        alone = obligations.induction(T, VARIANTS["collapse"], [action])
        assert ([(o.name, o.status, o.paths) for o in runs[1][1]]
                == [(o.name, o.status, o.paths) for o in alone])
    # a copy made by dataclasses.replace inside the model does not break the recording
    rec = obligations._recording(REFERENCE)
    from dataclasses import replace

    assert replace(rec, apply_time_check=False).apply_time_check is False
