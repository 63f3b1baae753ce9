"""The one-partition induction's lazy replicas (`proofs.symstate._lazy_replica`): a
replica's seen window, M(p) view and report fork only where the action reads them. The
rows must be those of deciding every field up front (`LAZY_REPLICAS = False`), a seeded
bug in a replica action must still fail with a counterexample that replays, and the
mechanisms it needs (decisions kept only by the pruning explorer, forgotten between
paths, read from the model when concretizing, part of a state's fingerprint) must hold."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import z3

from epochgc.model import actions, invariants
from epochgc.model import system as S
from epochgc.model.variants import REFERENCE, variant
from epochgc.proofs import obligations, scenarios
from epochgc.proofs.obligations import _joined, fingerprint
from epochgc.proofs.sym import Explorer
from epochgc.proofs.symstate import decisions, symbolic_system, undecide
from epochgc.proofs.symvalues import concretize

VARIANTS = [variant(n) for n in ("reference", "strict", "collapse")]


def _rows(action: str, lazy: bool, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    monkeypatch.setattr(obligations, "LAZY_REPLICAS", lazy)
    runs = obligations.induction_variants(scenarios.INDUCTION_TEMPLATE, action, VARIANTS)
    return [(f"{v.name} {o.name}", o.status) for v, rows in runs for o in rows]


def _sync_to_max(s: S.System, v: Any, p: int, r: int) -> S.System:
    """Seeded bug: a replica's M(p) view set to max_applied_epoch (above M(p): I4)."""
    part = S._part(s, p)
    rep = replace(part.replicas[r], inactive=part.state.max_applied_epoch)
    return S._with_part(s, p, replace(part, replicas=S._set(part.replicas, r, rep)))


def _report_view_plus_one(s: S.System, v: Any, p: int, r: int) -> S.System:
    """Seeded bug: a replica reports one above its view (I4: a report above the view)."""
    part = S._part(s, p)
    rep = part.replicas[r]
    S._require(rep.inactive is not None, "report", "no view")
    new = replace(rep, reported=rep.inactive + 1, reported_null=False)
    return S._with_part(s, p, replace(part, replicas=S._set(part.replicas, r, new)))


@pytest.mark.parametrize("action", ["sync_replica", "report", "restart", "fence_write",
                                    "expire_report"])
def test_lazy_and_eager_replicas_give_the_same_rows(action: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    assert _rows(action, True, monkeypatch) == _rows(action, False, monkeypatch)


@pytest.mark.parametrize(("action", "bug"), [("sync_replica", _sync_to_max),
                                             ("report", _report_view_plus_one)])
def test_a_seeded_replica_bug_fails_with_a_replayed_counterexample(
        action: str, bug: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(actions.ACTIONS, action, (bug, actions.ACTIONS[action][1]))
    for lazy in (True, False):
        monkeypatch.setattr(obligations, "LAZY_REPLICAS", lazy)
        rows = obligations.induction(scenarios.INDUCTION_TEMPLATE, REFERENCE, [action])
        bad = {o.name: o for o in rows if o.status == "failed"}
        assert f"reports preserved by {action}" in bad, (lazy, [o.name for o in rows])
        cex = bad[f"reports preserved by {action}"].trace  # replayed by the engine
        assert invariants.holds(cex["pre"]) is True and invariants.inv_reports(cex["post"]) is False


def _lazy_pre(ex: Explorer) -> S.System:
    return symbolic_system(ex, scenarios.INDUCTION_TEMPLATE, lazy_replicas=True)


def test_a_joined_formula_keeps_no_decision_and_a_path_does() -> None:
    """Inv(pre) is joined over the replicas' fields in a non-pruning explorer: it must
    not keep the decisions it took there (they would stand for every side), while a read
    on the path itself is decided for the rest of the path."""
    ex = Explorer()
    seen: list[Any] = []

    def run(ex: Explorer) -> Any:
        pre = ex.replayed("pre", lambda: _lazy_pre(ex))
        undecide(pre)
        _joined(lambda: invariants.holds(pre, REFERENCE))
        seen.append(decisions(pre))
        return pre.partitions[0].replicas[0].inactive is None

    values = [p.value for p in ex.paths(run) if p.kind == "ok"]
    assert all(d == (None,) * len(d) for d in seen)  # the join decided nothing
    # the path's own read forks once per pre-state shape (window set?, gc_m?)
    assert sorted(values) == [False] * _shapes() + [True] * _shapes()


def _shapes() -> int:
    """Paths of the lazy pre-state alone (its eager forks: window set, a round's M)."""
    return sum(p.kind == "ok" for p in Explorer().paths(
        lambda ex: undecide(ex.replayed("pre", lambda: _lazy_pre(ex)))))


def test_each_path_starts_undecided() -> None:
    """The replayed pre-state is one object: a path must not inherit the previous path's
    decisions (`undecide`), or the second side of a read is never explored."""
    ex = Explorer()

    def run(ex: Explorer) -> Any:
        pre = ex.replayed("pre", lambda: _lazy_pre(ex))
        undecide(pre)
        r0 = pre.partitions[0].replicas[0]
        return (r0.inactive is None, r0.seen is None)

    values = sorted(p.value for p in ex.paths(run) if p.kind == "ok")
    assert values == sorted([(False, False), (False, True), (True, False), (True, True)]
                            * _shapes())


def test_concretize_reads_presence_from_the_model() -> None:
    """A counterexample is concretized after later paths made other decisions on the
    same groups: presence comes from the model, not from the group's last decision."""
    ex = Explorer()
    pres: list[S.System] = []

    def run(ex: Explorer) -> Any:
        pre = ex.replayed("pre", lambda: _lazy_pre(ex))
        undecide(pre)
        pres.append(pre)
        return pre.partitions[0].replicas[0].inactive is None

    paths = [p for p in ex.paths(run) if p.kind == "ok"]
    pre = pres[0]
    for p in paths:  # the groups now hold the last path's decision
        s = z3.Solver()
        s.add(*p.pc)
        assert s.check() == z3.sat
        c = concretize(pre, s.model())
        assert (c.partitions[0].replicas[0].inactive is None) is p.value


def test_the_fingerprint_tells_decisions_apart() -> None:
    ex = Explorer()
    prints: list[Any] = []

    def run(ex: Explorer) -> Any:
        pre = ex.replayed("pre", lambda: _lazy_pre(ex))
        undecide(pre)
        before = fingerprint(pre, {})
        absent = pre.partitions[0].replicas[0].inactive is None
        prints.append((before, fingerprint(pre, {}), absent))
        return absent

    list(ex.paths(run))
    (b1, a1, x1), (b2, a2, x2) = prints[:2]
    assert b1 == b2  # undecided: the same value
    assert a1 != b1 and a2 != b2 and a1 != a2 and x1 != x2
