"""One exploration for several variants (obligations.induction_joint, the variant
switches as symbolic booleans) must give every variant exactly the rows of exploring it
alone: statuses, path counts (enabled, not enabled, excluded by Inv) and counterexamples
that are models of that variant."""

from __future__ import annotations

from typing import Any

import z3

from epochgc.model.invariants import INVARIANTS, TRANSITION_INVARIANTS, holds
from epochgc.model.variants import Variant, variant
from epochgc.proofs import obligations, scenarios
from epochgc.proofs.sym import Explorer
from epochgc.proofs.symvalues import SymBool

T = scenarios.INDUCTION_TEMPLATE
# strict with the apply-time check off: a bug that only bites with single_epoch set
STRICT_UNCHECKED = Variant("strict-unchecked", single_epoch=True, apply_time_check=False,
                           fence_lo_from_applied=False)


def _key(o: obligations.Outcome) -> tuple[Any, ...]:
    # the vacuity row's detail holds the per-kind path counts
    return (o.name, o.kind, o.status, o.scope, o.paths,
            o.detail if o.kind == "vacuity" else None)


def test_joint_rows_are_each_variants_own() -> None:
    action = "land_write"
    names = ("reference", "strict", "collapse", "fence-only", "strict-unchecked")
    vs = [STRICT_UNCHECKED if n == "strict-unchecked" else variant(n) for n in names]
    joint = obligations.induction_variants(T, action, vs)
    for v, rows in joint:
        alone = obligations.induction(T, v, [action])
        assert [_key(o) for o in rows] == [_key(o) for o in alone], v.name
        for o in rows:  # a counterexample is one of this variant, replayed concretely
            if o.status == "failed" and o.kind in ("invariant", "transition"):
                pre, post = o.trace["pre"], o.trace["post"]
                assert holds(pre, v) is True
                name = o.name.split(" preserved by ")[0]
                still = (INVARIANTS[name](post, v) if name in INVARIANTS
                         else TRANSITION_INVARIANTS[name](pre, post, v))
                assert still is False, (v.name, o.name)
    statuses = {v.name: {o.status for o in rows} for v, rows in joint}
    assert statuses["reference"] == statuses["strict"] == {"proved", "found"}
    # each bad variant's bug is found in its own rows
    assert "failed" in statuses["fence-only"]
    assert "failed" in statuses["strict-unchecked"]


def test_split_paths_and_prunes_are_per_split() -> None:
    """Explored alone, s=False prunes at `assume(s)` (one pruned path) and s=True forks
    on x > 0 (two paths): jointly, the first split counts no path and one prune, the
    second two paths and no prune."""
    s = z3.Bool("variant.s")
    splits = [(z3.Not(s), [(s, z3.BoolVal(False))]), (s, [(s, z3.BoolVal(True))])]
    ex = Explorer()
    ex.splits = lambda: splits

    def f(ex: Explorer) -> bool:
        ex.assume(SymBool(s))
        return bool(ex.fresh_int("x") > 0)

    counts = [0, 0]
    for p in ex.paths(f):
        assert p.kind == "ok"
        for i, ok in enumerate(ex.split_paths()):
            counts[i] += ok
    assert counts == [0, 2]
    assert {i for i, _ in ex.pruned_for} == {0}
