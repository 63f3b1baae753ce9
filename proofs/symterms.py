"""Z3 terms for the symbolic executor: built through Z3's C API, memoised, literals folded.

Every term the model's code builds on symbolic values (`proofs.symvalues`), the merged
forms (`proofs.symmerge`) and the explorer's path conditions (`proofs.sym`) come from the
builders here. The `_`-prefixed names are that executor's own vocabulary, shared by the
`proofs.sym*` modules; the proofs that use the executor take the public ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import z3
from z3 import z3core

_CTX = z3.main_ctx()
_TRUE, _FALSE = z3.BoolVal(True), z3.BoolVal(False)
# Z3 hash-conses terms, so `true` and `false` are one AST each: a pointer comparison tells
# a literal from a formula without a call into Z3 (made for every branch the model takes).
_TRUE_P, _FALSE_P = _TRUE.as_ast().value, _FALSE.as_ast().value
_ints: dict[int, z3.ArithRef] = {}


def int_term(k: int) -> z3.ArithRef:
    """The numeral `k`, one wrapper per value for the whole process."""
    e = _ints.get(k)
    if e is None:
        e = _ints[k] = z3.IntVal(k)
    return e


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


def _ite(c: z3.BoolRef, a: z3.ExprRef, b: z3.ExprRef) -> z3.ArithRef:
    """`If(c, a, b)` for two int terms, built through the C API and memoised."""
    key = ("ite", id(c), id(a), id(b))
    hit = _MEMO.get(key)
    if hit is not None:
        return hit[0]
    r = z3.ArithRef(z3core.Z3_mk_ite(_CTX.ref(), c.as_ast(), a.as_ast(), b.as_ast()), _CTX)
    _MEMO[key] = (r, (c, a, b))
    return r


ite = _ite


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
    return _cmp2(z3core.Z3_mk_eq, x, int_term(k))
