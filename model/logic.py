"""Connectives for invariants that work on plain bools and, unchanged, on the proofs'
symbolic values: `&`, `|` and these helpers never branch, so an invariant evaluates to one
formula instead of a tree of paths. (Plain `and`/`or`/`if` would also be correct, just
slower to prove.)"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, ParamSpec, TypeVar

# A condition is a bool, or (inside the proofs) a symbolic boolean supporting & | ~.
Cond = Any

_P = ParamSpec("_P")
_R = TypeVar("_R")
# Set by the symbolic executor (proofs.sym) while it explores; None otherwise.
MERGE_HOOK: Callable[[Callable[..., Any], tuple[Any, ...]], Any] | None = None


def merge_point(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Mark a pure function whose result (a condition or an int) the symbolic executor may
    compute over all its paths at once, as one formula, instead of forking its caller at
    every optional field it reads: a condition per element of a loop then costs the sum of
    the elements' paths, not their product. On plain values it is `fn` itself."""
    @functools.wraps(fn)
    def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        hook = MERGE_HOOK
        if hook is None or kwargs:
            return fn(*args, **kwargs)
        return hook(fn, args)  # type: ignore[no-any-return]
    return call


def neg(a: Cond) -> Cond:
    return (not a) if isinstance(a, bool) else ~a


def implies(a: Cond, b: Cond) -> Cond:
    return neg(a) | b


def iff(a: Cond, b: Cond) -> Cond:
    return implies(a, b) & implies(b, a)


def all_of(conds: Iterable[Cond]) -> Cond:
    out: Cond = True
    for c in conds:
        if c is False:
            return False  # a concretely false conjunct decides it; no formula needed
        out = c if out is True else out & c
    return out


def any_of(conds: Iterable[Cond]) -> Cond:
    out: Cond = False
    for c in conds:
        if c is True:
            return True
        out = c if out is False else out | c
    return out


def le_opt(a: int | None, b: int | None) -> Cond:
    """`a <= b` where None is below every value: an absent watermark is the lowest one."""
    if a is None:
        return True
    if b is None:
        return False
    return a <= b
