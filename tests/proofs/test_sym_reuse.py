"""What the explorer reuses instead of recomputing (issue 11's proof speed) must be exactly
what recomputing would give: a per-prefix value per decision prefix, a goal per distinct
(pre, post), and a decision forced by a literal of the path condition only when it is
one."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import z3

from epochgc.model.invariants import INVARIANTS, TRANSITION_INVARIANTS
from epochgc.model.variants import REFERENCE, variant
from epochgc.proofs import obligations, scenarios
from epochgc.proofs.obligations import _goal, _GoalMemo, fingerprint
from epochgc.proofs.sym import Explorer
from epochgc.proofs.symsolver import RLIMIT
from epochgc.proofs.symstate import symbolic_system
from epochgc.proofs.symvalues import SymInt


def test_per_prefix_value_is_per_decision_prefix() -> None:
    """Each shape of the input sees the value computed for that shape, also when the
    paths after it are replayed (two decisions after the memo point)."""
    calls: list[bool] = []

    def f(ex: Explorer) -> tuple[bool, Any]:
        a = bool(ex.fresh_bool("a"))

        def compute() -> bool:
            calls.append(a)
            return a

        seen = ex.per_prefix("v", compute)
        b, c = bool(ex.fresh_bool("b")), bool(ex.fresh_bool("c"))
        return seen, (a, b, c)

    ex = Explorer()
    paths = [p.value for p in ex.paths(f)]
    assert len(paths) == 8
    assert all(seen == shape[0] for seen, shape in paths)
    assert sorted(calls) == [False, True]  # once per prefix, not once per path


def test_per_prefix_does_not_cache_a_value_that_decided() -> None:
    """A compute that forks on the caller's path must run on every path (caching it
    would skip its decisions and desynchronise the replay)."""
    def f(ex: Explorer) -> Any:
        x = ex.fresh_int("x")
        return ex.per_prefix("v", lambda: "pos" if x > 0 else "neg")

    ex = Explorer()
    assert sorted(p.value for p in ex.paths(f)) == ["neg", "pos"]


def test_repeated_test_is_forced_without_a_solver_call() -> None:
    """`x > 0` asked twice: the second answer follows the first (and its negation is
    decided the other way), with no solver call for either repeat."""
    def f(ex: Explorer) -> tuple[bool, bool, bool]:
        x = ex.fresh_int("x")
        first = bool(x > 0)
        return first, bool(x > 0), bool(~(x > 0))

    ex = Explorer()
    values = sorted(p.value for p in ex.paths(f))
    assert values == [(False, False, True), (True, True, False)]
    ex2 = Explorer()

    def once(ex: Explorer) -> bool:
        return bool(ex.fresh_int("x") > 0)

    list(ex2.paths(once))
    assert ex.checks == ex2.checks  # the repeats cost nothing


def test_goal_memo_keys_on_the_states() -> None:
    """Same post-state, different pre-state: a transition goal is recomputed (it reads the
    pre-state), an invariant goal is reused; every goal equals the unmemoised one."""
    ex = Explorer(prune=False)
    out: list[Any] = []

    def f(ex: Explorer) -> None:
        a = symbolic_system(ex, scenarios.INDUCTION_TEMPLATE)
        b = symbolic_system(ex, scenarios.INDUCTION_TEMPLATE)  # other fresh names
        out.append((a, b))

    next(iter(ex.paths(f)))
    a, b = out[0]
    assert fingerprint(a) != fingerprint(b)
    memo = _GoalMemo()
    for pre in (a, b):
        keys = memo.keys(pre, b)
        for name in (*INVARIANTS, *TRANSITION_INVARIANTS):
            got = memo.get(name, keys, pre, b, REFERENCE)
            # mono_fresh_M's goal is built from fresh_m joined per state (_FreshM): the
            # same formula up to equivalence, not the same term.
            assert _equivalent(got, _goal(name, pre, b, REFERENCE)), name
    # one goal per invariant (post b both times), two per transition invariant
    assert len(memo._by_key) == len(INVARIANTS) + 2 * len(TRANSITION_INVARIANTS)


def _equivalent(f: z3.BoolRef, g: z3.BoolRef) -> bool:
    s = z3.Solver()
    s.set("timeout", 10_000)
    s.add(f != g)
    r = s.check()
    assert r != z3.unknown, s.reason_unknown()
    return bool(r == z3.unsat)


def _two_states() -> tuple[Any, Any]:
    out: list[Any] = []

    def f(ex: Explorer) -> None:
        out.append((symbolic_system(ex, scenarios.INDUCTION_TEMPLATE),
                    symbolic_system(ex, scenarios.INDUCTION_TEMPLATE)))

    next(iter(Explorer(prune=False).paths(f)))
    return out[0]


@pytest.mark.parametrize("vname", ["reference", "strict", "collapse"])
def test_fresh_m_joined_per_state_is_fresh_m(vname: str) -> None:
    """`_FreshM` (fresh_m once per state, its branches joined into one value) gives
    mono_fresh_M the goal the model's own fresh_m gives, for every pair of two states
    (the same state twice too), with one cache across the pairs as in a proof task."""
    a, b = _two_states()
    v = variant(vname)
    fm = obligations._FreshM()
    for pre, post in ((a, b), (b, a), (a, a), (b, b)):
        cached = _goal("mono_fresh_M", pre, post, v, fm)
        assert _equivalent(cached, _goal("mono_fresh_M", pre, post, v)), (vname, pre is a)
    assert not _equivalent(_goal("mono_fresh_M", a, b, v, fm), z3.BoolVal(False))


def test_joined_value_is_none_exactly_where_the_function_is() -> None:
    """An `int | None` function that branches: `defined` holds exactly where it returns a
    number, and there the joined value is that number."""
    x, y = SymInt(z3.Int("x")), SymInt(z3.Int("y"))

    def f() -> Any:
        if x > 0:
            return None
        return x if y > 0 else 5

    defined, value = obligations._joined_value(f)
    xe, ye = z3.Int("x"), z3.Int("y")
    assert _equivalent(defined, z3.Not(xe > 0))
    assert _equivalent(z3.Implies(defined, value.expr == z3.If(ye > 0, xe, 5)),
                       z3.BoolVal(True))
    assert obligations._joined_value(lambda: None) == (False, None)
    assert obligations._joined_value(lambda: 7) == (True, 7)


@pytest.mark.parametrize(("vname", "action"), [("fence-only", "land_write"),
                                               ("watermark-from-max", "gc_delete"),
                                               ("reference", "housekeep")])
def test_batched_obligation_checks_give_the_per_path_verdicts(
        vname: str, action: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One query per batch of paths (obligations._Batch) must reach the verdicts of one
    query per path, wherever in a batch the violating path sits: every row's status and
    path count with a batch of 1 and with every path in one batch."""
    v = variant(vname)
    runs = []
    for size in (1, 100_000):
        monkeypatch.setattr(obligations, "BATCH", size)
        rows = obligations.induction(scenarios.INDUCTION_TEMPLATE, v, [action])
        runs.append({o.name: (o.status, o.paths) for o in rows})
    assert runs[0] == runs[1]
    failed = sorted(n for n, (st, _) in runs[0].items() if st == "failed")
    assert bool(failed) == (vname != "reference"), failed


def test_a_batch_is_clean_only_when_no_path_can_break_an_obligation() -> None:
    """Paths that share a prefix and then part: the violation sits on the second path,
    whose condition contradicts the first's (asserting the first path's literals as the
    shared prefix would hide it)."""
    a, b, c = z3.Bools("a b c")
    batch = obligations._Batch(RLIMIT, 0)
    first = obligations._Pending((c, a), {"safety": z3.And(a, z3.Not(a))}, None, {}, None)
    second = obligations._Pending((c, z3.Not(a)), {"safety": b}, None, {}, None)
    assert not batch.clean([first, second])
    assert not batch.clean([second, first])
    safe = obligations._Pending((c, z3.Not(a)), {"safety": z3.And(b, a)}, None, {}, None)
    assert batch.clean([first, safe])


def test_a_batch_groups_paths_by_goal_without_losing_one() -> None:
    """Paths with the same negated goal are asked as one goal and the disjunction of
    their conditions: a violation on any one of them (first, middle or last) is seen."""
    a, b, c, d = z3.Bools("a b c d")
    batch = obligations._Batch(RLIMIT, 0)
    goal = {"safety": z3.And(b, z3.Not(d))}
    safe = [obligations._Pending(pc, goal, None, {}, None)
            for pc in ((c, a, d), (c, a, z3.Not(b)), (c, d))]
    other = obligations._Pending((c, a, d), {"safety": z3.Not(d)}, None, {}, None)
    bad = obligations._Pending((c, z3.Not(a), z3.Not(d)), goal, None, {}, None)
    assert batch.clean([*safe, other])
    for i in range(len(safe) + 1):
        assert not batch.clean([*safe[:i], bad, *safe[i:], other])


def test_repaired_model_settles_free_forks_without_a_solver_call() -> None:
    """Forks on constants nothing constrains (the pre-state's shape, a parameter choice)
    get their other side from the known model with that constant changed: the same paths,
    with fewer solver calls than the explorer needs without repairs."""
    def f(ex: Explorer) -> tuple[bool, bool, int]:
        x = ex.fresh_int("x")
        ex.assume(x > 3)  # a model of the path is now known
        a, b = bool(ex.fresh_bool("a")), bool(ex.fresh_bool("b"))
        k = z3.Int("k")
        pick = 0 if ex.decide(k == 0) else 1 if ex.decide(k == 1) else 2
        return a, b, pick

    ex = Explorer()
    paths = sorted(p.value for p in ex.paths(f))
    assert paths == sorted((a, b, k) for a in (False, True) for b in (False, True)
                           for k in (0, 1, 2))
    # Only the assumption asks the solver: every fork's other side (11 of them) is a
    # repaired model. (A repair cache keyed wrongly hands `not a` the repair of `a`,
    # which fails its check and costs solver calls.)
    assert (ex.checks, ex.repairs) == (1, 11)
    plain = Explorer()
    plain._repaired = lambda m, want: None  # type: ignore[method-assign]
    assert sorted(p.value for p in plain.paths(f)) == paths
    assert ex.checks < plain.checks


def test_repaired_model_must_satisfy_the_path_condition() -> None:
    """A repair that breaks a literal of the path condition is not a witness: with
    `a or c` and `not c` assumed, `not a` is infeasible, so only one path goes on."""
    def f(ex: Explorer) -> bool:
        a, c = ex.fresh_bool("a"), ex.fresh_bool("c")
        ex.assume(a | c)
        ex.assume(~c)
        return bool(a)

    ex = Explorer()
    assert [p.value for p in ex.paths(f)] == [True]
    # and a constant compared with a numeral: `k == 2` forced by the path condition
    def g(ex: Explorer) -> bool:
        k = ex.fresh_int("k")
        ex.assume(k >= 2)
        ex.assume(k <= 2)
        return bool(k == 2)

    assert [p.value for p in Explorer().paths(g)] == [True]


def _refutations(ex: Explorer) -> tuple[tuple[bool, ...], bool, bool, bool]:
    """`y > 5`, 16 shapes, then `y == 4`, refuted on the `y > 5` side by a decision
    (feasible on the other), and `x < 0`, refuted by the assumption `x >= 0` alone on
    every path."""
    x = ex.fresh_int("x")
    ex.assume(x >= 0)
    y = ex.fresh_int("y")
    big = bool(y > 5)  # first: every `big` path refutes `y == 4` before any other sees it
    shape = tuple(bool(ex.fresh_bool(f"b{i}")) for i in range(4))
    low = bool(y == 4)
    return shape, big, low, bool(x < 0)


_REFUTATION_PATHS = sorted(
    (shape, big, low, False)
    for shape in itertools.product((False, True), repeat=4)
    for big, low in ((True, False), (False, True), (False, False)))


def test_side_refuted_by_the_assumptions_alone_skips_the_solver() -> None:
    """`x < 0` is asked on all 48 paths: after a few refutations one probe shows the
    assumption alone refutes it, and the later paths skip the solver for it. `y == 4`,
    refuted only by the path's own decision, is never skipped: every path is there."""
    ex = Explorer()
    assert sorted(p.value for p in ex.paths(_refutations)) == _REFUTATION_PATHS
    assert ex.implied >= 40
    plain = Explorer()
    plain._side_model = lambda m, side: (  # type: ignore[method-assign]
        (plain._repaired(m, side) if m is not None else None) or plain._sat_model(side))
    assert sorted(p.value for p in plain.paths(_refutations)) == _REFUTATION_PATHS
    assert ex.checks < plain.checks - 30


def test_side_refuted_only_by_decisions_is_not_cached(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """A probe that always says "refuted" (a cache that skips the probe and trusts the
    path's own refutation) loses the paths where `y == 4` is feasible: the check sees it."""
    monkeypatch.setattr(Explorer, "_refuted_by_assumptions", lambda self, side: True)
    got = sorted(p.value for p in Explorer().paths(_refutations))
    assert got != _REFUTATION_PATHS


def test_replayed_build_gives_every_path_its_own_shape() -> None:
    """A build that forks (a pre-state's shape) and makes fresh inputs is replayed on the
    paths that share its decisions: each path sees the value built for its own shape, the
    inputs made after it keep their names, and the build runs once per shape."""
    builds: list[tuple[bool, bool]] = []

    def build(ex: Explorer) -> tuple[bool, bool, Any]:
        a, b = bool(ex.fresh_bool("a")), bool(ex.fresh_bool("b"))
        n = ex.fresh_int("n")
        ex.assume(n >= 0, check=False)
        builds.append((a, b))
        return a, b, n

    def run(ex: Explorer, replay: bool) -> Any:
        pre = ex.replayed("pre", lambda: build(ex)) if replay else build(ex)
        after = ex.fresh_int("after")
        c = bool(after > pre[2])
        return pre[0], pre[1], str(pre[2]), str(after), c

    plain = sorted(p.value for p in Explorer().paths(lambda ex: run(ex, False)))
    builds.clear()
    ex = Explorer()
    got = sorted(p.value for p in ex.paths(lambda ex: run(ex, True)))
    assert got == plain
    assert len(got) == 8
    assert sorted(builds) == [(a, b) for a in (False, True) for b in (False, True)]


def test_refutation_is_cached_per_assumption_set() -> None:
    """`x < 0` is refuted on every path that assumed `x >= 0`, and feasible on the paths
    that did not: a refutation cached for the side alone (not for the side under those
    assumptions) would lose them."""
    def f(ex: Explorer) -> tuple[bool, tuple[bool, ...], bool]:
        x = ex.fresh_int("x")
        guarded = bool(ex.fresh_bool("g"))
        if guarded:
            ex.assume(x >= 0)
        shape = tuple(bool(ex.fresh_bool(f"b{i}")) for i in range(4))
        return guarded, shape, bool(x < 0)

    ex = Explorer()
    got = sorted(p.value for p in ex.paths(f))
    shapes = list(itertools.product((False, True), repeat=4))
    assert got == sorted([(True, s, False) for s in shapes]
                         + [(False, s, neg) for s in shapes for neg in (False, True)])
    assert ex.implied > 0


def test_fingerprint_memo_gives_the_fingerprint_of_each_state() -> None:
    """States along a trace share the parts a step did not change (and the memo keeps
    them by identity): with one memo over all of them, every fingerprint is the one
    computed from scratch, and states that differ keep different fingerprints."""
    from dataclasses import replace

    s0 = scenarios.TRACE_TEMPLATE
    s1 = replace(s0, revision=5)
    p0 = s1.partitions[0]
    s2 = replace(s1, partitions=(replace(p0, term=3),))
    s3 = replace(s2, partitions=(replace(p0, state=replace(p0.state, start_offset=7)),))
    s4 = replace(s3, writes=(replace(s3.writes[0], offset=2), *s3.writes[1:]))
    states = [s0, s1, s2, s3, s4, replace(s4, revision=0)]
    seen: dict[int, tuple[Any, Any]] = {}
    memo = [fingerprint(s, seen) for s in states]
    assert memo == [fingerprint(s) for s in states]
    assert len(set(memo)) == len({repr(s) for s in states}) == 6
    assert seen  # the parts were memoised


def _explored_goal(name: str, pre: Any, post: Any, v: Any, fm: Any) -> z3.BoolRef:
    """`_goal` without its no-branch fast path: every leaf explored and joined."""
    from epochgc.model.invariants import mono_fresh_m
    from epochgc.model.logic import neg
    from epochgc.proofs.symterms import conj, disj
    from epochgc.proofs.symvalues import SymBool

    def goal(_: Any) -> Any:
        if name in INVARIANTS:
            return neg(INVARIANTS[name](post, v))
        t = TRANSITION_INVARIANTS[name]
        return neg(mono_fresh_m(pre, post, v, m=fm) if t is mono_fresh_m else t(pre, post, v))

    alts = []
    for leaf in Explorer(prune=False).paths(goal, errors=(obligations.ModelError,)):
        value = True if leaf.kind == "error" else leaf.value
        expr = value.expr if isinstance(value, SymBool) else z3.BoolVal(bool(value))
        alts.append(conj([*leaf.pc, expr]))
    return disj(alts)


@pytest.mark.parametrize("cached", [True, False])
def test_unbranched_goal_is_the_explored_goal(cached: bool) -> None:
    """The fast path (one evaluation when a goal never branches) gives the formula the
    joined exploration gives: the same term where there is one leaf, an equivalent one
    where the goal branches (mono_fresh_M on the model's own fresh_m)."""
    a, b = _two_states()
    for name in (*INVARIANTS, *TRANSITION_INVARIANTS):
        fm = obligations._FreshM() if cached else obligations.fresh_m
        got = _goal(name, a, b, REFERENCE, fm)
        want = _explored_goal(name, a, b, REFERENCE, fm)
        assert _equivalent(got, want), name
        if name != "mono_fresh_M" or cached:
            assert got.eq(want), name


def test_unbranched_refuses_a_branch() -> None:
    from epochgc.proofs.symctx import Branches, unbranched
    from epochgc.proofs.symvalues import SymBool

    x = SymBool(z3.Bool("x"))
    with pytest.raises(Branches):
        unbranched(lambda: 1 if x else 2)
    assert unbranched(lambda: 3 if SymBool(z3.BoolVal(True)) else 4) == 3


def test_a_goal_that_cannot_be_evaluated_counts_as_violated(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A ModelError while evaluating an obligation is a violation, on the fast path (no
    branch before it) as on an explored leaf (after a branch)."""
    from epochgc.model.errors import ModelError

    a, b = _two_states()

    def raises(s: Any, v: Any) -> Any:
        raise ModelError("safety", "x", "cannot evaluate")

    def branches_then_raises(s: Any, v: Any) -> Any:
        if s.cluster_epoch > 0:
            raise ModelError("safety", "x", "cannot evaluate")
        return True

    monkeypatch.setitem(INVARIANTS, "safety", raises)
    assert z3.is_true(_goal("safety", a, b, REFERENCE))
    monkeypatch.setitem(INVARIANTS, "safety", branches_then_raises)
    assert _equivalent(_goal("safety", a, b, REFERENCE), b.cluster_epoch.expr > 0)
