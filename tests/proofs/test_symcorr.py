"""The correspondence proof over every state of a bounded shape (proofs/param/symcorr.py):
it proves on the real model and spec, and each bug of issue 28 that the sampled check let
through now fails it, with a model in the spec's vocabulary."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

import epochgc.model.system as system
from epochgc.model import actions, invariants
from epochgc.model.cluster import Report
from epochgc.model.logic import neg
from epochgc.model.system import System
from epochgc.proofs.param import spec, symcorr

SHAPES = dict(symcorr.shapes())
SMALL = "1p2r:0|0"  # one partition, two replicas, two objects of one write each


def _shape(name: str = SMALL) -> System:
    return SHAPES[name]


def test_shapes_cover_three_partitions_two_replicas_three_writes_two_objects() -> None:
    sizes = {(len(s.partitions), len(s.partitions[0].replicas), len(s.writes), len(s.objects))
             for s in SHAPES.values()}
    assert (3, 2, 3, 2) in sizes and max(p for p, _, _, _ in sizes) == 3
    assert len(SHAPES) == 28


@pytest.mark.parametrize("action", ["upload", "land_write", "give_up", "late_land",
                                    "housekeep", "delete_partition"])
def test_actions_correspond_on_every_state_of_the_shape(action: str) -> None:
    r = symcorr.check_action(action, SMALL, _shape())
    assert r.failure == "" and r.paths > 0, r.failure


@pytest.mark.parametrize("action", ["fence_write", "gc_compute", "other_write"])
@pytest.mark.parametrize("mode", ["py", "fo"])
def test_havocked_actions_correspond_both_ways(action: str, mode: str) -> None:
    r = symcorr.check_action(action, SMALL, _shape(), mode=mode)
    assert r.failure == "" and r.paths > 0, r.failure


def test_predicates_and_init_correspond() -> None:
    for name in invariants.INVARIANTS:
        r = symcorr.check_invariant(name, SMALL, _shape())
        assert r.failure == "", (name, r.failure)
    for name in invariants.TRANSITION_INVARIANTS:
        r = symcorr.check_transition(name, SMALL, _shape())
        assert r.failure == "", (name, r.failure)
    assert symcorr.check_fresh_m(SMALL, _shape()).failure == ""
    assert symcorr.check_init(SMALL, _shape()).failure == ""


# -- the seeded bugs of issue 28 items 1-3 ------------------------------------------------


def test_min_over_replicas_fails(monkeypatch: Any) -> None:
    """R16 with min instead of max: no sampled state had two replicas reporting
    different values, so the sampled check passed it."""
    def partition_epochs(partitions: Any, reports: Any) -> dict[str, int | None]:
        best: dict[str, int | None] = {p: None for p in partitions}
        for r in reports:
            assert isinstance(r, Report)
            if r.partition not in best or r.inactive_epoch is None:
                continue
            old = best[r.partition]
            best[r.partition] = r.inactive_epoch if old is None else min(old, r.inactive_epoch)
        return best

    monkeypatch.setattr("epochgc.model.cluster.partition_epochs", partition_epochs)
    r = symcorr.check_action("gc_compute", SMALL, _shape(), mode="fo")
    assert r.failure.startswith("formula step python lands elsewhere: gc_compute"), r.failure
    assert "gc_m:" in r.failure


def test_give_up_below_max_fails(monkeypatch: Any) -> None:
    """A write told failed while the window (from previous_applied) still accepts it."""
    def give_up(s: System, v: Any, w: int) -> System:
        wr = actions._write(s, w, system.UNKNOWN)
        st = s.partitions[wr.partition].state
        system._require(st.max_applied_epoch is not None
                        and system.write_epoch(s, wr) < st.max_applied_epoch,
                        "give_up", "the write may still land")
        return replace(s, writes=system._set(s.writes, w, replace(wr, status=system.FAILED)))

    monkeypatch.setitem(actions.ACTIONS, "give_up", (give_up, actions.ACTIONS["give_up"][1]))
    r = symcorr.check_action("give_up", SMALL, _shape())
    assert r.failure.startswith("python step the formula forbids"), r.failure


def test_a_formula_restricting_its_parameters_fails(monkeypatch: Any) -> None:
    """late_land landing only acceptable epochs: the same successor SET (an accepted
    epoch gives it too), so comparing sets passed it; the same parameters do not."""
    def late_land(L: Any, s: Any, prm: dict[str, Any]) -> Any:
        p0, e = prm["p"], prm["epoch"]
        guard = L.And(spec._other_ok(L, s, p0, e), spec.apply_ok(L, s, p0, e),
                      spec.accepts(L, s, p0, e))
        return guard, spec.apply_placeholder(L, s, p0, e, spec.accepts(L, s, p0, e))

    monkeypatch.setitem(spec.ACTIONS, "late_land", (*spec.ACTIONS["late_land"][:2], late_land))
    r = symcorr.check_action("late_land", SMALL, _shape())
    assert r.failure.startswith("python step the formula forbids"), r.failure


def test_t4_without_in_snap_fails(monkeypatch: Any) -> None:
    conjs = list(spec.TRANSITION_INVARIANTS["mono_fresh_M"])
    name, sorts, _ = conjs[1]
    conjs[1] = (name, sorts, lambda L, a, b, q: L.Implies(
        L.And(spec.fresh_defined(L, a), spec.fresh_defined(L, b)),
        spec.fresh_le(L, a, b.floor(q) - 1)))
    monkeypatch.setitem(spec.TRANSITION_INVARIANTS, "mono_fresh_M", conjs)
    r = symcorr.check_transition("mono_fresh_M", SMALL, _shape())
    assert r.failure.startswith("python says True, the formula says False"), r.failure


def test_an_unsatisfiable_init_fails(monkeypatch: Any) -> None:
    real = spec.init
    monkeypatch.setattr(spec, "init", lambda L, s: L.And(real(L, s), s.revision() == 1))
    r = symcorr.check_init(SMALL, _shape())
    assert r.failure.startswith("spec.init does not hold of model.system.initial"), r.failure


def test_invariants_without_a_model_fail_every_action(monkeypatch: Any) -> None:
    """Each shape's solver holds the assumed invariants once for all of its actions: if
    they had no model, every action would correspond vacuously, so that is a failure."""
    monkeypatch.setattr(symcorr, "_SOLVERS", {})
    monkeypatch.setattr(symcorr, "_PRE", {})
    monkeypatch.setattr(symcorr, "spec_inv", lambda L, st: L.And(st.revision() < 0,
                                                               st.revision() >= 0))
    r = symcorr.check_action("upload", SMALL, _shape())
    assert r.failure.startswith("the assumed invariants have no model"), r.failure
    assert r.paths == 0


# -- the predicates' joined query (symcorr._compare: one query over every path) -----------


def _wrong_on_half(real: Any, first: bool) -> Any:
    """`real`, negated on the states whose last partition is not in the snapshot: a
    disagreement on some paths only, among the first paths the explorer takes (`first`)
    or only after every path of `real` itself (the explorer takes True first)."""
    def inv(*args: Any, **kw: Any) -> Any:
        if args[0].partitions[-1].in_snapshot:
            return neg(real(*args, **kw)) if first else real(*args, **kw)
        return real(*args, **kw) if first else neg(real(*args, **kw))
    return inv


@pytest.mark.parametrize("first", [True, False], ids=["early-paths", "late-paths"])
@pytest.mark.parametrize("name", list(invariants.INVARIANTS))
def test_a_python_invariant_wrong_on_some_paths_fails(monkeypatch: Any, name: str,
                                                      first: bool) -> None:
    monkeypatch.setitem(invariants.INVARIANTS, name,
                        _wrong_on_half(invariants.INVARIANTS[name], first))
    r = symcorr.check_invariant(name, SMALL, _shape())
    assert r.failure.startswith("python says"), r.failure
    assert "state: " in r.failure


@pytest.mark.parametrize("first", [True, False], ids=["early-paths", "late-paths"])
@pytest.mark.parametrize("name", list(invariants.TRANSITION_INVARIANTS))
def test_a_python_transition_invariant_wrong_on_some_paths_fails(
        monkeypatch: Any, name: str, first: bool) -> None:
    monkeypatch.setitem(invariants.TRANSITION_INVARIANTS, name,
                        _wrong_on_half(invariants.TRANSITION_INVARIANTS[name], first))
    # T4's Python side is run as mono_fresh_m with the fresh M given (check_transition)
    monkeypatch.setattr(symcorr, "mono_fresh_m", _wrong_on_half(symcorr.mono_fresh_m, first))
    r = symcorr.check_transition(name, SMALL, _shape())
    assert r.failure.startswith("python says"), r.failure


def test_fresh_m_off_by_one_on_some_paths_fails(monkeypatch: Any) -> None:
    real = symcorr.fresh_m

    def fresh_m(s: System, v: Any) -> Any:
        m = real(s, v)
        return m + 1 if m is not None and s.partitions[-1].in_snapshot else m

    monkeypatch.setattr(symcorr, "fresh_m", fresh_m)
    r = symcorr.check_fresh_m(SMALL, _shape())
    assert r.failure.startswith("python says False"), r.failure


def _raising_when(real: Any, reachable: bool) -> Any:
    """`real`, raising on the states whose window's max is above 3 and (`reachable`) below
    5, or (not `reachable`) below 2: a path no state takes."""
    def inv(s: System, v: Any) -> Any:
        x = s.partitions[0].state.max_applied_epoch
        if x is not None and x > 3 and x < (5 if reachable else 2):
            raise ValueError("seeded")
        return real(s, v)
    return inv


def test_a_python_invariant_raising_only_where_no_state_goes_still_corresponds(
        monkeypatch: Any) -> None:
    """The predicate's paths are enumerated unpruned, so the model code also runs where no
    state goes (reviewer's case): an exception there is not a failure."""
    monkeypatch.setitem(invariants.INVARIANTS, "floor",
                        _raising_when(invariants.INVARIANTS["floor"], reachable=False))
    r = symcorr.check_invariant("floor", SMALL, _shape())
    assert r.failure == "" and r.paths > 0, r.failure


def test_a_python_invariant_raising_on_some_state_fails(monkeypatch: Any) -> None:
    monkeypatch.setitem(invariants.INVARIANTS, "floor",
                        _raising_when(invariants.INVARIANTS["floor"], reachable=True))
    r = symcorr.check_invariant("floor", SMALL, _shape())
    assert r.failure.startswith("python raised ValueError on a state of the shape"), r.failure


def test_a_predicate_every_path_of_which_is_pruned_fails(monkeypatch: Any) -> None:
    def pruned(s: System, v: Any) -> Any:
        from epochgc.proofs.sym import Prune
        raise Prune()

    monkeypatch.setitem(invariants.INVARIANTS, "floor", pruned)
    r = symcorr.check_invariant("floor", SMALL, _shape())
    assert r.failure.startswith("no path reaches the predicate's value"), r.failure
