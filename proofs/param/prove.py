"""The parameterized proof: one Z3 query per (invariant, action), per (transition invariant,
action) and per invariant at init, over uninterpreted sorts of writes, objects, partitions
and replicas (any number of each; objects feeding any set of partitions; partitions
created at any time), with unbounded integers for epochs, revisions, offsets.

Each query assumes every invariant I1-I8 (universally quantified) on the pre-state and the
action's guard, and asks for a violated conjunct of the post-state, instantiated at fresh
elements (Skolem constants) so a counterexample names the write, object or partition it is
about. The formulas stay in the EPR-like fragment Z3's MBQI decides: quantifiers range
over the uninterpreted sorts only, functions between sorts are stratified (W -> O,
W -> P, and the GC guard's Skolem P -> R), and integers appear only as values. `unknown`
(a spent resource budget, symsolver.RLIMIT, included) is a failure. Every action also
gets a vacuity query: the assumed invariants plus its guard are satisfiable, with a
witness pre-state reported.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import z3

from epochgc.model.system import OBJECT_STATUS, WRITE_STATUS
from epochgc.proofs.obligations import Outcome
from epochgc.proofs.param import spec
from epochgc.proofs.param.logic import SIG, SORTS, St, Z3Logic
from epochgc.proofs.symsolver import RLIMIT, check
from epochgc.proofs.symsolver import solver as _budgeted

SEED = 11


def row(name: str, kind: str, status: str, seconds: float, detail: str = "",
        trace: Any = None, paths: int | None = None, query_s: float | None = None) -> Outcome:
    """A runner row with `scope="any"`, the witness count and the solver time (one query
    per row here; none for the correspondence rows, which evaluate without a solver)."""
    fields = {f.name for f in dataclasses.fields(Outcome)}
    extra: dict[str, Any] = {"scope": "any", "paths": paths,
                             "slowest_query_s": seconds if query_s is None else query_s}
    return Outcome(name, kind, status, seconds, detail, trace,
                   **{k: v for k, v in extra.items() if k in fields})


def _solver(seed: int, rlimit: int) -> z3.Solver:
    return _budgeted(seed, rlimit)


def _z(x: Any) -> Any:
    return z3.BoolVal(x) if isinstance(x, bool) else x


def assume_invariants(L: Z3Logic, s: St,
                      invariants: dict[str, list[spec.Conjunct]] | None = None) -> list[Any]:
    out = []
    for conjs in (invariants or spec.INVARIANTS).values():
        for _, sorts, body in conjs:
            out.append(_z(L.forall(sorts, lambda *xs, b=body: b(L, s, *xs)) if sorts
                          else body(L, s)))
    return out


@dataclasses.dataclass
class Goal:
    formula: Any
    parts: list[tuple[str, list[Any], Any]]  # (conjunct name, skolem elements, violated?)


def negated(L: Z3Logic, conjs: list[spec.Conjunct], tag: str,
            apply: Callable[[Callable[..., Any], list[Any]], Any]) -> Goal:
    parts = []
    for i, (name, sorts, body) in enumerate(conjs):
        sk = [L.const(f"{tag}.{i}.{s.lower()}{j}", s) for j, s in enumerate(sorts)]
        parts.append((name, sk, _z(z3.Not(_z(apply(body, sk))))))
    return Goal(z3.Or(*(p[2] for p in parts)), parts)


# -- counterexamples ---------------------------------------------------------------------


def _names(m: z3.ModelRef, L: Z3Logic) -> dict[str, list[Any]]:
    out = {}
    for s in SORTS:
        u = m.get_universe(L.sort[s])
        out[s] = list(u) if u is not None else []
    return out


def _elem_name(sort: str, e: Any, univ: dict[str, list[Any]], m: z3.ModelRef) -> str:
    v = m.eval(e, model_completion=True)
    for i, x in enumerate(univ[sort]):
        if z3.eq(x, v):
            return f"{sort.lower()}{i}"
    return str(v)


def _val(m: z3.ModelRef, t: Any) -> Any:
    v = m.eval(_z(t), model_completion=True)
    if z3.is_true(v):
        return True
    if z3.is_false(v):
        return False
    return v.as_long() if z3.is_int_value(v) else str(v)


def _fields(m: z3.ModelRef, L: Z3Logic, s: St, univ: dict[str, list[Any]]) -> dict[str, Any]:
    import itertools

    out: dict[str, Any] = {}
    for name, (args, _) in SIG.items():
        f = getattr(s, name)
        if not args:
            out[name] = _val(m, f())
            continue
        for tup in itertools.product(*(range(len(univ[a])) for a in args)):
            elems = [univ[a][i] for a, i in zip(args, tup, strict=True)]
            label = ",".join(f"{a.lower()}{i}" for a, i in zip(args, tup, strict=True))
            v = _val(m, f(*elems))
            names = {"wstatus": WRITE_STATUS, "ostatus": OBJECT_STATUS}.get(name)
            if names is not None and isinstance(v, int) and 0 <= v < len(names):
                v = names[v]
            out[f"{name}({label})"] = v
    for name in ("wobj", "wpart"):
        rng = "O" if name == "wobj" else "P"
        for i, w in enumerate(univ["W"]):
            out[f"{name}(w{i})"] = _elem_name(rng, getattr(s, name)(w), univ, m)
    return out


def explain(m: z3.ModelRef, L: Z3Logic, pre: St, post: St | None, goal: Goal | None,
            prm: dict[str, Any], sorts: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """A pre/post diff naming the violated conjunct and the element it is about."""
    univ = _names(m, L)
    a = _fields(m, L, pre, univ)
    lines = []
    named: set[str] = set()
    if goal is not None:
        for name, sk, viol in goal.parts:
            if z3.is_true(m.eval(viol, model_completion=True)):
                elems = [_elem_name(x.sort().name(), x, univ, m) for x in sk]
                named.update(elems)
                lines.append(f"violated: {name}" + (f" for {', '.join(elems)}" if elems else ""))
    params = {k: (_elem_name(sorts[k], v, univ, m) if sorts[k] in SORTS else _val(m, v))
              for k, v in prm.items()}
    named.update(str(v) for k, v in params.items() if sorts[k] in SORTS)
    for w in [x for x in named if x.startswith("w")]:  # a write's object and partition
        named.update((str(a.get(f"wobj({w})")), str(a.get(f"wpart({w})"))))
    lines.append("universe: " + ", ".join(f"{len(univ[s])} {s}" for s in SORTS)
                 + "; params: " + ", ".join(f"{k}={v}" for k, v in params.items()))
    trace: dict[str, Any] = {"pre": a, "params": params}
    if post is not None:
        b = _fields(m, L, post, univ)
        trace["post"] = b
        diff = [f"  {k}: {a[k]} -> {b[k]}" for k in a if a[k] != b[k]]
        lines.append("changed:" if diff else "changed: nothing")
        lines += diff
    def about(k: str) -> bool:
        args = k[k.index("(") + 1:-1].split(",") if "(" in k else []
        return not args or any(x in named for x in args)

    lines.append("pre (globals and the elements named above): "
                 + " ".join(f"{k}={v}" for k, v in a.items() if about(k)))
    return "\n".join(lines), trace


# -- the queries ----------------------------------------------------------------------------


def _check(solver: z3.Solver, extra: Any) -> tuple[z3.CheckSatResult, float]:
    t0 = time.perf_counter()
    solver.push()
    solver.add(extra)
    r = check(solver)[0]
    return r, time.perf_counter() - t0


def prove_init(seed: int = SEED, rlimit: int = RLIMIT,
               invariants: dict[str, list[spec.Conjunct]] | None = None) -> list[Outcome]:
    invariants = invariants or spec.INVARIANTS
    L = Z3Logic()
    s = L.state("")
    out = [init_satisfiable(L, s, seed, rlimit)]
    for name, conjs in invariants.items():
        solver = _solver(seed, rlimit)
        solver.add(spec.init(L, s))
        goal = negated(L, conjs, f"init.{name}",
                       lambda body, sk: body(L, s, *sk))
        r, dt = _check(solver, goal.formula)
        label = f"init => {name} (any size)"
        if r == z3.unsat:
            out.append(row(label, "invariant", "proved", dt, paths=1))
        elif r == z3.sat:
            detail, tr = explain(solver.model(), L, s, None, goal, {}, {})
            out.append(row(label, "invariant", "failed", dt, detail, tr))
        else:
            out.append(row(label, "invariant", "unknown", dt, solver.reason_unknown()))
        solver.pop()
    return out


def init_satisfiable(L: Z3Logic, s: St, seed: int, rlimit: int) -> Outcome:
    """Every `init => I` row is vacuous if init has no model: find one, and print it."""
    solver = _solver(seed, rlimit)
    r, dt = _check(solver, _z(spec.init(L, s)))
    name = "init is satisfiable (any size)"
    if r == z3.sat:
        detail, tr = explain(solver.model(), L, s, None, None, {}, {})
        state = " ".join(f"{k}={v}" for k, v in tr["pre"].items())
        return row(name, "vacuity", "found", dt, f"an initial state: {state}\n{detail}", tr,
                   paths=1)
    if r == z3.unsat:
        return row(name, "vacuity", "failed", dt, "vacuous: spec.init has no model, so every "
                   "init => I row holds of nothing")
    return row(name, "vacuity", "unknown", dt, solver.reason_unknown())


def antecedents(L: Z3Logic, solver: z3.Solver, pre: St, post: St, action: str
                ) -> Outcome:
    """Each transition invariant conjunct `ante => cons`: `ante` holds for some pre/post
    pair of the action under the invariants (else the conjunct is vacuous there)."""
    vacuous, slowest, n = [], 0.0, 0
    for name, conjs in spec.TRANSITION_INVARIANTS.items():
        for cname, sorts, _ in conjs:
            if action not in spec.ANTECEDENT_ACTIONS.get(cname, (action,)):
                continue
            ante = spec.ANTECEDENTS[cname]
            sk = [L.const(f"{action}.ante.{cname}.{x}{j}", x) for j, x in enumerate(sorts)]
            r, dt = _check(solver, _z(ante(L, pre, post, *sk)))
            slowest = max(slowest, dt)
            n += 1
            if r == z3.unknown:
                solver.pop()
                return row(f"T1-T4 antecedents satisfiable under {action} (any size)",
                           "vacuity", "unknown", slowest, f"{name}: {solver.reason_unknown()}")
            if r == z3.unsat:
                vacuous.append(f"{name}: {cname}")
            solver.pop()
    label = f"T1-T4 antecedents satisfiable under {action} (any size)"
    if vacuous:
        return row(label, "vacuity", "failed", slowest, "vacuous: " + "; ".join(vacuous))
    return row(label, "vacuity", "found", slowest, f"{n} antecedents", paths=n)


def prove_action(action: str, seed: int = SEED, rlimit: int = RLIMIT,
                 actions: dict[str, Any] | None = None,
                 invariants: dict[str, list[spec.Conjunct]] | None = None) -> list[Outcome]:
    """Vacuity, then every (invariant, action) and (transition invariant, action) query."""
    actions = actions or spec.ACTIONS
    invariants = invariants or spec.INVARIANTS
    params, choices, fn = actions[action]
    L = Z3Logic()
    pre = L.state("")
    prm = {n: L.const(f"{action}.{n}", k) for n, k in (*params, *choices)}
    sorts = dict((*params, *choices))
    guard, post = fn(L, pre, prm)
    solver = _solver(seed, rlimit)
    for f in assume_invariants(L, pre, invariants):
        solver.add(f)

    r, dt = _check(solver, _z(guard))
    if r != z3.sat:
        status = "failed" if r == z3.unsat else "unknown"
        why = ("vacuous: no pre-state satisfying the invariants enables it" if r == z3.unsat
               else solver.reason_unknown())
        solver.pop()
        return [row(f"{action} is enabled under the invariants (any size)", "vacuity",
                    status, dt, why)]
    witness, wtrace = explain(solver.model(), L, pre, None, None, prm, sorts)
    solver.pop()
    solver.add(_z(guard))

    out = [row(f"{action} is enabled under the invariants (any size)", "vacuity", "found",
               dt, "witness pre-state:\n" + witness, wtrace, paths=1),
           antecedents(L, solver, pre, post, action)]
    goals = [(n, c, "invariant", lambda body, sk: body(L, post, *sk))
             for n, c in invariants.items()]
    goals += [(n, c, "transition", lambda body, sk: body(L, pre, post, *sk))
              for n, c in spec.TRANSITION_INVARIANTS.items()]
    for name, conjs, kind, apply in goals:
        goal = negated(L, conjs, f"{action}.{name}", apply)
        r, dt = _check(solver, goal.formula)
        label = f"{name} preserved by {action} (any size)"
        if r == z3.unsat:
            o = row(label, kind, "proved", dt, paths=1)
        elif r == z3.sat:
            detail, tr = explain(solver.model(), L, pre, post, goal, prm, sorts)
            o = row(label, kind, "failed", dt, "counterexample to induction\n" + detail, tr)
        else:
            o = row(label, kind, "unknown", dt, f"solver: {solver.reason_unknown()}")
        solver.pop()
        out.append(o)
    return out


def jobs(seed: int = SEED, rlimit: int = RLIMIT) -> list[tuple[Any, tuple[Any, ...]]]:
    """The runner's entry point: every job of the parameterized proof and the
    correspondence check, `(module-level function, args)`, each returning rows."""
    from epochgc.proofs.param import tasks  # tasks builds on this module

    return tasks.jobs(seed, rlimit)
