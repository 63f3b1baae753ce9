"""Connectives for invariants that work on plain bools and, unchanged, on the proofs'
symbolic values: `&`, `|` and these helpers never branch, so an invariant evaluates to one
formula instead of a tree of paths. (Plain `and`/`or`/`if` would also be correct, just
slower to prove.)"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# A condition is a bool, or (inside the proofs) a symbolic boolean supporting & | ~.
Cond = Any


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
