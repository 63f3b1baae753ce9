"""What keeps the correspondence proof's paths few: `min`/`max` over symbolic ints merged
into one term (`symmerge.sym_max`), a `model.logic.merge_point` function as one formula over its
paths (`symmerge.merged_call`), and `dataclasses.replace` on a lazy state copying its undecided
optional fields without deciding them (`proofs.param.lazy`). Each must leave the results
exactly as the forking exploration gives them."""

from __future__ import annotations

import builtins
import itertools
from dataclasses import replace
from typing import Any

import pytest
import z3

from epochgc.model.cluster import Report, gc_epoch_of_valid
from epochgc.model.fence import SeenWindow
from epochgc.model.logic import all_of, le_opt, merge_point
from epochgc.model.system import Replica, System, initial
from epochgc.proofs.param.lazy import lazy_system, optional
from epochgc.proofs.sym import Explorer
from epochgc.proofs.symmerge import sym_max, sym_min
from epochgc.proofs.symvalues import SymInt

INTS = [-3, 0, 0, 2, 7]


@pytest.mark.parametrize(("mine", "builtin"), [(sym_max, max), (sym_min, min)])
def test_on_plain_values_they_are_the_builtins(mine: Any, builtin: Any) -> None:
    for n in (1, 2, 3):
        for xs in itertools.permutations(INTS, n):
            if n > 1:
                assert mine(*xs) == builtin(*xs)
            assert mine(list(xs)) == builtin(list(xs))
            assert mine(xs, key=lambda x: -x) == builtin(xs, key=lambda x: -x)
    assert mine([], default=5) == 5
    assert mine("ab") == builtin("ab")
    assert mine(iter([1, 4])) == builtin([1, 4])
    with pytest.raises(ValueError):
        mine([])
    with pytest.raises(TypeError):
        mine(None, 1)


def _values(merge: bool, fn: Any) -> tuple[int, set[tuple[int, ...]]]:
    """(paths, concrete results on a grid of inputs) of `fn(x, y, z)` explored."""
    ex = Explorer(merge=merge)
    outs = []

    def run(ex: Explorer) -> Any:
        return fn(ex.fresh_int("x"), ex.fresh_int("y"), ex.fresh_int("z"))

    paths = [p for p in ex.paths(run) if p.kind == "ok"]
    x, y, z = (z3.Int(f"{n}#{i}") for i, n in enumerate("xyz"))
    for vals in itertools.product((0, 1, 2), repeat=3):
        sub = [(x, z3.IntVal(vals[0])), (y, z3.IntVal(vals[1])), (z, z3.IntVal(vals[2]))]
        hits = [z3.simplify(z3.substitute(p.value.expr if isinstance(p.value, SymInt)
                                          else z3.IntVal(p.value), *sub)).as_long()
                for p in paths
                if z3.is_true(z3.simplify(z3.substitute(z3.And(*p.pc) if p.pc else
                                                        z3.BoolVal(True), *sub)))]
        assert len(hits) == 1, (vals, hits)  # the paths partition the inputs
        outs.append((*vals, hits[0]))
    return len(paths), set(outs)


@pytest.mark.parametrize("fn", [
    lambda x, y, z: max(x, y),
    lambda x, y, z: min(x, y, z),
    lambda x, y, z: max([x, 1, y]) + min((z, 0)),
    lambda x, y, z: min(max(x, y), z),
    lambda x, y, z: max(x, x),
])
def test_merged_is_one_path_with_the_forked_values(fn: Any) -> None:
    forked_paths, forked = _values(False, fn)
    merged_paths, merged = _values(True, fn)
    assert merged == forked
    assert merged_paths == 1 and forked_paths >= 1


def test_the_builtins_are_restored_after_a_run() -> None:
    ex = Explorer(merge=True)
    list(ex.paths(lambda ex: max(ex.fresh_int("x"), 0)))
    assert builtins.max is not sym_max and builtins.min is not sym_min


def test_the_round_over_two_replicas_is_one_path() -> None:
    """The R16 max over replicas and the R15 min over partitions do not fork."""
    def run(ex: Explorer) -> Any:
        a, b, c = (ex.fresh_int(n) for n in "abc")
        reps = [Report("p0", "r0", a), Report("p0", "r1", b), Report("p1", "r0", c)]
        return gc_epoch_of_valid(ex.fresh_int("rev"), ["p0", "p1"], reps).M

    assert len(list(Explorer(merge=True).paths(run))) == 1
    assert len(list(Explorer().paths(run))) > 1


def test_replace_on_a_lazy_state_decides_nothing() -> None:
    """Copying a replica with a new seen window leaves its M(p) view and its report
    undecided (one path), shared with the original; reading them then forks as before."""
    template = initial(1, 2, [(0, 0)], 1)
    seen_only: list[int] = []

    def run(ex: Explorer) -> Any:
        s = lazy_system(ex, template)
        rep = s.partitions[0].replicas[0]
        new = replace(rep, seen=SeenWindow(1, 2, 3))
        assert type(new).__mro__[1] is Replica and new.__class__ is Replica
        assert optional(new, "inactive")[1] is optional(rep, "inactive")[1]
        seen_only.append(ex._pos)
        return new

    paths = list(Explorer().paths(run))
    assert len(paths) == 1 and seen_only == [0]
    new = paths[0].value
    assert isinstance(optional(new, "inactive")[0], z3.BoolRef)  # still a formula

    def read(ex: Explorer) -> Any:
        s = lazy_system(ex, template)
        new = replace(s.partitions[0].replicas[0], seen=None)
        return new.inactive is None, new.reported is None

    assert {p.value for p in Explorer().paths(read)} == {
        (True, True), (True, False), (False, True), (False, False)}


# -- merged calls (model.logic.merge_point) -------------------------------------------------

@merge_point
def _reports_ok(r: Replica, truth: Any) -> Any:
    return all_of((le_opt(r.inactive, truth), le_opt(r.reported, r.inactive)))


@merge_point
def _reported_or_none(r: Replica) -> Any:
    return r.reported  # None on some paths: not mergeable, so it forks as before


def test_merge_point_on_plain_values_is_the_function() -> None:
    r = Replica(None, 3, 2)
    assert _reports_ok(r, 4) is True and _reports_ok(r, 2) is False
    assert _reports_ok.__name__ == "_reports_ok" and _reported_or_none(r) == 2


def _explore(merge: bool, fn: Any) -> tuple[Explorer, list[Any]]:
    template = initial(2, 2, [(0, 0)], 1)
    ex = Explorer(merge=merge)

    def run(ex: Explorer) -> Any:
        s = lazy_system(ex, template, seen=False)
        return fn(s)

    return ex, [p for p in ex.paths(run) if p.kind == "ok"]


def test_a_merged_condition_is_one_path_with_the_forked_formula() -> None:
    def every(s: System) -> Any:
        return all_of(_reports_ok(r, ex_truth) for part in s.partitions for r in part.replicas)

    ex_truth = 5
    _, merged = _explore(True, every)
    _, forked = _explore(False, every)
    assert len(merged) == 1 and len(forked) > 100
    m = merged[0].value.expr
    for p in forked:  # on each forked path, the merged formula is that path's result
        v = p.value.expr if hasattr(p.value, "expr") else z3.BoolVal(p.value)
        s = z3.Solver()
        s.add(*p.pc, z3.Xor(m, v))
        assert s.check() == z3.unsat


def test_a_result_that_cannot_merge_forks_the_caller() -> None:
    _, merged = _explore(True, lambda s: _reported_or_none(s.partitions[0].replicas[0]))
    assert {type(p.value).__name__ for p in merged} == {"NoneType", "SymInt"}


def test_a_merged_run_does_not_keep_its_decisions() -> None:
    """A lazy group read inside a merged call is decided again by the caller."""
    def both(s: System) -> Any:
        r = s.partitions[0].replicas[0]
        return _reports_ok(r, 1), r.inactive is None

    _, paths = _explore(True, both)
    assert sorted(p.value[1] for p in paths) == [False, True]


def test_an_unpruned_explorer_asks_a_decided_test_once() -> None:
    """A non-pruning explorer (the one that joins a goal's or fresh M's branches into one
    formula) takes only the side a repeated test (or its negation) already has on the
    path: the other side's disjunct would be false, and forking on it multiplied the
    leaves (M(p) computed once per replica)."""
    ex = Explorer(prune=False)

    def run(ex: Explorer) -> Any:
        x = ex.fresh_int("x")
        first = bool(x > 0)
        again = bool(x > 0)
        negated = bool(~(x > 0))
        return first, again, negated

    paths = list(ex.paths(run))
    assert [p.value for p in paths] == [(True, True, False), (False, False, True)]
    s = z3.Solver()
    for p in paths:  # every leaf's condition is satisfiable: no contradictory side kept
        assert s.check(*p.pc) == z3.sat
