"""Proof obligations over the system model (mypyvy shape):

- `Init => I` for every invariant;
- `Inv(pre) and Action(pre, post) => I(post)` for every (invariant, action): induction;
- `Inv(pre) and Action(pre, post) => T(pre, post)` for every transition invariant.

Each is a set of solver checks over every feasible path of the action's own Python code.
A failing check yields a counterexample (pre-state, parameters, post-state) that is
re-run through the concrete model before it is reported, so a report is never an
artefact of the encoding.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import z3

from model.errors import ModelError
from model.logic import neg
from model.system import ACTIONS, INVARIANTS, TRANSITION_INVARIANTS, System, holds
from model.variants import Variant
from proofs.sym import Explorer, SolverUnknown, SymBool, concretize, conj, disj
from proofs.symstate import symbolic_params, symbolic_system


@dataclass
class Outcome:
    name: str
    kind: str  # invariant | witness | counterexample | crosshair
    status: str  # proved | found | failed | unknown
    seconds: float = 0.0
    detail: str = ""
    trace: Any = None  # a counterexample or witness, concrete


@dataclass
class _Acc:
    seconds: float = 0.0
    checks: int = 0
    cex: Any = None
    unknown: str | None = None


def _violated(ex: Explorer, goal: z3.BoolRef) -> bool:
    """Is the negated obligation satisfiable on the current path?"""
    return ex.model_for((), goal) is not None


def init_obligations(template: System, v: Variant) -> list[Outcome]:
    out = []
    for name, inv in INVARIANTS.items():
        t0 = time.perf_counter()
        ok = inv(template, v)
        out.append(Outcome(f"init => {name}", "invariant", "proved" if ok is True else "failed",
                           time.perf_counter() - t0))
    return out


def induction(
    template: System, v: Variant, actions: list[str] | None = None, timeout_ms: int = 2000
) -> list[Outcome]:
    """Explore each action once from an arbitrary pre-state satisfying every invariant, and
    ask, on every path, whether any invariant or transition invariant can fail after it."""
    results: list[Outcome] = []
    for action in actions or list(ACTIONS):
        fn = ACTIONS[action][0]
        accs: dict[str, _Acc] = {n: _Acc() for n in (*INVARIANTS, *TRANSITION_INVARIANTS)}
        ex = Explorer(timeout_ms=timeout_ms)

        def run(ex: Explorer, fn: Callable[..., System] = fn, action: str = action) -> Any:
            pre = symbolic_system(ex, template)
            ex.assume(holds(pre, v))
            params = symbolic_params(ex, pre, action, symmetric=True)
            return pre, params, fn(pre, v, **params)

        t_explore = time.perf_counter()
        try:
            for path in ex.paths(run, errors=(ModelError,)):
                if path.kind != "ok":
                    continue
                pre, params, post = path.value
                open_ = [n for n, a in accs.items() if a.cex is None and a.unknown is None]
                t0 = time.perf_counter()
                # One check for all obligations on this path; only if some obligation can
                # fail here do we ask them one by one (to name it and get its witness).
                goals = [_goal(name, pre, post, v) for name in open_]
                if not _violated(ex, disj(goals)):
                    share_ = (time.perf_counter() - t0) / max(1, len(open_))
                    for name in open_:
                        accs[name].seconds += share_
                    continue
                for name, g in zip(open_, goals, strict=True):
                    t1 = time.perf_counter()
                    try:
                        _check_one(ex, name, g, pre, params, v, fn, accs[name])
                    except SolverUnknown as e:
                        accs[name].unknown = str(e)
                    accs[name].seconds += time.perf_counter() - t1
        except SolverUnknown as e:
            for acc in accs.values():
                acc.unknown = acc.unknown or f"while exploring {action}: {e}"
        explore = time.perf_counter() - t_explore - sum(a.seconds for a in accs.values())
        share = explore / len(accs)  # exploration is shared by every obligation of the action
        for name, acc in accs.items():
            kind = "invariant"
            label = f"{name} preserved by {action}"
            if acc.unknown is not None:
                results.append(Outcome(label, kind, "unknown", acc.seconds + share, acc.unknown))
            elif acc.cex is not None:
                results.append(Outcome(label, kind, "failed", acc.seconds + share,
                                       "counterexample to induction", acc.cex))
            else:
                results.append(Outcome(label, kind, "proved", acc.seconds + share))
    return results


def _goal(name: str, pre: System, post: System, v: Variant) -> z3.BoolRef:
    """The negated obligation on this path as one formula. Obligations that branch
    (the fresh M is a min/max over reports) are explored and joined as a disjunction of
    (branch condition and negated result)."""
    sub = Explorer(prune=False)  # branches are joined into one formula: no solver calls

    def goal(_: Explorer) -> Any:
        if name in INVARIANTS:
            return neg(INVARIANTS[name](post, v))
        return neg(TRANSITION_INVARIANTS[name](pre, post, v))

    alternatives: list[z3.BoolRef] = []
    for leaf in sub.paths(goal, errors=(ModelError,)):
        value = leaf.value
        if leaf.kind == "error":  # cannot even evaluate it there: count as a violation
            value = True
        expr = value.expr if isinstance(value, SymBool) else z3.BoolVal(bool(value))
        alternatives.append(conj([*leaf.pc, expr]))
    return disj(alternatives)


def _check_one(
    ex: Explorer, name: str, goal: z3.BoolRef, pre: System, params: dict[str, Any],
    v: Variant, fn: Callable[..., System], acc: _Acc,
) -> None:
    model = ex.model_for((), goal)
    if model is None:
        return
    c_pre = concretize(pre, model)
    c_params = concretize(params, model)
    c_post = fn(c_pre, v, **c_params)
    still = (
        INVARIANTS[name](c_post, v) if name in INVARIANTS
        else TRANSITION_INVARIANTS[name](c_pre, c_post, v)
    )
    assert holds(c_pre, v) is True, "engine bug: counterexample pre-state breaks Inv"
    assert still is False, "engine bug: symbolic counterexample does not replay"
    acc.cex = {"pre": c_pre, "params": c_params, "post": c_post}
