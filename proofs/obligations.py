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

import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import z3

from epochgc.model.actions import ACTIONS
from epochgc.model.errors import ModelError
from epochgc.model.invariants import INVARIANTS, TRANSITION_INVARIANTS, fresh_m, holds, mono_fresh_m
from epochgc.model.logic import neg
from epochgc.model.system import NotEnabled, System
from epochgc.model.variants import Variant
from epochgc.proofs.param.lazy import LAZY_TYPES
from epochgc.proofs.sym import Explorer, SolverUnknown, Split
from epochgc.proofs.symctx import Branches, unbranched
from epochgc.proofs.symsolver import RLIMIT, check
from epochgc.proofs.symsolver import solver as budgeted
from epochgc.proofs.symstate import decisions, symbolic_params, symbolic_system, undecide
from epochgc.proofs.symterms import conj, disj, ite
from epochgc.proofs.symvalues import SymBool, SymInt, concretize, expr_of


@dataclass
class Outcome:
    name: str
    kind: str  # invariant | transition | vacuity | witness | counterexample | crosshair
    status: str  # proved | checked | found | failed | unknown
    seconds: float = 0.0
    detail: str = ""
    trace: Any = None  # a counterexample or witness, concrete
    scope: str = "one-partition"  # "one-partition" (the template) | "any" (quantified)
    paths: int | None = None  # enabled paths (or satisfying pre-states) the check covered
    slowest_query_s: float = 0.0
    # The largest resource count one solver check of the row's task spent (the budget per
    # check is symsolver.RLIMIT): set by the runner for every row of a task.
    query_rlimit: int = 0
    search_paths: int = 0  # the most paths one bounded search of the task explored


@dataclass
class _Acc:
    seconds: float = 0.0
    checks: int = 0
    cex: Any = None
    unknown: str | None = None


def init_obligations(template: System, v: Variant) -> list[Outcome]:
    out = []
    for name, inv in INVARIANTS.items():
        t0 = time.perf_counter()
        ok = inv(template, v)
        out.append(Outcome(f"init => {name}", "invariant", "proved" if ok is True else "failed",
                           time.perf_counter() - t0, paths=1))
    return out


@dataclass
class _Paths:
    """What the exploration of one action saw: enabled paths are the ones the obligations
    are checked on; a path the model refused with a ModelError other than NotEnabled (on a
    pre-state the invariants admit, parameters in their domain) is a failure."""

    enabled: int = 0
    disabled: int = 0
    pruned: int = 0  # pre-state shapes the invariants exclude
    refused: list[tuple[ModelError, Any]] | None = None
    witness: Any = None  # a concrete pre-state + parameters of an enabled path


def induction(
    template: System, v: Variant, actions: list[str] | None = None, rlimit: int = RLIMIT,
    seed: int = 0,
) -> list[Outcome]:
    """Explore each action once from an arbitrary pre-state satisfying every invariant, and
    ask, on every path, whether any invariant or transition invariant can fail after it.

    Per action, a `vacuity` row shows the assumed invariant conjunction satisfiable (a
    concrete pre-state, re-checked on the concrete model) and the action enabled on it;
    every obligation reports the number of enabled paths it was checked on, and fails
    when there is none."""
    results: list[Outcome] = []
    for action in actions or list(ACTIONS):
        results += induction_joint(template, action, [v], rlimit, seed)[0]
    return results


@dataclass
class _PerVariant:
    """One variant's share of a joint exploration: its paths, obligations and batch."""

    v: Variant
    select: z3.BoolRef  # the switches at this variant's values
    accs: dict[str, _Acc]
    seen: _Paths
    batch: _Batch


def joint_variant(variants: list[Variant]) -> tuple[Variant, list[z3.BoolRef]]:
    """One variant whose switches that differ among `variants` are symbolic booleans
    (recording which switches are read, see `_ReadVariant`), and per variant the
    condition that selects it (those switches at its values). A single variant is
    itself, selected by `true`."""
    if len(variants) == 1:  # nothing to select (and no switch read here)
        return variants[0], [z3.BoolVal(True)]
    differ = [f.name for f in dataclasses.fields(Variant) if f.name != "name"
              and len({getattr(v, f.name) for v in variants}) > 1]
    for f in differ:
        if any(type(getattr(v, f)) is not bool for v in variants):
            raise TypeError(f"variant switch {f} is not a boolean: cannot explore it jointly")
    sw = {f: SymBool(z3.Bool(f"variant.{f}")) for f in differ}
    fields = {f.name: getattr(variants[0], f.name) for f in dataclasses.fields(Variant)}
    joint = _ReadVariant(**{**fields, "name": "+".join(v.name for v in variants), **sw})
    object.__setattr__(joint, "_reads", set())
    return joint, [_select(v, sw, set(differ)) for v in variants]


def _select(v: Variant, sw: dict[str, SymBool], among: set[str]) -> z3.BoolRef:
    return conj([x.expr if getattr(v, f) else z3.Not(x.expr)
                 for f, x in sw.items() if f in among])


def _splits(joint: Variant, variants: list[Variant]) -> Callable[[], list[Split]]:
    """Per variant, its selecting condition over the switches read so far (a switch not
    yet read is in no path condition, so variants that agree on the read ones share
    their checks)."""
    raw = {f: object.__getattribute__(joint, f) for f in _SWITCHES}  # not a read
    sw = {f: x for f, x in raw.items() if isinstance(x, SymBool)}
    reads: set[str] = object.__getattribute__(joint, "_reads")
    memo: dict[frozenset[str], list[Split]] = {}

    def splits() -> list[Split]:
        key = frozenset(reads & sw.keys())
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = [
                (_select(v, sw, set(key)),
                 [(x.expr, z3.BoolVal(getattr(v, f))) for f, x in sw.items() if f in key])
                for v in variants]
        return hit
    return splits


def induction_joint(
    template: System, action: str, variants: list[Variant], rlimit: int = RLIMIT,
    seed: int = 0, reads: set[str] | None = None,
) -> list[list[Outcome]]:
    """`induction` of one action for several variants in ONE exploration: the switches
    on which they differ are symbolic booleans (`joint_variant`), so a path that never
    reads them is explored once for all. Each path then counts for exactly the variants
    whose selecting condition it is satisfiable with, and each obligation is asked with
    that condition, so every variant's rows, path counts and counterexamples (models with
    its switches at its values, replayed on the concrete model with the variant itself)
    are those of exploring it alone. `reads`, when given, receives the names of the variant
    switches the action's code read on any path (recorded for a single variant too)."""
    fn = ACTIONS[action][0]
    joint, select = joint_variant(variants)
    if reads is not None and not isinstance(joint, _ReadVariant):
        joint = _recording(joint)
    # merge: a `min`/`max` over symbolic ints in the action (housekeep's epoch, LRLO's
    # ratchet) is one If term, not a fork: the same successor on every input, in a third
    # of the paths (what the correspondence proof does, proofs/param/symcorr.py).
    ex = Explorer(rlimit=rlimit, seed=seed, merge=True)
    if len(variants) > 1:
        ex.splits = _splits(joint, variants)
    goal_memo = _GoalMemo()
    per = [_PerVariant(v, sel, {n: _Acc() for n in (*INVARIANTS, *TRANSITION_INVARIANTS)},
                       _Paths(refused=[]), _Batch(rlimit, seed))
           for v, sel in zip(variants, select, strict=True)]

    def run(ex: Explorer) -> Any:
        # Every path rebuilds the same pre-state and parameters from the same decisions:
        # replayed, not rebuilt (Explorer.replayed).
        # Lazy replicas (LAZY_REPLICAS): a replica's seen window, M(p) view and report
        # fork only where the action reads them, not on every path of every action.
        pre = ex.replayed("pre", lambda: symbolic_system(ex, template,
                                                         lazy_replicas=LAZY_REPLICAS))
        undecide(pre)
        ex.assume(ex.per_prefix("Inv(pre)", lambda: _joined(lambda: holds(pre, joint))))
        params = ex.replayed("params", lambda: symbolic_params(ex, pre, action,
                                                               symmetric=True))
        try:
            return pre, params, fn(pre, joint, **params)
        except NotEnabled:
            raise
        except ModelError as e:  # keep the inputs: the report shows them
            e.sym_inputs = (pre, params)  # type: ignore[attr-defined]
            raise

    t_explore = time.perf_counter()
    vac_unknown: str | None = None
    try:
        for path in ex.paths(run, errors=(ModelError,)):
            # The variants this path is a path of (one variant: all of them, no check).
            mine = per if len(per) == 1 else [
                pv for pv, ok in zip(per, ex.split_paths(), strict=True) if ok]
            if path.kind == "pruned":
                for pv in mine:
                    pv.seen.pruned += 1
                continue
            if path.kind == "error":
                for pv in mine:
                    if isinstance(path.value, NotEnabled):
                        pv.seen.disabled += 1
                    else:
                        _refused(ex, path, pv.v, pv.seen, pv.select)
                continue
            pre, params, post = path.value
            keys = goal_memo.keys(pre, post)
            for pv in mine:
                pv.seen.enabled += 1
                if pv.seen.witness is None:
                    _witness(ex, pre, params, pv.v, pv.seen, pv.select)
                open_ = [n for n, a in pv.accs.items() if a.cex is None and a.unknown is None]
                t0 = time.perf_counter()
                goals = {name: goal_memo.get(name, keys, pre, post, joint) for name in open_}
                pc = path.pc if len(per) == 1 else (*path.pc, pv.select)
                pv.batch.items.append(_Pending(pc, goals, pre, params, post))
                share_ = (time.perf_counter() - t0) / max(1, len(open_))
                for name in open_:
                    pv.accs[name].seconds += share_
                if len(pv.batch.items) >= BATCH:
                    pv.batch.flush(pv.accs, pv.v, fn)
        for pv in per:
            pv.batch.flush(pv.accs, pv.v, fn)
    except SolverUnknown as e:
        vac_unknown = f"while exploring {action}: {e}"
        for pv in per:
            for acc in pv.accs.values():
                acc.unknown = acc.unknown or vac_unknown
    for i, pv in enumerate(per):  # prefixes a variant's own exploration would prune
        pv.seen.pruned += sum(1 for j, _ in ex.pruned_for if j == i)
    spent = sum(a.seconds for pv in per for a in pv.accs.values())
    explore = time.perf_counter() - t_explore - spent
    out: list[list[Outcome]] = []
    for pv in per:
        # exploration is shared by every variant's rows
        share = explore / ((len(pv.accs) + 1) * len(per))
        slowest = max(ex.slowest_query_s, pv.batch.slowest_query_s)
        seen = pv.seen
        rows = [_vacuity_row(action, seen, vac_unknown, share, slowest)]
        for name, acc in pv.accs.items():
            kind = "invariant" if name in INVARIANTS else "transition"
            label = f"{name} preserved by {action}"
            row = Outcome(label, kind, "proved", acc.seconds + share, paths=seen.enabled,
                          slowest_query_s=slowest)
            if acc.unknown is not None:
                row.status, row.detail = "unknown", acc.unknown
            elif acc.cex is not None:
                row.status, row.detail, row.trace = "failed", "counterexample to induction", acc.cex
            elif seen.refused:
                row.status = "failed"
                row.detail = f"{len(seen.refused)} admitted path(s) refused by the model"
            elif seen.enabled == 0:
                row.status, row.detail = "failed", "vacuous: no enabled path"
            rows.append(row)
        out.append(rows)
    if reads is not None:
        reads.update(object.__getattribute__(joint, "_reads"))
    return out


def _witness(ex: Explorer, pre: System, params: dict[str, Any], v: Variant, seen: _Paths,
             select: z3.BoolRef) -> None:
    """A concrete pre-state of an enabled path, re-checked on the concrete model."""
    model = ex.model_for((), select)
    if model is None:
        return
    c_pre, c_params = concretize(pre, model), concretize(params, model)
    if holds(c_pre, v) is True:
        seen.witness = {"pre": c_pre, "params": c_params}


def _refused(ex: Explorer, path: Any, v: Variant, seen: _Paths, select: z3.BoolRef
             ) -> None:
    assert seen.refused is not None
    err = path.value
    inputs = getattr(err, "sym_inputs", None)
    model = ex.model_for((), select)
    trace = None
    if inputs is not None and model is not None:
        trace = {"pre": concretize(inputs[0], model), "params": concretize(inputs[1], model)}
    seen.refused.append((err, trace))


def _vacuity_row(
    action: str, seen: _Paths, unknown: str | None, seconds: float, slowest: float
) -> Outcome:
    name = f"Inv satisfiable and {action} enabled"
    paths = seen.enabled
    detail = (f"{seen.enabled} enabled, {seen.disabled} not enabled, {seen.pruned} excluded "
              f"by Inv, {len(seen.refused or [])} refused")
    row = Outcome(name, "vacuity", "found", seconds, detail, seen.witness, paths=paths,
                  slowest_query_s=slowest)
    if unknown is not None:
        row.status, row.detail = "unknown", unknown
    elif seen.refused:
        err, trace = seen.refused[0]
        row.status = "failed"
        row.detail = (f"the model refused an admitted path: {err} ({detail})")
        row.trace = trace
    elif seen.enabled == 0 or seen.witness is None:
        row.status = "failed"
        row.detail = f"vacuous: no enabled path with a concrete pre-state ({detail})"
    return row


def _joined(fn: Callable[[], Any]) -> Any:
    """`fn()` as one formula: its branches (a min or max over reports) are explored without
    a solver and joined as a disjunction of (branch condition and result), so assuming it
    adds no fork to the caller's path. Falls back to evaluating `fn()` on the caller's path
    (forking there) when some branch raises, so that a refusal is reported as before."""
    sub = Explorer(prune=False, merge=True)
    alternatives: list[z3.BoolRef] = []
    for leaf in sub.paths(lambda _: fn(), errors=(ModelError,)):
        if leaf.kind != "ok":
            return fn()
        value = leaf.value
        expr = value.expr if isinstance(value, SymBool) else z3.BoolVal(bool(value))
        alternatives.append(conj([*leaf.pc, expr]))
    return SymBool(disj(alternatives))


def fingerprint(value: Any, seen: dict[int, tuple[Any, Any]] | None = None) -> Any:
    """A hashable key equal for two values exactly when they are the same value: symbolic
    leaves by their Z3 term (Z3 hash-conses terms, so the same address is the same term),
    the rest by structure. Types it does not know are refused. `seen` memoises frozen
    dataclass instances by identity (kept alive there, so an id is never reused): a
    post-state shares every part the action did not change with its pre-state, and the
    pre-state is the same object on every replayed path."""
    t = type(value)
    if t is SymInt or t is SymBool:
        return ("z", value.expr.as_ast().value)  # the term's address: see _GoalMemo
    if value is None or t is bool or t is int or t is str:
        return value
    if t is tuple:
        return (tuple, *(fingerprint(v, seen) for v in value))
    groups = value.__dict__.get("_groups") if t in LAZY_TYPES else None
    if groups is not None:
        _GROUPS[0] += 1
        # A lazy object (proofs.param.lazy): an optional field is its group (by its
        # condition's term) with the decision the path made so far, and the value it has
        # when present. Never memoised: the decisions change from path to path.
        base = t.__mro__[1]
        return (base, *((("g", groups[f.name][0].cond.as_ast().value,
                          groups[f.name][0].decided, fingerprint(groups[f.name][1], seen))
                         if f.name in groups
                         else fingerprint(object.__getattribute__(value, f.name), seen))
                        for f in dataclasses.fields(base)))
    if seen is not None:
        hit = seen.get(id(value))
        if hit is not None:
            return hit[1]
    names = _FIELDS.get(t)
    if names is None:
        if not (dataclasses.is_dataclass(value) and not isinstance(value, type)):
            raise TypeError(f"no fingerprint for {t.__name__}")
        names = _FIELDS[t] = tuple(f.name for f in dataclasses.fields(value))
        _FROZEN[t] = bool(t.__dataclass_params__.frozen)
    before = _GROUPS[0]
    fp = (t, *(fingerprint(getattr(value, n), seen) for n in names))
    if seen is not None and _FROZEN[t] and _GROUPS[0] == before:
        seen[id(value)] = (value, fp)
    return fp


_FROZEN: dict[type, bool] = {}
_GROUPS = [0]  # lazy groups fingerprinted so far: a value holding one is not memoised
_FIELDS: dict[type, tuple[str, ...]] = {}


class _GoalMemo:
    """`_goal` once per distinct (obligation, pre, post): many paths of an action differ
    only in how they got there (the path condition), not in the state they produce, and a
    goal is a function of the states alone. The states are kept alive with the goal so a
    term address in a key is never reused by another term."""

    def __init__(self) -> None:
        self._by_key: dict[Any, tuple[z3.BoolRef, System, System]] = {}
        self._seen: dict[int, tuple[Any, Any]] = {}  # fingerprints of the states' parts
        self.fresh_m = _FreshM()

    def keys(self, pre: System, post: System) -> tuple[Any, Any]:
        """(key of the post-state, key of the pair): once per path, for all its goals."""
        k_post = fingerprint(post, self._seen)
        return k_post, (fingerprint(pre, self._seen), k_post)

    def get(self, name: str, keys: tuple[Any, Any], pre: System, post: System, v: Variant
            ) -> z3.BoolRef:
        key = (name, keys[0] if name in INVARIANTS else keys[1])
        hit = self._by_key.get(key)
        if hit is None:
            hit = self._by_key[key] = (_goal(name, pre, post, v, self.fresh_m), pre, post)
        return hit[0]


class _FreshM:
    """`fresh_m(s, v)` once per state, as one value: a min over reports branches, and
    `mono_fresh_m` asked it for the pre-state on every goal path of every post-state (the
    pre-state is one object on every replayed path, `Explorer.replayed`), and for both
    states on every combination of their branches. Its leaves (a non-pruning exploration:
    their conditions are exclusive and exhaustive) are joined into `None` unless `defined`,
    else an if-then-else term of the leaf values: the same function of the state. A leaf
    that raises keeps the model's own `fresh_m` for that state. States are kept alive
    beside their entry, so an id is never reused."""

    def __init__(self) -> None:
        self._by_id: dict[tuple[int, Any], tuple[Any, Any, System, Variant]] = {}

    def __call__(self, s: System, v: Variant) -> Any:
        # With the decisions this path made on its lazy replicas: the value computed
        # under them holds on every path that made the same ones.
        key = (id(s), decisions(s))
        hit = self._by_id.get(key)
        if hit is None or hit[3] is not v:
            hit = self._by_id[key] = (*_joined_value(lambda: fresh_m(s, v)), s, v)
        defined, value = hit[0], hit[1]
        if defined is None:  # a leaf raised: the model's own function, forking as before
            return fresh_m(s, v)
        if defined is False:
            return None
        return value if defined is True or SymBool(defined) else None


def _joined_value(fn: Callable[[], Any]) -> tuple[Any, Any]:
    """(defined, value) for an `int | None` function that branches: `defined` is True,
    False or a formula; `value` an int or a SymInt (an if-then-else over the leaves).
    (None, None) when a leaf raises."""
    sub = Explorer(prune=False, merge=True)
    leaves: list[tuple[z3.BoolRef, Any]] = []
    for leaf in sub.paths(lambda _: fn(), errors=(ModelError,)):
        if leaf.kind != "ok":
            return None, None
        leaves.append((conj(list(leaf.pc)), leaf.value))
    some = [(c, val) for c, val in leaves if val is not None]
    if not some:
        return False, None
    defined: Any = True if len(some) == len(leaves) else disj([c for c, _ in some])
    if len(some) == 1:
        return defined, some[0][1]
    term = expr_of(some[-1][1])
    for c, val in reversed(some[:-1]):  # under `defined`, exactly one leaf condition holds
        term = ite(c, expr_of(val), term)  # the C API, memoised: z3.If coerces its operands
    return defined, SymInt(term)


def _goal(name: str, pre: System, post: System, v: Variant,
          fm: Callable[[System, Variant], Any] = fresh_m) -> z3.BoolRef:
    """The negated obligation on this path as one formula. Obligations that branch
    (the fresh M is a min/max over reports) are explored and joined as a disjunction of
    (branch condition and negated result)."""
    def goal(_: Any = None) -> Any:
        if name in INVARIANTS:
            return neg(INVARIANTS[name](post, v))
        t = TRANSITION_INVARIANTS[name]
        if t is mono_fresh_m:
            return neg(mono_fresh_m(pre, post, v, m=fm))
        return neg(t(pre, post, v))

    try:  # most goals never branch: one evaluation, the formula a single leaf gives
        value = unbranched(goal)
    except Branches:
        pass
    except ModelError:
        return z3.BoolVal(True)
    else:
        return value.expr if isinstance(value, SymBool) else z3.BoolVal(bool(value))
    sub = Explorer(prune=False, merge=True)  # branches are joined into one formula: no solver calls
    alternatives: list[z3.BoolRef] = []
    for leaf in sub.paths(goal, errors=(ModelError,)):
        value = leaf.value
        if leaf.kind == "error":  # cannot even evaluate it there: count as a violation
            value = True
        expr = value.expr if isinstance(value, SymBool) else z3.BoolVal(bool(value))
        alternatives.append(conj([*leaf.pc, expr]))
    return disj(alternatives)


# The induction's pre-state builds its replicas lazily (proofs.symstate._lazy_replica):
# False decides every replica's optional fields up front, as before (tests compare them).
LAZY_REPLICAS = True

# Enabled paths whose obligations are checked in one solver query (`_Batch`).
BATCH = 32


@dataclass
class _Pending:
    pc: tuple[z3.BoolRef, ...]  # the path condition (it includes the assumed Inv(pre))
    goals: dict[str, z3.BoolRef]  # negated obligations still open when the path ended
    pre: System
    params: dict[str, Any]
    post: System


class _Batch:
    """The obligations of up to BATCH enabled paths, checked in one query: is any path's
    condition together with any of its negated obligations satisfiable? A solver check
    costs a fixed overhead (about 0.4 ms here) far above the work of refuting one more
    small disjunct, and one check per path was a third of the induction time. Only when
    the batch query is satisfiable (or unknown) is each path asked alone, in path order,
    and each obligation one by one (to name it and get its witness), exactly as before.
    Its own solver: the explorer's holds the current path only."""

    def __init__(self, rlimit: int, seed: int) -> None:
        self.solver = budgeted(seed, rlimit)
        self.rlimit, self.seed = rlimit, seed
        self.items: list[_Pending] = []
        self.checks = 0
        self.slowest_query_s = 0.0

    def _model(self, pc: tuple[z3.BoolRef, ...], goal: z3.BoolRef) -> z3.ModelRef | None:
        """A model of `pc` and `goal`, None when there is none; unknown raises."""
        self.solver.push()
        try:
            self.solver.add(*pc)
            self.checks += 1
            t0 = time.perf_counter()
            r = check(self.solver, goal)[0]
            self.slowest_query_s = max(self.slowest_query_s, time.perf_counter() - t0)
            if r == z3.unknown:
                raise SolverUnknown(self.solver.reason_unknown())
            return self.solver.model() if r == z3.sat else None
        finally:
            self.solver.pop()

    def clean(self, items: list[_Pending]) -> bool:
        """No path's condition is satisfiable together with any of its negated goals."""
        # The paths share a prefix (pre-state shape, Inv(pre), ...): asserted once.
        k = min(len(it.pc) for it in items)
        for i in range(k):
            if any(not _same(it.pc[i], items[0].pc[i]) for it in items):
                k = i
                break
        # Paths ending in the same states have the same negated goals (`_GoalMemo`): each
        # goal disjunction appears once, with the disjunction of those paths' conditions
        # (the same formula, re-associated).
        by_goal: dict[int, tuple[z3.BoolRef, list[z3.BoolRef]]] = {}
        for it in items:
            g = disj(list(it.goals.values()))
            by_goal.setdefault(g.as_ast().value, (g, []))[1].append(conj(list(it.pc[k:])))
        query = disj([conj([disj(pcs), g]) for g, pcs in by_goal.values()])
        return self._refuted(items[0].pc[:k], query)

    def _refuted(self, prefix: tuple[z3.BoolRef, ...], query: z3.BoolRef) -> bool:
        """Is `prefix` and `query` unsatisfiable? Unknown raises. A fresh solver of the
        `smt` tactic: the query is asked once and needs no model, and the incremental
        solver (push, assert, check) took about 1.35x as long on these batches."""
        s = z3.Tactic("smt").solver()
        s.set("rlimit", self.rlimit)
        s.set("random_seed", self.seed)
        s.add(*prefix, query)
        self.checks += 1
        t0 = time.perf_counter()
        r = check(s)[0]
        self.slowest_query_s = max(self.slowest_query_s, time.perf_counter() - t0)
        if r == z3.unknown:
            raise SolverUnknown(s.reason_unknown())
        return bool(r == z3.unsat)

    def flush(self, accs: dict[str, _Acc], v: Variant, fn: Callable[..., System]) -> None:
        items, self.items = self.items, []
        if not items:
            return
        t0 = time.perf_counter()
        try:
            clean = self.clean(items)
        except SolverUnknown:
            clean = False  # each path alone below: an unknown there is reported
        names = {n for it in items for n in it.goals}
        share = (time.perf_counter() - t0) / max(1, len(names))
        for n in names:
            accs[n].seconds += share
        if clean:
            return
        for it in items:
            open_ = [n for n in it.goals if accs[n].cex is None and accs[n].unknown is None]
            if not open_:
                continue
            t1 = time.perf_counter()
            violated = self._model(it.pc, disj([it.goals[n] for n in open_])) is not None
            for n in open_:
                accs[n].seconds += (time.perf_counter() - t1) / len(open_)
            if not violated:
                continue
            def model_for(g: z3.BoolRef, pc: tuple[z3.BoolRef, ...] = it.pc
                          ) -> z3.ModelRef | None:
                return self._model(pc, g)

            for n in open_:
                t1 = time.perf_counter()
                try:
                    _check_one(model_for, n, it.goals[n], it.pre, it.params, v, fn, accs[n])
                except SolverUnknown as e:
                    accs[n].unknown = str(e)
                accs[n].seconds += time.perf_counter() - t1


def _same(a: z3.ExprRef, b: z3.ExprRef) -> bool:
    """Z3 hash-conses terms: the same term is the same AST pointer."""
    return bool(a.as_ast().value == b.as_ast().value)


def _check_one(
    model_for: Callable[[z3.BoolRef], z3.ModelRef | None], name: str, goal: z3.BoolRef,
    pre: System, params: dict[str, Any], v: Variant, fn: Callable[..., System], acc: _Acc,
) -> None:
    model = model_for(goal)
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


class _ReadVariant(Variant):
    """A variant that records which of its switches the code under proof reads."""

    def __getattribute__(self, name: str) -> Any:
        if name in _SWITCHES:
            # A copy made by dataclasses.replace has no record: the original recorded
            # every switch while being copied, so nothing is shared.
            with contextlib.suppress(AttributeError):
                object.__getattribute__(self, "_reads").add(name)
        return object.__getattribute__(self, name)


_SWITCHES = frozenset(f.name for f in dataclasses.fields(Variant)) - {"name"}


def _recording(v: Variant) -> _ReadVariant:
    r = _ReadVariant(**{f.name: getattr(v, f.name) for f in dataclasses.fields(Variant)})
    object.__setattr__(r, "_reads", set())
    return r


def induction_variants(
    template: System, action: str, variants: list[Variant], rlimit: int = RLIMIT,
    seed: int = 0, reads: set[str] | None = None,
) -> list[tuple[Variant, list[Outcome]]]:
    """`induction` of one action under several variants, in one joint exploration
    (`induction_joint`): the variants differ only in boolean switches."""
    runs = induction_joint(template, action, variants, rlimit, seed, reads)
    return list(zip(variants, runs, strict=True))
