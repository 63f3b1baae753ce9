"""What the explorer reuses instead of recomputing (issue 11's proof speed) must be exactly
what recomputing would give: a per-prefix value per decision prefix, a goal per distinct
(pre, post), and a decision forced by a literal of the path condition only when it is
one."""

from __future__ import annotations

from typing import Any

import pytest
import z3

from model.system import INVARIANTS, TRANSITION_INVARIANTS
from model.variants import REFERENCE, variant
from proofs import obligations, scenarios
from proofs.obligations import _goal, _GoalMemo, fingerprint
from proofs.sym import Explorer
from proofs.symstate import symbolic_system


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
            assert got.eq(_goal(name, pre, b, REFERENCE)), name
    # one goal per invariant (post b both times), two per transition invariant
    assert len(memo._by_key) == len(INVARIANTS) + 2 * len(TRANSITION_INVARIANTS)


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
    batch = obligations._Batch(2000, 0)
    first = obligations._Pending((c, a), {"safety": z3.And(a, z3.Not(a))}, None, {}, None)
    second = obligations._Pending((c, z3.Not(a)), {"safety": b}, None, {}, None)
    assert not batch.clean([first, second])
    assert not batch.clean([second, first])
    safe = obligations._Pending((c, z3.Not(a)), {"safety": z3.And(b, a)}, None, {}, None)
    assert batch.clean([first, safe])


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
