"""Run the model's own Python code on Z3 terms.

The model is plain Python (`if`, `max`, `is None`, frozen dataclasses). We hand it
`SymInt`/`SymBool` values; every time Python asks a symbolic condition for its truth value
the current `Explorer` decides a branch, records it in the path condition and, with the
solver, prunes branches that cannot happen. Re-running the function with a different
decision trail enumerates every feasible path (depth first), the way CrossHair does.

So the proof obligations are about exactly the code the harness, the vectors and the
implementation's pure parts run: there is no second, hand-written encoding of the model.
"""

from __future__ import annotations

import builtins
import dataclasses
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import z3
from epochgc.model import logic as _logic
from z3 import z3core


class SolverUnknown(RuntimeError):
    """The solver answered `unknown` (or timed out): never counted as a proof."""


class Prune(Exception):
    """Raised inside an explored function to abandon the current path (an assumption
    does not hold on it)."""


_current: list[Explorer] = []


def _explorer() -> Explorer:
    if not _current:
        raise TypeError("a symbolic value was used outside an Explorer run")
    return _current[-1]


_CTX = z3.main_ctx()
_INT = z3.IntSort()
_TRUE, _FALSE = z3.BoolVal(True), z3.BoolVal(False)
# Z3 hash-conses terms, so `true` and `false` are one AST each: a pointer comparison tells
# a literal from a formula without a call into Z3 (made for every branch the model takes).
_TRUE_P, _FALSE_P = _TRUE.as_ast().value, _FALSE.as_ast().value
_ints: dict[int, z3.ArithRef] = {}


def expr_of(v: object) -> z3.ExprRef:
    if isinstance(v, SymInt | SymBool):
        return v.expr
    if isinstance(v, bool):
        return _TRUE if v else _FALSE
    if isinstance(v, int):
        e = _ints.get(v)
        if e is None:
            e = _ints[v] = z3.IntVal(v)
        return e
    raise TypeError(f"not a symbolic-compatible value: {v!r}")


# Terms are built through Z3's C API directly: the Python layer's coercions cost more
# than solving here, and every operand is already of the right sort.
def _mk(fn: Callable[..., Any], *args: z3.ExprRef) -> Any:
    return fn(_CTX.ref(), *(a.as_ast() for a in args))


def _bool(ast: Any) -> z3.BoolRef:
    return z3.BoolRef(ast, _CTX)


# Every path re-runs the function from the start, rebuilding the same terms from the same
# variables (fresh inputs are interned by name): memoising the term builders on operand
# identity turns those rebuilds into dict hits. Operands are kept alive in the memo so an
# id is never reused; an Explorer that prunes clears it (one per proof task).
_MEMO: dict[tuple[Any, ...], tuple[Any, tuple[Any, ...]]] = {}
_VARS: dict[str, Any] = {}


def _memo(tag: Any, build: Callable[[], Any], *operands: Any) -> Any:
    key = (tag, *map(id, operands))
    hit = _MEMO.get(key)
    if hit is not None:
        return hit[0]
    r = build()
    _MEMO[key] = (r, operands)
    return r


# The binary builders below are `_memo` written out (the same key, the same kept
# operands): they run hundreds of thousands of times per task, and a closure plus an
# argument tuple per call cost more than the dict hit they lead to.
def _binary(tag: Any, fn: Any, a: z3.ExprRef, b: z3.ExprRef) -> Any:
    """An n-ary Z3 constructor (`Z3_mk_and`, `Z3_mk_add`, ...) on two operands, memoised."""
    key = (tag, id(a), id(b))
    hit = _MEMO.get(key)
    if hit is not None:
        return hit[0]
    arr = (z3.Ast * 2)(a.as_ast(), b.as_ast())
    ast = fn(_CTX.ref(), 2, arr)
    r = z3.ArithRef(ast, _CTX) if tag is fn else _bool(ast)  # arithmetic is tagged by fn
    _MEMO[key] = (r, (a, b))
    return r


def _and(a: z3.BoolRef, b: z3.BoolRef) -> z3.BoolRef:
    return _binary("and", z3core.Z3_mk_and, a, b)


def _or(a: z3.BoolRef, b: z3.BoolRef) -> z3.BoolRef:
    return _binary("or", z3core.Z3_mk_or, a, b)


def _cmp2(fn: Any, a: z3.ExprRef, b: z3.ExprRef) -> z3.BoolRef:
    key = (fn, id(a), id(b))
    hit = _MEMO.get(key)
    if hit is not None:
        return hit[0]
    r = _bool(fn(_CTX.ref(), a.as_ast(), b.as_ast()))
    _MEMO[key] = (r, (a, b))
    return r


def conj(items: list[z3.BoolRef]) -> z3.BoolRef:
    """And over a list, built in one C call."""
    if not items:
        return _TRUE
    if len(items) == 1:
        return items[0]
    arr = (z3.Ast * len(items))(*(i.as_ast() for i in items))
    return _bool(z3core.Z3_mk_and(_CTX.ref(), len(items), arr))


def disj(items: list[z3.BoolRef]) -> z3.BoolRef:
    if not items:
        return _FALSE
    if len(items) == 1:
        return items[0]
    arr = (z3.Ast * len(items))(*(i.as_ast() for i in items))
    return _bool(z3core.Z3_mk_or(_CTX.ref(), len(items), arr))


def _arith(fn: Any, a: z3.ExprRef, b: z3.ExprRef) -> z3.ArithRef:
    return _binary(fn, fn, a, b)


def _not(a: z3.BoolRef) -> z3.BoolRef:
    p = a.as_ast().value
    if p in (_TRUE_P, _FALSE_P):  # a literal: its negation is the other literal
        return _FALSE if p == _TRUE_P else _TRUE
    return _memo("not", lambda: _negate(a), a)


def negation(a: z3.BoolRef) -> z3.BoolRef:
    """`Not(a)`, memoised and built through the C API (`not not b` is `b`)."""
    return _not(a)


def _negate(a: z3.BoolRef) -> z3.BoolRef:
    """`not a`, with `not not b` as `b`: a path that decided `b` then sees the test
    `not b` as a literal it already holds (Explorer.decide) instead of a new question."""
    if z3.is_not(a):
        return a.arg(0)
    return _bool(_mk(z3core.Z3_mk_not, a))


_CMP = {
    "lt": z3core.Z3_mk_lt,
    "le": z3core.Z3_mk_le,
    "gt": z3core.Z3_mk_gt,
    "ge": z3core.Z3_mk_ge,
    "eq": z3core.Z3_mk_eq,
}


_REFLEXIVE = frozenset({"le", "ge", "eq"})


def _same_term(a: z3.ExprRef, b: z3.ExprRef) -> bool:
    """Z3 hash-conses terms: the same term is the same AST pointer (cheaper than get_id)."""
    return bool(a.as_ast().value == b.as_ast().value)


def _refuse(what: str, v: object) -> TypeError:
    return TypeError(f"{what} on a symbolic value ({v!r}) cannot be modelled here")


def _bool_expr(o: object, v: object, what: str) -> z3.BoolRef:
    """A bool or symbolic bool operand; anything else (an int, a symbolic int) is refused
    rather than silently mixing sorts."""
    if isinstance(o, SymBool):
        return o.expr
    if isinstance(o, bool):
        return _TRUE if o else _FALSE
    raise _refuse(f"{what} with {type(o).__name__}", v)


class SymBool:
    """A boolean whose value is a Z3 formula. Truth is asked only inside an Explorer run
    (where it forks); `&`, `|`, `~`, `==` and `!=` build formulas; everything else raises."""

    __slots__ = ("expr",)

    def __init__(self, expr: z3.BoolRef) -> None:
        self.expr = expr

    def __bool__(self) -> bool:
        return _explorer().decide(self.expr)

    # `&`, `|`, `~` build formulas without forking; model.logic uses them for invariants.
    def __and__(self, o: object) -> SymBool:
        return SymBool(_and(self.expr, _bool_expr(o, self, "&")))

    __rand__ = __and__

    def __or__(self, o: object) -> SymBool:
        return SymBool(_or(self.expr, _bool_expr(o, self, "|")))

    __ror__ = __or__

    def __invert__(self) -> SymBool:
        return SymBool(_not(self.expr))

    # Without these, `==` on two symbolic bools (and so dataclass `==`/`!=` on states
    # holding them) would be an identity test.
    def __eq__(self, o: object) -> Any:
        if o is None or isinstance(o, str):
            return False
        return SymBool(_cmp2(z3core.Z3_mk_eq, self.expr, _bool_expr(o, self, "==")))

    def __ne__(self, o: object) -> Any:
        r = self.__eq__(o)
        return (not r) if isinstance(r, bool) else ~r

    def __hash__(self) -> int:
        raise _refuse("hash()", self)

    def _refused(self, *_: object) -> Any:
        raise _refuse("arithmetic, ordering or conversion", self)

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __neg__ = __pos__ = _refused
    __lt__ = __le__ = __gt__ = __ge__ = __index__ = __int__ = __float__ = _refused
    __xor__ = __rxor__ = __abs__ = __round__ = _refused

    def __repr__(self) -> str:
        return f"SymBool({self.expr})"


# Under mypy a symbolic int is an int (it flows through the model's `int` fields); at run
# time it is NOT an int subclass, so CPython's int fast paths (`True + x`, `x < True`,
# `[10, 20][x]`, `round(x)`, `x.real`) cannot read a placeholder value: every operation
# lands in a method below, which models it or raises.
if TYPE_CHECKING:
    _IntBase = int
else:
    _IntBase = object


class SymInt(_IntBase):
    """An integer whose value is a Z3 term. `isinstance(x, int)` holds (the model's input
    checks accept it, via `__class__`), `isinstance(x, bool)` does not."""

    __slots__ = ("expr",)
    expr: z3.ArithRef

    def __init__(self, expr: z3.ArithRef) -> None:
        self.expr = expr

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance(x, int) falls back to this
        return int

    def _operand(self, o: object, what: str) -> z3.ArithRef | None:
        """The Z3 term of an integer operand; None for types that are simply not numbers
        (the caller answers NotImplemented); bools and floats are refused."""
        t = type(o)
        if t is SymInt:  # type() is the real class (`__class__` says int)
            return o.expr  # type: ignore[attr-defined]
        if t is int:
            e = _ints.get(o)  # type: ignore[call-overload]
            return e if e is not None else expr_of(o)
        if isinstance(o, SymInt):
            return o.expr
        if isinstance(o, bool | float | complex | SymBool):
            raise _refuse(f"{what} with {type(o).__name__}", self)
        if isinstance(o, int):
            return z3.IntVal(int(o)) if type(o) is not int else expr_of(o)
        return None

    def _arith(self, o: object, fn: Any, what: str, swap: bool = False) -> Any:
        e = self._operand(o, what)
        if e is None:
            return NotImplemented
        a, b = (e, self.expr) if swap else (self.expr, e)
        return SymInt(_arith(fn, a, b))

    def __add__(self, o: object) -> Any:
        return self._arith(o, z3core.Z3_mk_add, "+")

    def __radd__(self, o: object) -> Any:
        return self._arith(o, z3core.Z3_mk_add, "+", swap=True)

    def __sub__(self, o: object) -> Any:
        return self._arith(o, z3core.Z3_mk_sub, "-")

    def __rsub__(self, o: object) -> Any:
        return self._arith(o, z3core.Z3_mk_sub, "-", swap=True)

    def __neg__(self) -> SymInt:
        return SymInt(-self.expr)

    def __pos__(self) -> SymInt:
        return self

    def __round__(self, ndigits: object = None) -> SymInt:
        if ndigits is not None:
            raise _refuse("round() with ndigits", self)
        return self

    def __trunc__(self) -> SymInt:
        return self

    __floor__ = __ceil__ = __trunc__

    def _cmp(self, o: object, op: str) -> Any:
        e = self._operand(o, op)
        if e is None:
            if op == "eq":  # a number is never equal to None, a string, ...
                return False
            return NotImplemented
        if e is self.expr or _same_term(e, self.expr):
            # The same term on both sides (`max(x, x)` over replicas reporting one value):
            # reflexivity decides it, so no path forks on a side that cannot happen.
            return SymBool(_TRUE if op in _REFLEXIVE else _FALSE)
        return SymBool(_cmp2(_CMP[op], self.expr, e))

    def __lt__(self, o: object) -> Any:
        return self._cmp(o, "lt")

    def __le__(self, o: object) -> Any:
        return self._cmp(o, "le")

    def __gt__(self, o: object) -> Any:
        return self._cmp(o, "gt")

    def __ge__(self, o: object) -> Any:
        return self._cmp(o, "ge")

    def __eq__(self, o: object) -> Any:
        return self._cmp(o, "eq")

    def __ne__(self, o: object) -> Any:
        r = self._cmp(o, "eq")
        return (not r) if isinstance(r, bool) else ~r

    def __hash__(self) -> int:
        raise _refuse("hash()", self)

    def __bool__(self) -> bool:
        return _explorer().decide(_not(_cmp2(z3core.Z3_mk_eq, self.expr, expr_of(0))))

    def _concrete(self, *_: object) -> Any:
        raise _refuse("an operation that needs a concrete value", self)

    # Non-linear, bitwise and conversion operations: refused.
    __index__ = __int__ = __float__ = __complex__ = __mul__ = __rmul__ = _concrete
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __truediv__ = __rtruediv__ = _concrete
    __pow__ = __rpow__ = __lshift__ = __rlshift__ = __rshift__ = __rrshift__ = _concrete
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = __invert__ = _concrete
    __abs__ = __divmod__ = __rdivmod__ = _concrete

    def __getattr__(self, name: str) -> Any:
        # `x.real`, `x.bit_length()`, ...: an int's attributes would need its value.
        # (Dunder probes such as copy's `__deepcopy__` get the plain answer.)
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(f"a symbolic integer has no concrete .{name}")

    def __format__(self, spec: str) -> str:
        if spec:  # a padded or numeric rendering would print a made-up value
            raise _refuse(f"format spec {spec!r}", self)
        return f"<{self.expr}>"

    def __repr__(self) -> str:
        return f"<{self.expr}>"

    __str__ = __repr__


# -- min and max without forking --------------------------------------------------------------
# `max(a, b)` on symbolic ints asks `b > a` for its truth, which forks the path; the result
# is a pure function of the operands, so it is built instead as the term CPython's loop
# computes (the first extreme item wins ties): max folds `If(x > acc, x, acc)`, min
# `If(x < acc, x, acc)`. Installed as the builtins while an Explorer runs its function
# (`Explorer.paths`); anything else (keys, defaults, non-int items, no
# symbolic item) goes to the builtin, which behaves exactly as without it. (`merge=True`.)
_BUILTIN_MIN, _BUILTIN_MAX = builtins.min, builtins.max


def _ite(c: z3.BoolRef, a: z3.ExprRef, b: z3.ExprRef) -> z3.ArithRef:
    """`If(c, a, b)` for two int terms, built through the C API and memoised."""
    key = ("ite", id(c), id(a), id(b))
    hit = _MEMO.get(key)
    if hit is not None:
        return hit[0]
    r = z3.ArithRef(z3core.Z3_mk_ite(_CTX.ref(), c.as_ast(), a.as_ast(), b.as_ast()), _CTX)
    _MEMO[key] = (r, (c, a, b))
    return r


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


ite = _ite


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

    def terms(self) -> set[int]:
        return self.outer | {x.as_ast().value for x in self.lits}


def caches_decisions() -> bool:
    """May a value decided now be kept for the rest of the run (proofs.param.lazy)? Not
    inside a merged call, whose runs each take other sides, nor inside a non-pruning
    explorer (a goal or an assumption joined into one formula over all its sides, run
    within a path of the pruning one): only the path's own decisions are kept."""
    if not _current:
        return True
    top = _current[-1]
    return isinstance(top, Explorer) and top.prune


MERGE_LIMIT = 256  # paths of one merged call; more and the call forks as usual


def merged_call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """`fn(*args)` as one value over all its paths (the hook of `model.logic.merge_point`):
    a condition is the disjunction of each path's condition and result, an int the If
    chain of the results. A path that raises, a result of another kind (None, a tuple),
    or more than MERGE_LIMIT paths: `fn(*args)` forks the caller as without the hook."""
    if not _current:
        return fn(*args)
    top = _current[-1]
    if isinstance(top, Explorer):
        outer = top._pc_terms
    elif isinstance(top, _Sub):
        outer = top.terms()
    else:
        return fn(*args)
    sub = _Sub(outer)
    runs: list[tuple[list[z3.BoolRef], Any]] = []
    while True:
        sub.pos, sub.lits, sub.asked = 0, [], {}
        _current.append(sub)  # type: ignore[arg-type]
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


def _var(name: str, make: Callable[[str], Any]) -> Any:
    """The same Z3 constant object for the same name on every run (see _MEMO)."""
    key = f"{make.__name__}:{name}"
    v = _VARS.get(key)
    if v is None:
        v = _VARS[key] = make(name)
    return v


def const_bool(name: str) -> z3.BoolRef:
    """The boolean constant `name`, one wrapper per name for the whole exploration (z3.Bool
    through the Python API costs more than the rest of a shape fork)."""
    return _var(name, z3.Bool)


def const_int(name: str) -> z3.ArithRef:
    return _var(name, z3.Int)


def eq_terms(x: z3.ExprRef, y: z3.ExprRef) -> z3.BoolRef:
    """`x == y` for two terms of one sort, memoised (through the C API)."""
    return _cmp2(z3core.Z3_mk_eq, x, y)


def eq_int(x: z3.ArithRef, k: int) -> z3.BoolRef:
    """`x == k`, memoised like the model's own comparisons."""
    return _cmp2(z3core.Z3_mk_eq, x, expr_of(k))


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
        return [(x, expr_of(k.as_long() + (1 if neg else 0)))]  # for `!=` any other value
    return []


# Branch sides the path's assumptions alone refute (`Explorer._side_model`): keyed by (the
# side's AST address, the addresses of the assumed formulas), the ASTs kept alive beside
# the verdict so no address is reused. A probe solver per assumption set holds it asserted.
_IMPLIED: dict[tuple[int, tuple[int, ...]], tuple[bool | None, int, tuple[z3.BoolRef, ...]]] = {}
PROBE_AFTER = 3  # refutations of a side (with the same assumptions) before a probe
_PROBES: dict[tuple[int, ...], tuple[Any, tuple[z3.BoolRef, ...]]] = {}


# Z3 settings for the proof runs (`tune_z3`): they change how fast a verdict comes, never
# what it is. The legacy arithmetic solver answers our many small incremental checks
# (linear integer constraints over a few hundred constants) with fewer instructions, and an
# uncompressed model skips a pass over every model the explorer takes (one per path side
# it cannot settle otherwise). Measured on the correspondence of two 3-partition shapes
# (valgrind, instructions): 16.5 G default, 15.6 G without compression, 14.4 G with both.
Z3_TUNING: dict[str, object] = {"smt.arith.solver": 2, "model.compact": False}


def tune_z3() -> None:
    """Apply `Z3_TUNING` to this process's Z3 (global: every solver made afterwards)."""
    for k, v in Z3_TUNING.items():
        z3.set_param(k, v)


class Watchdog:
    """The explorer's time limit per solver check: one thread per process interrupts the
    Z3 context when a check runs past its deadline. Z3's own `timeout` starts a timer for
    every check, which cost about 8% of the induction CPU (checks of about 1 ms, tens of
    thousands of them). A check stopped by the watchdog answers unknown (a failure, never
    a proof), as with Z3's timeout; an unknown that came before the deadline (an interrupt
    meant for an earlier check that finished first) is asked again, once."""

    POLL_S = 0.02  # a check may run this much past its deadline before it is stopped

    def __init__(self) -> None:
        self._deadline: float | None = None
        self._pid = 0

    def _start(self) -> None:
        self._pid = os.getpid()  # a forked worker has no thread: start its own
        threading.Thread(target=self._run, name="z3-watchdog", daemon=True).start()

    def _run(self) -> None:
        while True:
            time.sleep(self.POLL_S)
            d = self._deadline
            if d is not None and time.perf_counter() > d:
                _CTX.interrupt()

    def check(self, solver: Any, timeout_ms: int, extra: tuple[z3.BoolRef, ...]
              ) -> tuple[Any, float]:
        """(result, seconds) of `solver.check(*extra)` within `timeout_ms`."""
        if self._pid != os.getpid():
            self._start()
        for _ in range(2):
            t0 = time.perf_counter()
            self._deadline = t0 + timeout_ms / 1000
            try:
                r = solver.check(*extra)
            finally:
                self._deadline = None
            dt = time.perf_counter() - t0
            if r != z3.unknown or dt >= timeout_ms / 1000:
                break
        return r, dt


WATCHDOG = Watchdog()


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

    def __init__(self, timeout_ms: int = 2000, seed: int = 0, prune: bool = True,
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
                solver = z3.Solver()  # its time limit is the watchdog's (`_sat`)
                solver.set("random_seed", seed)
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
        self._timeout_ms, self._seed = timeout_ms, seed
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

    # -- solver helpers -------------------------------------------------------------------
    def _sat(self, *extra: z3.BoolRef) -> bool:
        if not self.prune:
            return True
        self.checks += 1
        r, dt = WATCHDOG.check(self.solver, self._timeout_ms, extra)
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
            s = z3.Solver()
            s.set("timeout", self._timeout_ms)
            s.set("random_seed", self._seed)
            s.add(*self._assumed)
            probe = _PROBES[akey] = (s, tuple(self._assumed))
        self.checks += 1
        t0 = time.perf_counter()
        r = probe[0].check(side)
        self.slowest_query_s = max(self.slowest_query_s, time.perf_counter() - t0)
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


class Branches(Exception):
    """Raised by `unbranched` when the function asks a symbolic condition's truth."""


class _NoFork:
    """Stands in for an Explorer: literals decide, anything else raises Branches."""

    def decide(self, cond: z3.BoolRef) -> bool:
        p = cond.as_ast().value
        if p in (_TRUE_P, _FALSE_P):
            return bool(p == _TRUE_P)
        raise Branches()


def unbranched(fn: Callable[[], Any]) -> Any:
    """`fn()` when it never branches on a symbolic condition (its one path, with the
    empty path condition); Branches when it would (then explore it with an Explorer)."""
    _current.append(_NoFork())  # type: ignore[arg-type]
    try:
        return fn()
    finally:
        _current.pop()


def concretize(value: Any, model: z3.ModelRef) -> Any:
    """Replace every symbolic value inside (dataclasses, tuples, lists, dicts) by its value
    in `model`, giving plain Python the model code can be re-run on. An optional field
    of a lazy object (`proofs.param.lazy`) is present when its group's condition holds in
    `model`, whatever the group's current decision (a later path may have made another)."""
    if isinstance(value, SymInt):
        return model.eval(value.expr, model_completion=True).as_long()
    if isinstance(value, SymBool):
        return z3.is_true(model.eval(value.expr, model_completion=True))
    groups = getattr(value, "__dict__", {}).get("_groups")
    if groups is not None:
        base = type(value).__mro__[1]
        kw = {}
        for f in dataclasses.fields(base):
            if not f.init:
                continue
            if f.name in groups:
                g, v = groups[f.name]
                present = z3.is_true(model.eval(g.cond, model_completion=True))
                kw[f.name] = concretize(v, model) if present else None
            else:
                kw[f.name] = concretize(object.__getattribute__(value, f.name), model)
        return base(**kw)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(
            value,
            **{f.name: concretize(getattr(value, f.name), model) for f in dataclasses.fields(value)
               if f.init},
        )
    if isinstance(value, tuple):
        return tuple(concretize(v, model) for v in value)
    if isinstance(value, list):
        return [concretize(v, model) for v in value]
    if isinstance(value, dict):
        return {k: concretize(v, model) for k, v in value.items()}
    return value
