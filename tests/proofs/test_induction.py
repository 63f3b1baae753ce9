"""Induction queries: they prove the reference model, and they catch a broken one with a
counterexample that replays on the concrete model."""

from __future__ import annotations

import pytest

from model.system import ACTIONS, INVARIANTS
from model.variants import REFERENCE, variant
from proofs import obligations, scenarios

T = scenarios.INDUCTION_TEMPLATE


def test_init_satisfies_every_invariant() -> None:
    out = obligations.init_obligations(T, REFERENCE)
    assert {o.status for o in out} == {"proved"}
    assert len(out) == len(INVARIANTS)


@pytest.mark.parametrize("action", ["land_write", "reconcile", "late_land", "fence_write"])
def test_reference_actions_preserve_every_invariant(action: str) -> None:
    out = obligations.induction(T, REFERENCE, [action])
    assert {o.status for o in out} == {"proved"}, [(o.name, o.detail) for o in out]


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
    out = obligations.induction(T, v, ["gc_compute", "land_write"])
    assert any(o.status == "failed" for o in out)
