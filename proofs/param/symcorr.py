"""The correspondence as a proof: over every state of a bounded shape, with every integer
symbolic, the Python model (`model/system.py`, run on Z3 terms by `proofs.sym`) and the
quantified formulas (`spec.py`, expanded over the shape's finite universe) agree.

For each action and shape, per path of the Python action on a symbolic pre-state that
satisfies the quantified invariants I1-I9 (and the Python invariants' conjuncts on fields
the abstraction forgets: terms >= 0, seen windows ordered), with the SAME parameters:

- python -> formula: where Python takes the step, the formula's guard holds and its
  successor is Python's (the formula's existential choices, the stamp, the fence's
  verdict, the round's M, read off Python's successor);
- formula -> python: where the formula's guard holds (every choice), Python takes the
  step and gives that successor. The fence is havocked in the formula and reads a seen
  window the abstraction forgets, so for the fence's actions this direction runs Python
  on the seen window the formula's verdict picks (none: the applied window decides; one
  above the epoch: it rejects); the round's M is Python's over the snapshot's reports and
  one foreign partition reporting M (or nothing, for a blocked round).

Predicates: for every state of the shape (no invariant assumed), each Python invariant
I1-I8 equals its quantified version; for every pair of states, each transition invariant
T1-T4; `spec.init` holds of exactly the abstraction of `model.system.initial`. A
predicate's paths are enumerated without the solver and joined into one query per row
(`_compare`). Any `unknown` is a failure.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import z3

from epochgc.model.actions import ACTIONS, step
from epochgc.model.errors import ModelError
from epochgc.model.fence import SeenWindow
from epochgc.model.invariants import INVARIANTS, TRANSITION_INVARIANTS, fresh_m, mono_fresh_m
from epochgc.model.system import FENCED, OBJECT_STATUS, WRITE_STATUS, System
from epochgc.model.variants import REFERENCE, Variant
from epochgc.proofs.param import spec
from epochgc.proofs.param.lazy import WINDOW, lazy_system, optional, with_plain
from epochgc.proofs.param.logic import BOOL, INT, SIG, St, Structure, finite_state, materialize
from epochgc.proofs.sym import Explorer, SolverUnknown
from epochgc.proofs.symsolver import RLIMIT, check
from epochgc.proofs.symsolver import solver as budgeted
from epochgc.proofs.symstate import choice
from epochgc.proofs.symterms import conj, const_bool, const_int, disj, eq_terms, negation
from epochgc.proofs.symvalues import SymBool, SymInt, expr_of

# min/max over symbolic ints as one term, not a fork per comparison (symmerge.sym_max).
MERGE = True


class NotAbstractable(ValueError):
    """A Python state the abstraction has no image for (window fields not set together)."""


def z(x: Any) -> Any:
    """A Z3 term for a Python value (int, bool, symbolic) or a Z3 term."""
    if isinstance(x, z3.ExprRef):
        return x
    return expr_of(x)


class TermLogic:
    """`spec.py`'s logic on a finite universe (elements are ints 0..n-1) whose values are
    Z3 terms: quantifiers expand to finite conjunctions, connectives build formulas."""

    def __init__(self, sizes: dict[str, int]) -> None:
        self.sizes = sizes

    def And(self, *xs: Any) -> Any:
        rest = []
        for x in xs:
            if x is False:
                return False
            if x is not True:
                rest.append(z(x))
        return conj(rest) if rest else True  # one C call, no per-argument coercion

    def Or(self, *xs: Any) -> Any:
        rest = []
        for x in xs:
            if x is True:
                return True
            if x is not False:
                rest.append(z(x))
        return disj(rest) if rest else False

    def Not(self, x: Any) -> Any:
        return (not x) if isinstance(x, bool) else negation(z(x))

    def Implies(self, a: Any, b: Any) -> Any:
        return self.Or(self.Not(a), b)

    def Ite(self, c: Any, a: Any, b: Any) -> Any:
        if isinstance(c, bool):
            return a if c else b
        return z3.If(z(c), z(a), z(b))

    def _elems(self, sorts: Sequence[str]) -> Iterator[tuple[int, ...]]:
        return itertools.product(*(range(self.sizes[s]) for s in sorts))

    def forall(self, sorts: Sequence[str], body: Callable[..., Any]) -> Any:
        return self.And(*(body(*xs) for xs in self._elems(sorts)))

    def exists(self, sorts: Sequence[str], body: Callable[..., Any]) -> Any:
        return self.Or(*(body(*xs) for xs in self._elems(sorts)))


def sizes_of(s: System) -> dict[str, int]:
    return {"W": len(s.writes), "O": len(s.objects), "P": len(s.partitions),
            "R": len(s.partitions[0].replicas) if s.partitions else 0}


_OPTS: dict[tuple[int, int], tuple[Any, Any, Any]] = {}
_ZERO = z3.IntVal(0)


def _opt(present: Any, value: Any) -> Any:
    """The canonical abstraction of an optional value: the value when present, else 0.
    (Memoised by the operands' AST addresses, the operands kept alive beside the term:
    every path rebuilds the same terms.)"""
    if isinstance(present, bool):
        return value if present else 0
    v = z(value)
    k = (present.as_ast().value, v.as_ast().value)
    hit = _OPTS.get(k)
    if hit is None:
        hit = _OPTS[k] = (z3.If(present, v, _ZERO), present, v)
    return hit[0]


def abstract(s: System) -> Structure:
    """`proofs.param.correspond.abstract` on symbolic (and lazy) states, deciding nothing:
    an undecided optional field is a formula."""
    out: Structure = {"revision": s.revision, "cluster_epoch": s.cluster_epoch,
                      "snapshot_revision": s.snapshot_revision, "clock": s.clock,
                      "grace": s.grace, "cache_floor": s.cache_floor}
    present, m = optional(s, "gc_m")
    out["gc_set"], out["gc_m"] = present, _opt(present, m)
    per: dict[str, dict[tuple[int, ...], Any]] = {n: {} for n, (a, _) in SIG.items()
                                                  if a and a[0] == "P"}
    for p, part in enumerate(s.partitions):
        k = (p,)
        opts = [optional(part.state, f) for f in WINDOW]
        flags = [pr for pr, _ in opts]
        if all(isinstance(f, bool) for f in flags) and len(set(flags)) > 1:
            raise NotAbstractable(f"p{p}: window fields not set together")
        if not all(f is flags[0] for f in flags) and not all(isinstance(f, bool)
                                                             for f in flags):
            raise NotAbstractable(f"p{p}: window fields of different groups")
        per["created"][k], per["crev"][k] = part.created, part.creation_revision
        per["wset"][k] = flags[0]
        for name, (pr, v) in zip(("max", "prev", "floor", "woff"), opts, strict=True):
            per[name][k] = _opt(pr, v)
        per["lrlo"][k] = part.state.last_reconciled_log_offset
        _abstract_barrier(per, k, part.state)
        per["log_end"][k] = part.log_end
        per["in_snap"][k] = part.in_snapshot
        for r, rep in enumerate(part.replicas):
            ip, iv = optional(rep, "inactive")
            rp, rv = optional(rep, "reported")
            per["iset"][(p, r)], per["inact"][(p, r)] = ip, _opt(ip, iv)
            per["rset"][(p, r)], per["rep"][(p, r)] = rp, _opt(rp, rv)
            per["rnull"][(p, r)] = rep.reported_null
    out.update(per)
    from epochgc.proofs.param.correspond import object_write_fields

    out.update(object_write_fields(s))
    return {k: ({a: z(v) for a, v in val.items()} if isinstance(val, dict) and k in SIG
                else val if isinstance(val, dict) else z(val)) for k, val in out.items()}


_ABSTRACT: dict[int, tuple[System, Structure]] = {}


def _abstract_once(s: System) -> Structure:
    """`abstract(s)` of a state nothing has decided yet, once per state object: every path
    of an exploration gets the same (cached, `lazy.lazy_system`) state, undecided again."""
    hit = _ABSTRACT.get(id(s))
    if hit is None or hit[0] is not s:
        if len(_ABSTRACT) > 64:
            _ABSTRACT.clear()
        hit = _ABSTRACT[id(s)] = (s, abstract(s))
    return hit[1]


def _abstract_barrier(per: dict[str, dict[tuple[int, ...], Any]], k: tuple[int, ...],
                      st: Any) -> None:
    """The barrier's fields (R36-R38) of one partition, deciding nothing (negative is
    none: -1 in the model's states)."""
    be, bo, gv = z(st.barrier_epoch), z(st.barrier_offset), z(st.gc_safe_epoch)
    key = (be.as_ast().value, bo.as_ast().value, gv.as_ast().value)
    hit = _BARRIERS.get(key)
    if hit is None:  # every path's post-state has the same terms: built once
        bp, gp = be >= 0, gv >= 0
        hit = _BARRIERS[key] = ((bp, _opt(bp, be), _opt(bp, bo), gp, _opt(gp, gv)),
                                (be, bo, gv))  # the operands kept alive: keys stay valid
    (per["bset"][k], per["bepoch"][k], per["boff"][k], per["gset"][k],
     per["gsafe"][k]) = hit[0]


_BARRIERS: dict[tuple[int, int, int], tuple[tuple[Any, ...], tuple[Any, ...]]] = {}


def extras(s: System) -> Any:
    """The Python invariants' conjuncts on fields the abstraction forgets (I3: a term is
    not negative, a seen window has previous <= max), without deciding anything."""
    out = []
    for part in s.partitions:
        out.append(z(part.term) >= 0)
        for rep in part.replicas:
            pr, sw = optional(rep, "seen")
            if sw is not None:
                out.append(z3.Implies(z(pr), z(sw.previous) <= z(sw.max)))
    return z3.And(*out)


def equal(a: Structure, b: Structure) -> Any:
    """Two abstract states are the same (every mutable field at every element)."""
    out = []
    for name, (args, _) in SIG.items():
        pairs = [(z(a[name][k]), z(b[name][k])) for k in a[name]] if args else [
            (z(a[name]), z(b[name]))]
        # The same term on both sides (most fields: Z3 hash-conses) needs no equation.
        out += [eq_terms(x, y) for x, y in pairs if x.as_ast().value != y.as_ast().value]
    return conj(out)


def holds_all(L: TermLogic, st: St, conjs: list[spec.Conjunct], *pre: St) -> Any:
    return L.And(*((L.forall(sorts, lambda *xs, b=body: b(L, *pre, st, *xs)) if sorts
                    else body(L, *pre, st)) for _, sorts, body in conjs))


def spec_inv(L: TermLogic, st: St) -> Any:
    return L.And(*(holds_all(L, st, c) for c in spec.INVARIANTS.values()))


# -- the report of a disagreement -----------------------------------------------------------


def _label(name: str, k: tuple[int, ...]) -> str:
    args = SIG[name][0]
    return f"{name}({','.join(f'{a.lower()}{i}' for a, i in zip(args, k, strict=True))})"


def shown(struct: Structure, m: z3.ModelRef) -> dict[str, Any]:
    """An abstract state's value in a model, in the spec's vocabulary."""
    out: dict[str, Any] = {}
    for name, (args, _) in SIG.items():
        items = struct[name].items() if args else [((), struct[name])]
        for k, v in items:
            val = m.eval(z(v), model_completion=True)
            x: Any = (z3.is_true(val) if z3.is_bool(val) else val.as_long())
            names = {"wstatus": WRITE_STATUS, "ostatus": OBJECT_STATUS}.get(name)
            if names is not None and 0 <= x < len(names):
                x = names[x]
            out[_label(name, k) if args else name] = x
    return out


def _diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return [f"  {k}: {a[k]} / {b[k]}" for k in a if a[k] != b[k]]


# -- the checks -----------------------------------------------------------------------------


@dataclass
class Result:
    shape: str
    what: str
    paths: int = 0
    queries: int = 0
    slowest_s: float = 0.0
    failure: str = ""  # empty when proved
    unknown: bool = False


FENCE_ACTIONS = ("fence_write", "other_write", "phantom_fence")
HAVOC = (*FENCE_ACTIONS, "gc_compute")  # the formula -> python direction runs apart


def _python_params(ex: Explorer, s: System, action: str, tag: str,
                   skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """Python's parameters: indices one path each, numbers fresh unbounded integers."""
    sz = sizes_of(s)
    out: dict[str, Any] = {}
    for name, kind in ACTIONS[action][1]:
        if kind in skip:
            continue
        key = f"{tag}{action}.{name}"
        if kind in ("partition", "replica", "object", "write"):
            n = sz[{"partition": "P", "replica": "R", "object": "O", "write": "W"}[kind]]
            out[name] = choice(ex, key, n)
        elif kind in ("epoch", "offset"):
            out[name] = ex.fresh_int(key)
        elif kind == "foreign":
            out[name] = (ex.fresh_opt_int(key),) if ex.decide(const_bool(f"{key}.any")) else ()
        else:
            raise AssertionError(kind)
    return out


def _choices(action: str) -> dict[str, Any]:
    _, choices, _ = spec.ACTIONS[action]
    return {n: (const_int(f"choice.{action}.{n}") if k == INT else
                const_bool(f"choice.{action}.{n}")) for n, k in choices}


def _derived(action: str, prm: dict[str, Any], post: Structure) -> dict[str, Any]:
    """The formula's existential choices that Python's step made (python -> formula)."""
    if action == "upload":
        return {"e": post["oepoch"][(prm["o"],)]}
    if action == "fence_write":
        return {"admit": post["wstatus"][(prm["w"],)] == FENCED}
    if action == "gc_compute":
        return {"go": post["gc_set"], "M": post["gc_m"]}
    return {}


# The abstract pre-state is built before any decision, from the same names on every path,
# so it is the same terms on every path (Z3 hash-conses them): the formula side depends on
# the path only through the parameters. Keyed by the parameters' AST ids (or elements).
_FORMULAS: dict[tuple[Any, ...], tuple[Any, Structure, Any]] = {}


def _key(x: Any) -> Any:
    return x.get_id() if isinstance(x, z3.AstRef) else x


def _formula(action: str, pre: Structure, sizes: dict[str, int], prm: dict[str, Any],
             fn: Any = None) -> tuple[Any, Structure]:
    """The formula's guard and post-state for `action` (`fn`: another formula for it, a
    variant's, e.g. `liveness.gc_compute_old`)."""
    k = (action, getattr(fn, "__qualname__", ""), z(pre["revision"]).get_id(),
         *((n, _key(v)) for n, v in sorted(prm.items())))
    hit = _FORMULAS.get(k)
    if hit is None:
        L = TermLogic(sizes)
        guard, post = (fn or spec.ACTIONS[action][2])(L, finite_state(pre), prm)
        hit = _FORMULAS[k] = (guard, materialize(post, sizes, pre), prm)
    return hit[0], hit[1]


def _spec_prm(action: str, py: dict[str, Any]) -> dict[str, Any]:
    params, _, _ = spec.ACTIONS[action]
    return {n: (z(py[n]) if k in (INT, BOOL) else py[n]) for n, k in params}


# Per shape: the assumed invariants (I1-I9 expanded over the shape, and `extras`) and the
# abstract pre-state. The pre-state is built from the same names for every action of a
# shape, so it is the same terms (Z3 hash-conses them): expanding the invariants once per
# shape instead of once per action (it cost as much as the paths of most actions).
_PRE: dict[tuple[Any, ...], tuple[Any, Structure]] = {}


def _shape_key(template: System) -> tuple[Any, ...]:
    return (len(template.partitions), len(template.partitions[0].replicas),
            len(template.objects), tuple((w.obj, w.partition) for w in template.writes))


def _pre_of(pre: System, template: System, sizes: dict[str, int]) -> tuple[Any, Structure]:
    first = abstract(pre)
    key = _shape_key(template)
    hit = _PRE.get(key)
    if hit is None or any(z(hit[1][k]).get_id() != z(first[k]).get_id()
                          for k in ("revision", "clock")):
        hit = _PRE[key] = (z3.And(z(spec_inv(TermLogic(sizes), finite_state(first))),
                                  extras(pre)), first)
    return hit


_SOLVERS: dict[tuple[Any, ...], tuple[Any, Any]] = {}


def _shared(template: System, sizes: dict[str, int], rlimit: int, seed: int
            ) -> tuple[Any, Any]:
    """(the assumed invariants, a solver holding them, or None when they have no model)
    for the shape: one per shape and seed, which every action's exploration pushes on."""
    key = (*_shape_key(template), seed)
    hit = _SOLVERS.get(key)
    if hit is None:
        ex = Explorer(prune=False)
        pre = next(iter(ex.paths(lambda ex: lazy_system(ex, template)))).value
        inv = _pre_of(pre, template, sizes)[0]
        solver = budgeted(seed, rlimit)
        solver.add(inv)
        r = check(solver)[0]
        if r == z3.unknown:
            raise SolverUnknown(f"the assumed invariants: {solver.reason_unknown()}")
        hit = _SOLVERS[key] = (inv, solver if r == z3.sat else None)
    return hit


def check_action(action: str, shape: str, template: System, rlimit: int = RLIMIT,
                 seed: int = 0, mode: str = "both", variant: Variant = REFERENCE,
                 formula: Any = None, foreign: bool = True) -> Result:
    """Both directions for one action on one shape (`mode`: "both", or for the havocked
    actions "py" (python -> formula) and "fo" (formula -> python)). Stops at the first
    disagreement. `variant` and `formula`: the Python model under another variant against
    that variant's formula for the action (the spec's own by default). `foreign` False:
    the shape is the whole universe (no partition outside it reports to gc_compute)."""
    res = Result(shape, f"{action} ({mode})")
    sizes = sizes_of(template)
    chosen = _choices(action)
    try:
        inv, solver = _shared(template, sizes, rlimit, seed)
    except SolverUnknown as e:
        res.unknown, res.failure = True, f"solver: unknown ({e})"
        return res
    if solver is None:
        res.failure = ("the assumed invariants have no model on this shape: every action "
                       "would correspond vacuously")
        return res
    ex = Explorer(rlimit=rlimit, seed=seed, merge=MERGE, solver=solver,
                  asserted=(inv,))

    assumed: list[Any] = []
    _FORMULAS.clear()

    def run(ex: Explorer) -> Any:
        pre = lazy_system(ex, template)
        if not assumed:  # the same terms on every path (see _FORMULAS)
            assumed.extend(_pre_of(pre, template, sizes))
        a = assumed[1]
        ex.assume(SymBool(assumed[0]))
        if mode == "fo" and action in HAVOC:
            py, fprm, pre = _fo_params(ex, pre, action, chosen)
        elif not foreign:
            py = {**_python_params(ex, pre, action, "", skip=("foreign",)), "foreign": ()}
            fprm = _spec_prm(action, py)
        else:
            py = _python_params(ex, pre, action, "")
            fprm = _spec_prm(action, py)
        try:
            post: Any = step(pre, variant, action, **py)
        except ModelError as e:
            post = e
        return a, py, fprm, post

    try:
        for path in ex.paths(run):
            if path.kind == "pruned":
                continue
            res.paths += 1
            a, py, fprm, post = path.value
            ok = isinstance(post, System)
            b = abstract(post) if ok else None
            queries: list[tuple[str, Any, Any]] = []  # (side, query, formula post)
            if mode in ("both", "py"):
                if ok:
                    assert b is not None
                    g, f = _formula(action, a, sizes, {**fprm, **_derived(action, py, b)},
                                    formula)
                    queries.append(("python step the formula forbids or lands elsewhere",
                                    negation(conj([z(g), equal(b, f)])), f))
                elif mode == "both":
                    g, f = _formula(action, a, sizes, {**fprm, **chosen}, formula)
                    queries.append(("formula step python refuses", z(g), f))
            if mode in ("both", "fo"):
                prm = {**fprm, **chosen} if mode == "both" else fprm
                g, f = _formula(action, a, sizes, prm, formula)
                if ok:
                    assert b is not None
                    queries.append(("formula step python lands elsewhere",
                                    conj([z(g), negation(equal(b, f))]), f))
                else:
                    queries.append(("formula step python refuses", z(g), f))
            for side, q, f in queries:
                res.queries += 1
                t1 = time.perf_counter()
                sat = ex._sat(q)
                res.slowest_s = max(res.slowest_s, time.perf_counter() - t1)
                if sat:
                    res.failure = _explain(ex.solver.model(), side, action, py, a, b, f,
                                           post)
                    return res
    except SolverUnknown as e:
        res.unknown, res.failure = True, f"solver: unknown ({e})"
    except NotAbstractable as e:
        res.failure = f"python state outside the abstraction: {e}"
    res.slowest_s = max(res.slowest_s, ex.slowest_query_s)
    return res


def _fo_params(ex: Explorer, pre: System, action: str, chosen: dict[str, Any]
               ) -> tuple[dict[str, Any], dict[str, Any], System]:
    """formula -> python for the havocked actions: the formula's parameters and choices,
    the Python parameters, and the pre-state with the seen window that realizes them."""
    py = _python_params(ex, pre, action, "", skip=("foreign",))
    fprm = _spec_prm(action, py)
    if action == "gc_compute":
        # One foreign partition reporting M (the round's M is then at most M: exactly M
        # when the formula's guard holds), or reporting nothing (the round blocks).
        py["foreign"] = (SymInt(chosen["M"]),) if SymBool(chosen["go"]) else (None,)
        return py, {**fprm, **chosen}, pre
    p = py["p"] if "p" in py else pre.writes[py["w"]].partition
    part = pre.partitions[p]
    seen = None
    if action == "fence_write":
        fprm = {**fprm, **chosen}
        if not SymBool(chosen["admit"]):
            e = pre.objects[pre.writes[py["w"]].obj].epoch
            seen = SeenWindow(part.term, e + 1, e + 1)  # above the epoch: rejects it
    reps = list(part.replicas)
    reps[part.leader] = with_plain(reps[part.leader], seen=seen)
    parts = list(pre.partitions)
    parts[p] = replace(part, replicas=tuple(reps))
    return py, fprm, with_plain(pre, partitions=tuple(parts))


def _explain(m: z3.ModelRef, side: str, action: str, py: dict[str, Any], a: Structure,
             b: Structure | None, f: Structure, post: Any) -> str:
    def val(x: Any) -> Any:
        if isinstance(x, tuple):
            return tuple(val(y) for y in x)
        if x is None or (isinstance(x, int) and not hasattr(x, "expr")):
            return x
        v = m.eval(z(x), model_completion=True)
        return z3.is_true(v) if z3.is_bool(v) else v.as_long()

    pre = shown(a, m)
    lines = [f"{side}: {action}({', '.join(f'{k}={val(v)}' for k, v in py.items())})",
             "pre: " + " ".join(f"{k}={v}" for k, v in pre.items())]
    fo = shown(f, m)
    if b is not None:
        pyp = shown(b, m)
        lines.append("python / formula successor, where they differ:")
        lines += _diff(pyp, fo) or ["  (the same: the formula's guard is false)"]
    else:
        lines.append(f"python refuses: {post}")
        lines.append("formula successor, changed: " + ", ".join(
            f"{k}: {pre[k]} -> {fo[k]}" for k in pre if pre[k] != fo[k]))
    return "\n".join(lines)


# -- predicates ---------------------------------------------------------------------------


def check_invariant(name: str, shape: str, template: System, rlimit: int = RLIMIT,
                    seed: int = 0) -> Result:
    """Python's invariant `name` equals its quantified version on every state of the
    shape (the forgotten fields' conjuncts assumed)."""
    res = Result(shape, f"invariant {name}")
    sizes = sizes_of(template)

    def run(ex: Explorer) -> Any:
        s = lazy_system(ex, template, seen=False)
        a = _abstract_once(s)
        ex.assume(SymBool(extras(s)), check=False)
        return a, INVARIANTS[name](s, REFERENCE)

    return _compare(res, rlimit, seed, run, lambda a: holds_all(
        TermLogic(sizes), finite_state(a), spec.INVARIANTS[name]))


def fresh_m_term(a: Structure, sizes: dict[str, int]) -> tuple[Any, Any]:
    """(defined, M) of the fresh-report M (R15-R19) as terms of an abstract state: the
    bridge that keeps T4's pairs of states from multiplying Python's paths."""
    L = TermLogic(sizes)
    st = finite_state(a)
    defined = z3.And(*(z3.Implies(z(a["in_snap"][(p,)]), z(spec.mset(L, st, p)))
                       for p in range(sizes["P"])))
    m = z(a["snapshot_revision"])
    for p in range(sizes["P"]):
        v = z(spec.mp(L, st, p))
        m = z3.If(z3.And(z(a["in_snap"][(p,)]), v < m), v, m)
    return defined, m


def check_fresh_m(shape: str, template: System, rlimit: int = RLIMIT,
                  seed: int = 0) -> Result:
    """Python's `fresh_m` is `fresh_m_term` on every state of the shape (under the
    invariants: M(p) = floor - 1 needs a set window's floor)."""
    res = Result(shape, "fresh M")
    sizes = sizes_of(template)

    def run(ex: Explorer) -> Any:
        s = lazy_system(ex, template, seen=False)
        a = _abstract_once(s)
        ex.assume(SymBool(extras(s)), check=False)
        m = fresh_m(s, REFERENCE)
        d, mt = fresh_m_term(a, sizes)
        return a, (z3.Not(d) if m is None else z3.And(d, z(m) == mt))

    return _compare(res, rlimit, seed, run, lambda a: True)


def check_transition(name: str, shape: str, template: System, rlimit: int = RLIMIT,
                     seed: int = 0) -> Result:
    """Python's transition invariant `name` equals its quantified version on every pair
    of states of the shape. For T4, Python's `mono_fresh_m` runs with M given by
    `fresh_m_term` (`check_fresh_m` proves it is Python's `fresh_m`)."""
    res = Result(shape, f"transition invariant {name}")
    sizes = sizes_of(template)

    def run(ex: Explorer) -> Any:
        s = lazy_system(ex, template, seen=False)
        t = _renamed(ex, template)
        a, b = _abstract_once(s), _abstract_once(t)
        ex.assume(SymBool(z3.And(extras(s), extras(t))), check=False)
        if name == "mono_fresh_M":
            ms = {id(s): fresh_m_term(a, sizes), id(t): fresh_m_term(b, sizes)}

            def m(x: System, v: Any) -> Any:
                d, mt = ms[id(x)]
                return SymInt(mt) if SymBool(d) else None

            return (a, b), mono_fresh_m(s, t, REFERENCE, m=m)
        return (a, b), TRANSITION_INVARIANTS[name](s, t, REFERENCE)

    def formula(ab: tuple[Structure, Structure]) -> Any:
        L = TermLogic(sizes)
        return holds_all(L, finite_state(ab[1]), spec.TRANSITION_INVARIANTS[name],
                         finite_state(ab[0]))

    return _compare(res, rlimit, seed, run, formula)


def _renamed(ex: Explorer, template: System) -> System:
    """A second symbolic state with its own names (the post-state of a pair)."""
    return lazy_system(ex, template, seen=False, tag="post.")


def _fingerprint(a: Any, seen: dict[int, tuple[Any, tuple[int, ...]]]) -> tuple[int, ...]:
    """The AST addresses of every value of an abstract state (or a tuple of them). The
    states of a row are kept alive by the row (`_compare`), so an address is one term's;
    `seen` (per row) holds each state object's, computed once."""
    out: tuple[int, ...] = ()
    for st in (a if isinstance(a, tuple) else (a,)):
        hit = seen.get(id(st))
        if hit is None or hit[0] is not st:
            ids: list[int] = []
            for name, (args, _) in SIG.items():
                vals = st[name].values() if args else (st[name],)
                ids += [z(v).as_ast().value for v in vals]
            hit = seen[id(st)] = (st, tuple(ids))
        out += hit[1]
    return out


def _compare(res: Result, rlimit: int, seed: int,
             run: Callable[[Explorer], Any], formula: Callable[[Any], Any]) -> Result:
    """Python's predicate (`run`'s second value) equals `formula` of the abstract state
    (its first) on every state. The paths are enumerated without the solver (an explorer
    that does not prune): their path conditions are disjoint and cover every input, so
    the disjunction of (path condition and disagreement) over all paths, infeasible ones
    included (their path condition is unsatisfiable), is satisfiable exactly when some
    state disagrees. One solver query for the row instead of a feasibility check per
    branch and a query per path."""
    # The abstraction decides nothing, so every path abstracts to the same terms and the
    # formula is the same: built once per distinct abstract state (pair), not per path.
    formulas: dict[tuple[int, ...], Any] = {}
    seen: dict[int, tuple[Any, tuple[int, ...]]] = {}
    # (disjunct, abstract state(s), python's value; or None and the exception raised)
    joined: list[tuple[Any, Any, Any]] = []
    # Unpruned, the model code also runs on paths no state takes: an exception there is
    # harmless, one on a path some state takes is a failure. So a raising path is a
    # disjunct too: its path condition alone (satisfiable: some state makes Python raise).
    ex = Explorer(prune=False, merge=MERGE)
    for path in ex.paths(run, errors=(Exception,)):
        if path.kind == "pruned":
            continue
        res.paths += 1
        if path.kind == "error":
            joined.append((conj(list(path.pc)), None, path.value))
            continue
        a, py = path.value
        key = _fingerprint(a, seen)
        fo = formulas.get(key)
        if fo is None:
            fo = formulas[key] = z(formula(a))
        joined.append((conj([*path.pc, z3.Xor(z(py), fo)]), a, py))
    if not joined:
        res.failure = "no path reaches the predicate's value (every path pruned): vacuous"
        return res
    s = budgeted(seed, rlimit)
    res.queries += 1
    t1 = time.perf_counter()
    r = check(s, disj([d for d, _, _ in joined]))[0]
    res.slowest_s = time.perf_counter() - t1
    if r == z3.unknown:
        res.unknown, res.failure = True, f"solver: unknown ({s.reason_unknown()})"
    elif r == z3.sat:
        m = s.model()
        _, a, py = next(j for j in joined if z3.is_true(m.eval(j[0], model_completion=True)))
        if a is None:
            what = ("python state outside the abstraction" if isinstance(py, NotAbstractable)
                    else f"python raised {type(py).__name__}")
            res.failure = f"{what} on a state of the shape: {py}"
            return res
        pyv = z3.is_true(m.eval(z(py), model_completion=True))
        states = a if isinstance(a, tuple) else (a,)
        res.failure = (f"python says {pyv}, the formula says {not pyv}\n" + "\n".join(
            "state: " + " ".join(f"{k}={v}" for k, v in shown(st, m).items())
            for st in states))
    return res


def check_init(shape: str, template: System, rlimit: int = RLIMIT) -> Result:
    """`spec.init` holds of the abstraction of `initial(shape)` and of no other state."""
    res = Result(shape, "init")
    sizes = sizes_of(template)
    L = TermLogic(sizes)
    mine = {k: ({a: z(v) for a, v in val.items()} if isinstance(val, dict) else z(val))
            for k, val in _concrete_abstract(template).items()}
    sym: Structure = {}
    for name, (args, kind) in SIG.items():
        mk = z3.Int if kind == INT else z3.Bool
        if not args:
            sym[name] = mk(f"init.{name}")
        else:
            sym[name] = {k: mk(f"init.{_label(name, k)}") for k in
                         itertools.product(*(range(sizes[x]) for x in args))}
    sym["wobj"], sym["wpart"] = mine["wobj"], mine["wpart"]
    canon = _canonical(sym)
    # initial() takes any grace >= 0: compare with the one of the state at hand
    grace = z3.Int("init.grace.of_initial")
    mine = {**mine, "grace": grace}
    mine_sym = {**mine, "grace": sym["grace"]}
    s = budgeted(0, rlimit)
    for side, q in (("spec.init does not hold of model.system.initial",
                     z3.And(grace >= 0, z3.Not(z(spec.init(L, finite_state(mine)))))),
                    ("spec.init holds of a state other than model.system.initial",
                     z3.And(z(spec.init(L, finite_state(sym))),
                            z3.Not(equal(canon, mine_sym))))):
        res.queries += 1
        t1 = time.perf_counter()
        r = check(s, q)[0]
        res.slowest_s = max(res.slowest_s, time.perf_counter() - t1)
        if r == z3.unknown:
            res.unknown, res.failure = True, f"solver: unknown ({s.reason_unknown()})"
            return res
        if r == z3.sat:
            res.failure = side + "\n" + " ".join(
                f"{k}={v}" for k, v in shown(sym, s.model()).items())
            return res
    res.paths = 1
    return res


# Optional fields and the flag saying they are set: unset, the abstraction has them 0.
CANONICAL = {"gc_m": "gc_set", "max": "wset", "prev": "wset", "floor": "wset",
             "woff": "wset", "inact": "iset", "rep": "rset",
             "bepoch": "bset", "boff": "bset", "gsafe": "gset"}


def _canonical(s: Structure) -> Structure:
    """The abstraction's canonical form: an optional field that is not set is 0."""
    out = dict(s)
    for f, flag in CANONICAL.items():
        if isinstance(s[f], dict):
            out[f] = {k: z3.If(z(s[flag][k]), z(v), _ZERO) for k, v in s[f].items()}
        else:
            out[f] = z3.If(z(s[flag]), z(s[f]), _ZERO)
    return out


def _concrete_abstract(s: System) -> Structure:
    from epochgc.proofs.param import correspond

    return correspond.abstract(s)


def shapes(max_p: int = 3, max_writes: int = 3, max_objects: int = 2,
           replicas: tuple[int, ...] = (1, 2)) -> list[tuple[str, System]]:
    """Every shape up to partition renaming (`correspond.universes`) with at most
    `max_objects` objects."""
    from epochgc.proofs.param import correspond

    return [(n, s) for n, s in correspond.universes(max_p, max_writes, replicas)
            if len(s.objects) <= max_objects]
