"""Branch-free forms of the model's choices: min/max as If terms, merge_point calls as one value.

With `Explorer(merge=True)` (proofs.sym), `min`/`max` over symbolic ints build one If term
instead of forking on each comparison, and a function marked `model.logic.merge_point`
runs through all its paths once, its result joined into one formula or If chain: the same
values on every input, in fewer paths of the caller.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

import z3
from z3 import z3core

from epochgc.proofs.symctx import _current
from epochgc.proofs.symterms import _FALSE_P, _TRUE_P, _cmp2, _ite, _not, _same_term, conj, disj
from epochgc.proofs.symvalues import SymBool, SymInt, _bool_expr, expr_of

# -- min and max without forking --------------------------------------------------------------
# `max(a, b)` on symbolic ints asks `b > a` for its truth, which forks the path; the result
# is a pure function of the operands, so it is built instead as the term CPython's loop
# computes (the first extreme item wins ties): max folds `If(x > acc, x, acc)`, min
# `If(x < acc, x, acc)`. Installed as the builtins while an Explorer runs its function
# (`Explorer.paths`); anything else (keys, defaults, non-int items, no
# symbolic item) goes to the builtin, which behaves exactly as without it. (`merge=True`.)
_BUILTIN_MIN, _BUILTIN_MAX = builtins.min, builtins.max


def _extreme(args: tuple[Any, ...], kw: dict[str, Any], cmp: Any) -> Any:
    """The merged extreme of `args` (max: cmp is Z3_mk_gt), or NotImplemented when the
    builtin must answer (no symbolic int among plain ints, or a form this does not model)."""
    if kw or not args:
        return NotImplemented
    items = args if len(args) > 1 else args[0]
    if type(items) not in (list, tuple) or not items:
        return NotImplemented
    sym = False
    for x in items:
        t = type(x)
        if t is SymInt:
            sym = True
        elif t is not int:
            return NotImplemented
    if not sym:
        return NotImplemented
    acc: Any = items[0]
    for x in items[1:]:
        if type(acc) is int and type(x) is int:
            acc = (_BUILTIN_MAX if cmp is z3core.Z3_mk_gt else _BUILTIN_MIN)(acc, x)
            continue
        a, b = expr_of(acc), expr_of(x)
        if _same_term(a, b):
            continue  # the same term: the first one stays
        c = _cmp2(cmp, b, a)
        p = c.as_ast().value
        if p in (_TRUE_P, _FALSE_P):
            acc = x if p == _TRUE_P else acc
            continue
        acc = SymInt(_ite(c, b, a))
    return acc


def sym_max(*args: Any, **kw: Any) -> Any:
    """`max`, merged into one term when it compares symbolic ints (see `_extreme`)."""
    r = _extreme(args, kw, z3core.Z3_mk_gt)
    return _BUILTIN_MAX(*args, **kw) if r is NotImplemented else r


def sym_min(*args: Any, **kw: Any) -> Any:
    """`min`, merged into one term when it compares symbolic ints (see `_extreme`)."""
    r = _extreme(args, kw, z3core.Z3_mk_lt)
    return _BUILTIN_MIN(*args, **kw) if r is NotImplemented else r


# -- merged calls (model.logic.merge_point) ---------------------------------------------------


class _Sub:
    """Decides inside a merged call: every side of every branch, without the solver (the
    merged value carries each side's condition, so an infeasible side only adds a
    disjunct that never holds). A condition the enclosing path already decided keeps its
    side; one asked twice in a run gets the same answer."""

    keeps_decisions = False  # each run takes other sides

    def __init__(self, outer: set[int]) -> None:
        self.outer = outer  # addresses of the literals the enclosing path holds
        self.trail: list[bool] = []
        self.pos = 0
        self.lits: list[z3.BoolRef] = []
        self.asked: dict[int, bool] = {}

    def decide(self, cond: z3.BoolRef) -> bool:
        p = cond.as_ast().value
        if p in (_TRUE_P, _FALSE_P):
            return bool(p == _TRUE_P)
        if p in self.outer:
            return True
        neg = _not(cond)
        if neg.as_ast().value in self.outer:
            return False
        hit = self.asked.get(p)
        if hit is not None:
            return hit
        if self.pos < len(self.trail):
            choice = self.trail[self.pos]
        else:
            choice = True
            self.trail.append(True)
        self.pos += 1
        self.asked[p] = choice
        self.asked[neg.as_ast().value] = not choice
        self.lits.append(cond if choice else neg)
        return choice

    def held(self) -> set[int]:
        return self.outer | {x.as_ast().value for x in self.lits}


def caches_decisions() -> bool:
    """May a value decided now be kept for the rest of the run (proofs.param.lazy)? Not
    inside a merged call, whose runs each take other sides, nor inside a non-pruning
    explorer (a goal or an assumption joined into one formula over all its sides, run
    within a path of the pruning one): only the path's own decisions are kept."""
    if not _current:
        return True
    return _current[-1].keeps_decisions


MERGE_LIMIT = 256  # paths of one merged call; more and the call forks as usual


def merged_call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """`fn(*args)` as one value over all its paths (the hook of `model.logic.merge_point`):
    a condition is the disjunction of each path's condition and result, an int the If
    chain of the results. A path that raises, a result of another kind (None, a tuple),
    or more than MERGE_LIMIT paths: `fn(*args)` forks the caller as without the hook."""
    if not _current:
        return fn(*args)
    outer = _current[-1].held()
    if outer is None:  # unbranched: the call runs as is
        return fn(*args)
    sub = _Sub(outer)
    runs: list[tuple[list[z3.BoolRef], Any]] = []
    while True:
        sub.pos, sub.lits, sub.asked = 0, [], {}
        _current.append(sub)
        try:
            value = fn(*args)
        except Exception:
            value = _Sub  # marks a path that raised
        finally:
            _current.pop()
        if value is _Sub or len(runs) >= MERGE_LIMIT:
            return fn(*args)
        runs.append((sub.lits, value))
        del sub.trail[sub.pos:]
        while sub.trail and not sub.trail[-1]:
            sub.trail.pop()
        if not sub.trail:
            break
        sub.trail[-1] = False
    return _join(runs, fn, args)


def _join(runs: list[tuple[list[z3.BoolRef], Any]], fn: Callable[..., Any],
          args: tuple[Any, ...]) -> Any:
    kinds = {type(v) for _, v in runs}
    if len(runs) == 1:
        return runs[0][1]
    if kinds <= {bool, SymBool}:
        return SymBool(disj([conj([*lits, _bool_expr(v, v, "merge")]) for lits, v in runs]))
    if kinds <= {int, SymInt} and bool not in kinds:
        acc = expr_of(runs[-1][1])
        for lits, v in reversed(runs[:-1]):
            acc = _ite(conj(lits), expr_of(v), acc)
        return SymInt(acc)
    return fn(*args)


