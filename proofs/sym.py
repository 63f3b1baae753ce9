"""Explorer: every feasible path of a Python function run on symbolic values, one solver stack.

The model is plain Python (`if`, `max`, `is None`, frozen dataclasses). We hand it
`SymInt`/`SymBool` values (proofs.symvalues); every time Python asks a symbolic condition
for its truth value the current `Explorer` decides a branch, records it in the path
condition and, with the solver, prunes branches that cannot happen. Re-running the
function with a different decision trail enumerates every feasible path (depth first), the
way CrossHair does.

So the proof obligations are about exactly the code the harness, the vectors and the
implementation's pure parts run: there is no second, hand-written encoding of the model.

One piece (about 600 lines): the Explorer's methods share one decision trail, one path
condition and one solver scope stack, and each shortcut (a replayed prefix, a repaired
model, a side refuted by the assumptions, a split's pruning) reads and updates all three;
cut apart, each would need that state passed through. The terms, the values, the merged
forms and the solver's setup, which need none of it, are their own modules.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import z3
from z3 import z3core

from epochgc.model import logic as _logic
from epochgc.proofs.symctx import _current
from epochgc.proofs.symmerge import _BUILTIN_MAX, _BUILTIN_MIN, merged_call, sym_max, sym_min
from epochgc.proofs.symsolver import RLIMIT, check
from epochgc.proofs.symsolver import solver as budgeted
from epochgc.proofs.symterms import (
    _CTX,
    _FALSE,
    _FALSE_P,
    _MEMO,
    _TRUE,
    _TRUE_P,
    _VARS,
    _bool,
    _not,
    _var,
    conj,
    int_term,
)
from epochgc.proofs.symvalues import SymBool, SymInt


class SolverUnknown(RuntimeError):
    """The solver answered `unknown` (or timed out): never counted as a proof."""


class Prune(Exception):
    """Raised inside an explored function to abandon the current path (an assumption
    does not hold on it)."""

# `_repairs_of` per branch literal (by AST address, the literal kept alive beside it so the
# address is not reused): the model code asks the same tests on every replayed path.
_REPAIRS: dict[int, tuple[z3.BoolRef, list[tuple[Any, Any]]]] = {}


def _repairs_cached(want: z3.BoolRef) -> list[tuple[Any, Any]]:
    key = want.as_ast().value
    hit = _REPAIRS.get(key)
    if hit is None:
        hit = _REPAIRS[key] = (want, _repairs_of(want))
    return hit[1]


def _repairs_of(want: z3.BoolRef) -> list[tuple[Any, Any]]:
    """Candidate (constant, value) settings that make `want` true: `b`/`not b` for a
    boolean constant, `x == k`/`x != k` for an integer constant x and a numeral k (the
    shape forks and parameter choices of proofs.symstate). Only candidates: the caller
    checks the changed model against the whole path condition. (Comparisons of a constant
    with a term were tried too: most such repairs fail that check, which cost more than
    the solver calls they saved.)"""
    neg = z3.is_not(want)
    atom = want.arg(0) if neg else want
    if z3.is_const(atom):
        if z3.is_true(atom) or z3.is_false(atom):
            return []
        return [(atom, _FALSE if neg else _TRUE)]
    if not z3.is_eq(atom):
        return []
    x, k = atom.arg(0), atom.arg(1)
    if z3.is_int_value(x):
        x, k = k, x
    if z3.is_const(x) and z3.is_int(x) and not z3.is_int_value(x) and z3.is_int_value(k):
        return [(x, int_term(k.as_long() + (1 if neg else 0)))]  # for `!=` any other value
    return []


# Branch sides the path's assumptions alone refute (`Explorer._side_model`): keyed by (the
# side's AST address, the addresses of the assumed formulas), the ASTs kept alive beside
# the verdict so no address is reused. A probe solver per assumption set holds it asserted.
_IMPLIED: dict[tuple[int, tuple[int, ...]], tuple[bool | None, int, tuple[z3.BoolRef, ...]]] = {}
PROBE_AFTER = 3  # refutations of a side (with the same assumptions) before a probe
_PROBES: dict[tuple[int, ...], tuple[Any, tuple[z3.BoolRef, ...]]] = {}


# A split of a joint exploration: its selecting condition and (switch, value) pairs.
Split = tuple[z3.BoolRef, list[tuple[Any, Any]]]


@dataclass(frozen=True)
class Path:
    pc: tuple[z3.BoolRef, ...]
    kind: str  # "ok" | "error" | "pruned"
    value: Any


class _NoSolver:
    """Stands in for the solver when paths are enumerated without pruning."""

    def push(self) -> None: ...

    def pop(self, num: int = 1) -> None: ...

    def add(self, *_: object) -> None: ...


class Explorer:
    """Depth-first enumeration of the feasible paths of one function.

    `prune=False` enumerates every path without asking the solver (for formulas that are
    joined into one query afterwards, where infeasible paths are harmless)."""

    def __init__(self, rlimit: int = RLIMIT, seed: int = 0, prune: bool = True,
                 merge: bool = False, solver: Any = None,
                 asserted: tuple[z3.BoolRef, ...] = ()) -> None:
        """`solver`: a solver to explore in (each `paths` run pushes above what it holds)
        instead of a new one; `asserted`: formulas it already holds, so that assuming one
        of them adds it to the path condition without asserting it again (explorations
        that assume the same large formula, one after another, share its processing)."""
        self.prune = prune
        # While `fn` runs: `min`/`max` over symbolic ints build one If term instead of
        # forking (sym_max), and a `model.logic.merge_point` function is one value over
        # all its paths (merged_call): the same results on every input, in fewer paths.
        self.merge = merge
        self.solver: Any = _NoSolver()
        if prune:
            _MEMO.clear()
            _VARS.clear()
            _REPAIRS.clear()
            _IMPLIED.clear()
            _PROBES.clear()
            if solver is None:
                solver = z3.Solver()
                solver.set("random_seed", seed)
            solver.set("rlimit", rlimit)  # every check's budget (symsolver.RLIMIT)
            self.solver = solver
        self._asserted = {a.as_ast().value: a for a in asserted}
        # (choice, forced, model): `model` satisfies the path condition up to and including
        # this decision (None when unknown), so a replayed path keeps a witness at hand.
        self._trail: list[tuple[bool, bool, Any]] = []
        self._alt: list[Any] = []  # per trail entry: a model of the other side, if feasible
        # Per trail entry: the solver's scope level before its literal was asserted. Only a
        # decision that can still be flipped opens a scope (push): backtracking pops to the
        # level of the decision being flipped, and a forced one is never flipped.
        self._lvl: list[int] = []
        self._model: Any = None  # a model of the current path condition, when known
        # The solver keeps the prefix a replayed path shares with the previous one: one
        # push per decision, popped back to the decision being flipped. Decisions before
        # `_kept` (and assumptions made before decision `_kept`) are already asserted.
        self._levels = 0
        self._kept = -1
        self._pos = 0
        self._pc: list[z3.BoolRef] = []
        self._pc_terms: set[int] = set()  # addresses of the path's decided literals
        self._assumed: list[z3.BoolRef] = []  # the path's assumed formulas, in order
        self._rlimit, self._seed = rlimit, seed
        self._n = 0  # fresh inputs made on this run (their names' suffix)
        self._events: list[tuple[Any, ...]] | None = None  # recorded by `replayed`
        self._replays: dict[tuple[Any, ...], dict[int, dict[tuple[bool, ...], Any]]] = {}
        self.checks = 0
        self.repairs = 0  # branch sides settled by a repaired model (no solver call)
        self.implied = 0  # branch sides refuted by the assumptions alone (no solver call)
        self.slowest_query_s = 0.0
        self._by_prefix: dict[tuple[Any, ...], Any] = {}
        # Several explorations sharing this one (the variants of
        # obligations.induction_joint): `splits()` gives, per split, the condition that
        # selects it and its (switch, value) pairs, over the switches read so far (one not
        # yet read is in no path condition). `assume` records in `pruned_for` the
        # (split, prefix) pairs a split's own exploration would have pruned there.
        self.splits: Callable[[], list[Split]] | None = None
        self.pruned_for: set[tuple[int, Any]] = set()
        # (literal, pairs) -> the literal with the switches set (None: it has none), the
        # literal and pairs kept alive so that their addresses stay valid keys.
        self._switched: dict[tuple[int, int], tuple[Any, Any, z3.BoolRef | None]] = {}

    # -- as the decider of symbolic values (proofs.symctx) ---------------------------------
    @property
    def keeps_decisions(self) -> bool:
        return self.prune  # a non-pruning run joins all its sides into one formula

    def held(self) -> set[int]:
        return self._pc_terms

    # -- solver helpers -------------------------------------------------------------------
    def _sat(self, *extra: z3.BoolRef) -> bool:
        if not self.prune:
            return True
        self.checks += 1
        r, dt = check(self.solver, *extra)
        self.slowest_query_s = max(self.slowest_query_s, dt)
        if r == z3.unknown:
            raise SolverUnknown(self.solver.reason_unknown())
        return bool(r == z3.sat)

    def _sat_model(self, cond: z3.BoolRef) -> Any:
        """A model of the path condition and `cond`, or None when there is none."""
        return self.solver.model() if self._sat(cond) else None

    def _holds_in(self, model: Any, cond: z3.BoolRef) -> bool:
        """Does `cond` hold in `model` (a model of the path condition so far)? Then the
        path condition and `cond` are satisfiable, and no solver call is needed: the model
        is the witness. Fresh inputs the model does not mention take Z3's default values,
        which is sound because nothing on the path constrains them yet. (Evaluated through
        the C API: `true` is one hash-consed AST, so a pointer comparison reads the
        result, with no Python wrapper built for it.)"""
        if model is None:
            return False
        r = (z3.Ast * 1)()
        if not z3core.Z3_model_eval(_CTX.ref(), model.model, cond.as_ast(), True, r):
            raise z3.Z3Exception(f"cannot evaluate {cond} in a model")
        return bool(r[0].value == _TRUE_P)

    def _add(self, lit: z3.BoolRef) -> None:
        """`solver.add(lit)` without the Python layer's sort coercion (lit is a bool)."""
        if self.prune:
            z3core.Z3_solver_assert(_CTX.ref(), self.solver.solver, lit.as_ast())

    def _push(self) -> None:
        if self.prune:
            z3core.Z3_solver_push(_CTX.ref(), self.solver.solver)

    def _repaired(self, m: Any, want: z3.BoolRef) -> Any:
        """A model of the path condition and `want`, made from `m` (a model of the path
        condition) by changing one constant `want` is about (`_repairs_of`) and checked by
        evaluating the whole path condition and `want` in it; None when no candidate
        passes. The pre-state's shape forks and the parameter choices are on constants
        nothing constrains yet: their other side is settled without a solver call (or a
        model from it)."""
        if not self.prune:
            return None
        goal = None
        for sub in _repairs_cached(want):
            r = m.translate(_CTX)  # a copy: `m` stays the witness of the other side
            r.update_value(*sub)
            if goal is None:
                goal = conj([*self._pc, want])
            if self._holds_in(r, goal):
                self.repairs += 1
                return r
        return None

    def _side_model(self, m: Any, side: z3.BoolRef) -> Any:
        """A model of the path condition and `side`, or None when there is none. The model
        code asks the same tests on path after path (an input check `x < 0`, a guard), and
        most impossible sides are impossible by the assumptions alone (Inv(pre), the
        parameter domains), whatever the decisions: once a side is refuted by those (one
        probe, on the first path where the full check says unsat), every later path whose
        path condition holds the same assumed formulas skips the solver. Sound because
        those formulas are conjuncts of the path condition: a subset that is unsatisfiable
        with `side` makes the whole unsatisfiable."""
        key = (side.as_ast().value, tuple(a.as_ast().value for a in self._assumed))
        hit = _IMPLIED.get(key)
        if hit is not None and hit[0] is True:
            self.implied += 1
            return None
        r = (self._repaired(m, side) if m is not None else None) or self._sat_model(side)
        if hit is None or hit[0] is None:
            keep = (side, *self._assumed)
            if r is not None:  # satisfiable with the path condition: with its assumptions
                _IMPLIED[key] = (False, 0, keep)
            elif hit is None or hit[1] + 1 < PROBE_AFTER:
                # Refuted on this path: probe only once it keeps coming back (a probe
                # for a side asked once or twice costs more than it saves).
                _IMPLIED[key] = (None, 1 if hit is None else hit[1] + 1, keep)
            else:
                _IMPLIED[key] = (self._refuted_by_assumptions(side), 0, keep)
        return r

    def _refuted_by_assumptions(self, side: z3.BoolRef) -> bool:
        """Is `side` unsatisfiable with the path's assumed formulas alone? (A probe solver
        per assumption set keeps them asserted; unknown counts as no.)"""
        if not self.prune:
            return False
        akey = tuple(a.as_ast().value for a in self._assumed)
        probe = _PROBES.get(akey)
        if probe is None:
            s = budgeted(self._seed, self._rlimit)
            s.add(*self._assumed)
            probe = _PROBES[akey] = (s, tuple(self._assumed))
        self.checks += 1
        r, dt = check(probe[0], side)
        self.slowest_query_s = max(self.slowest_query_s, dt)
        return bool(r == z3.unsat)

    def decide(self, cond: z3.BoolRef) -> bool:
        p = cond.as_ast().value
        if p in (_TRUE_P, _FALSE_P):  # the literal true or false
            return bool(p == _TRUE_P)
        if self._events is not None:
            self._events.append(("d", cond))
        if self._pos < self._kept:  # shared prefix: already asserted in the solver
            choice, _, model = self._trail[self._pos]
            self._pos += 1
            self._model = model
            lit = cond if choice else _not(cond)
            self._pc.append(lit)
            self._pc_terms.add(lit.as_ast().value)
            return choice
        if self._pos < len(self._trail):
            choice, _, model = self._trail[self._pos]
        elif not self.prune:
            # A test the path already decided (the same test twice, or its negation) has
            # one side only: the other contradicts a literal of the path condition, so its
            # disjunct in a joined formula is false. Forced, not a fork: a value computed
            # twice (a replica's M(p) per replica, fresh_m's max over replicas) no longer
            # multiplies the leaves.
            in_pc = p in self._pc_terms
            if in_pc or _not(cond).as_ast().value in self._pc_terms:
                choice, forced = in_pc, True
            else:
                choice, forced = True, False
            model = None
            self._trail.append((choice, forced, None))
            self._alt.append(None)
            self._lvl.append(self._levels)
        else:
            # One solver call per branch point instead of two: the model of the path so
            # far already decides one side.
            neg = _not(cond)
            m = self._model
            in_pc = cond.as_ast().value in self._pc_terms
            if in_pc or neg.as_ast().value in self._pc_terms:
                # The model code asks again what the path already decided (the same test
                # twice, or its negation): the other side contradicts a literal of the path
                # condition, so it is infeasible without asking the solver.
                choice, model, alt = in_pc, m, None
            else:
                if self._holds_in(m, cond):
                    m_t, m_f = m, self._side_model(m, neg)
                elif self._holds_in(m, neg):
                    m_t, m_f = self._side_model(m, cond), m
                else:
                    m_t = self._side_model(None, cond)
                    m_f = self._side_model(None, neg) if m_t is not None else None
                if m_t is None:
                    choice, model, alt = False, m_f, None
                elif m_f is None:
                    choice, model, alt = True, m_t, None
                else:
                    choice, model, alt = True, m_t, m_f
            self._trail.append((choice, alt is None, model))
            self._alt.append(alt)
            self._lvl.append(self._levels)
        self._pos += 1
        self._model = model
        lit = cond if choice else _not(cond)
        self._pc.append(lit)
        self._pc_terms.add(lit.as_ast().value)
        if not self._trail[self._pos - 1][1]:  # may be flipped later: its own scope
            self._push()
            self._levels += 1
        self._add(lit)
        return choice

    def assume(self, cond: object, check: bool = True) -> None:
        """Continue only where `cond` holds; a symbolic condition is added to the path
        condition without forking (the other side would only be pruned). `check=False`
        skips the satisfiability check (for a constraint on a fresh input alone, which
        cannot make the path infeasible)."""
        if isinstance(cond, SymBool):
            if self._events is not None:
                self._events.append(("a", cond.expr, check))
            self._assumed.append(cond.expr)
            if self._pos <= self._kept:  # shared prefix: asserted (and checked) before
                self._pc.append(cond.expr)
                return
            if cond.expr.as_ast().value in self._asserted:  # the solver holds it already
                self._pc.append(cond.expr)
                return
            before = self._model
            if self.prune and not self._holds_in(self._model, cond.expr):
                if check:
                    m = self._sat_model(cond.expr)
                    if m is None:
                        raise Prune()
                    self._model = m
                else:
                    self._model = None  # no longer known to satisfy the path
            if self.splits and check:
                self._split_prunes(cond.expr, before)
            self._pc.append(cond.expr)
            self._add(cond.expr)
            return
        if not cond:
            raise Prune()

    def _split_prunes(self, cond: z3.BoolRef, before: Any) -> None:
        """The path goes on, but a split with which the path condition so far is
        satisfiable and `cond` is not would, explored alone, end here as a pruned path:
        record it once for this prefix."""
        assert self.splits is not None
        pruned: dict[int, bool] = {}
        for i, (sel, pairs) in enumerate(self.splits()):
            k = sel.as_ast().value
            if k not in pruned:
                pruned[k] = (not self._holds_in(self._model, sel)  # model: path and cond
                             and (self._holds_in(before, sel)
                                  or self._holds_switched(before, self._pc, pairs)
                                  or self._sat(sel))
                             and not self._holds_switched(self._model, [*self._pc, cond],
                                                          pairs)
                             and not self._sat(cond, sel))
            if pruned[k]:
                key = tuple(t[0] for t in self._trail[: self._pos])
                self.pruned_for.add((i, (key, len(self._pc))))

    def split_paths(self) -> list[bool]:
        """Per split: is the current path condition satisfiable with it?"""
        assert self.splits is not None
        known: dict[int, bool] = {}
        out = []
        for sel, pairs in self.splits():
            k = sel.as_ast().value
            if k not in known:
                known[k] = self._satisfiable_with(sel, pairs)
            out.append(known[k])
        return out

    def _satisfiable_with(self, cond: z3.BoolRef, pairs: list[tuple[Any, Any]]) -> bool:
        if cond.as_ast().value == _TRUE_P:  # no switch read on this path yet
            return True
        decided = True
        for x, val in pairs:
            off = val.as_ast().value == _FALSE_P
            # The path decided this switch the other way: no solver call.
            if (x if off else _not(x)).as_ast().value in self._pc_terms:
                return False
            decided = decided and (_not(x) if off else x).as_ast().value in self._pc_terms
        if decided:
            # Every switch decided as `cond` selects: `cond` is conjuncts of the path
            # condition, which the path's own feasibility makes satisfiable.
            return True
        if self._holds_in(self._model, cond):
            return True
        if self._holds_switched(self._model, self._pc, pairs):
            return True
        return self._sat(cond)

    def _holds_switched(self, model: Any, lits: list[z3.BoolRef],
                        pairs: list[tuple[Any, Any]]) -> bool:
        """Do `lits` hold in `model` (a model of them) with the switches set as `pairs`
        say? Then they are satisfiable with those switch values, no solver call needed.
        A literal without a switch keeps its value, true since `model` satisfies `lits`:
        only the literals that mention a switch are evaluated (each literal's substitution
        is computed once per explorer)."""
        if model is None or not pairs:
            return False
        memo, pk = self._switched, id(pairs)
        changed = []
        arrs = None
        for lit in lits:
            key = (lit.as_ast().value, pk)
            hit = memo.get(key)
            if hit is None:
                if arrs is None:  # the C call: z3.substitute's checks cost ~10x more
                    n = len(pairs)
                    arrs = ((z3.Ast * n)(*(x.as_ast() for x, _ in pairs)),
                            (z3.Ast * n)(*(v.as_ast() for _, v in pairs)))
                sub = _bool(z3core.Z3_substitute(_CTX.ref(), lit.as_ast(), n, *arrs))
                hit = memo[key] = (lit, pairs, None if sub.as_ast().value == key[0] else sub)
            if hit[2] is not None:
                changed.append(hit[2])
        return not changed or self._holds_in(model, conj(changed))

    def per_prefix(self, tag: str, compute: Callable[[], Any]) -> Any:
        """`compute()`, once per decision prefix. Every path re-runs the explored function
        from the start, and that function is deterministic, so the same decisions up to
        here mean the same inputs and the same value: a replayed prefix gets the value its
        first run computed instead of recomputing it. A `compute` that itself decides on
        this explorer is not cached (skipping it would skip its decisions)."""
        key = (tag, *(t[0] for t in self._trail[: self._pos]))
        if key in self._by_prefix:
            return self._by_prefix[key]
        pos = self._pos
        value = compute()
        if self._pos == pos:
            self._by_prefix[key] = value
        return value

    def replayed(self, tag: str, compute: Callable[[], Any]) -> Any:
        """`compute()`, which may decide and assume (the pre-state's shape forks, the
        parameter choices), once per sequence of decisions it makes. A replayed path
        whose decisions over the whole of `compute` are still the shared prefix (none of
        them flipped yet) makes the same decisions and assumptions (recorded, replayed
        here: the path condition is the same) and creates the same fresh inputs, so it
        gets the value the first run built instead of rebuilding it."""
        pos, n0 = self._pos, self._n
        key = (tag, *(t[0] for t in self._trail[:pos]))
        # By how many decisions a build made, then by which: one lookup per length.
        by_len = self._replays.setdefault(key, {})
        for k, builds in by_len.items():
            if pos + k > self._kept:
                continue
            hit = builds.get(tuple(t[0] for t in self._trail[pos : pos + k]))
            if hit is not None:
                events, made, value = hit
                for ev in events:
                    if ev[0] == "d":
                        self.decide(ev[1])
                    else:
                        self.assume(SymBool(ev[1]), check=ev[2])
                self._n = n0 + made
                return value
        outer, self._events = self._events, []
        try:
            value = compute()
            events = self._events
        finally:
            self._events = outer
        if outer is not None:  # nested: the outer record replays these too
            outer.extend(events)
        choices = tuple(t[0] for t in self._trail[pos:self._pos])
        by_len.setdefault(len(choices), {})[choices] = (events, self._n - n0, value)
        return value

    # -- fresh symbolic inputs ------------------------------------------------------------
    def _fresh_name(self, name: str) -> str:
        n = self._n
        self._n = n + 1
        return f"{name}#{n}"

    def fresh_int(self, name: str) -> SymInt:
        return SymInt(_var(self._fresh_name(name), z3.Int))

    def fresh_bool(self, name: str) -> SymBool:
        return SymBool(_var(self._fresh_name(name), z3.Bool))

    def fresh_opt_int(self, name: str) -> SymInt | None:
        present = _var(self._fresh_name(f"{name}?"), z3.Bool)
        return self.fresh_int(name) if self.decide(present) else None

    # -- running --------------------------------------------------------------------------
    def paths(self, fn: Callable[[Explorer], Any], errors: tuple[type[BaseException], ...] = ()
              ) -> Iterator[Path]:
        """Yield every feasible path of `fn(self)`; the solver state at yield time holds the
        path condition (so callers can ask further questions about it)."""
        self.solver.push()  # the base level: assumptions made before any decision
        self._levels, self._kept = 0, -1
        try:
            while True:
                self._pos = 0
                self._pc = []
                self._pc_terms.clear()
                self._assumed = []
                self._model = None
                self._n = 0  # same names on every run: readable traces
                _current.append(self)
                saved = builtins.min, builtins.max, _logic.MERGE_HOOK
                if self.merge:
                    builtins.min, builtins.max = sym_min, sym_max
                    _logic.MERGE_HOOK = merged_call
                else:
                    builtins.min, builtins.max = _BUILTIN_MIN, _BUILTIN_MAX
                    _logic.MERGE_HOOK = None
                try:
                    try:
                        value: Any = fn(self)
                        kind = "ok"
                    except Prune:
                        kind, value = "pruned", None
                    except errors as e:  # the model refused the input: action not enabled
                        kind, value = "error", e
                finally:
                    _current.pop()
                    builtins.min, builtins.max, _logic.MERGE_HOOK = saved
                if self._pos <= self._kept:
                    raise RuntimeError("a replayed path did not reach its flipped decision:"
                                       " the explored function is not deterministic")
                yield Path(tuple(self._pc), kind, value)
                del self._trail[self._pos :]
                del self._alt[self._pos :]
                del self._lvl[self._pos :]
                while self._trail and (self._trail[-1][1] or not self._trail[-1][0]):
                    self._trail.pop()
                    self._alt.pop()
                    self._lvl.pop()
                if not self._trail:
                    return
                flip = len(self._trail) - 1
                self._trail[flip] = (False, True, self._alt[flip])  # the other side + model
                level = self._lvl[flip]
                self.solver.pop(self._levels - level)
                self._levels, self._kept = level, flip
        finally:
            if self._levels:
                self.solver.pop(self._levels)
            self.solver.pop()
            self._levels, self._kept = 0, -1

    def model_for(self, pc: tuple[z3.BoolRef, ...], *extra: z3.BoolRef) -> z3.ModelRef | None:
        self.solver.push()
        try:
            self.solver.add(*pc)
            if not self._sat(*extra):
                return None
            return self.solver.model()
        finally:
            self.solver.pop()
