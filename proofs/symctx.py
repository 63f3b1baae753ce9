"""Who decides a symbolic condition's truth right now: the stack of deciders.

A symbolic value asked for its truth (`SymBool.__bool__`, `SymInt.__bool__`) asks the
innermost decider on `_current`: an `Explorer` (proofs.sym) forks the path, a merged call's
run (proofs.symmerge) takes every side in turn, and `unbranched` (here) refuses to branch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import z3

from epochgc.proofs.symterms import _FALSE_P, _TRUE_P


class Decider(Protocol):
    """What answers a symbolic condition's truth while a function runs on symbolic values."""

    def decide(self, cond: z3.BoolRef) -> bool:
        """The side of `cond` this run takes (the literals true and false decide themselves)."""

    def held(self) -> set[int] | None:
        """The addresses of the literals the current path holds, which a merged call
        inside it keeps (proofs.symmerge); None where no call is merged."""

    @property
    def keeps_decisions(self) -> bool:
        """May a value decided now be kept for the rest of the run
        (proofs.symmerge.caches_decisions)?"""


_current: list[Decider] = []


def _decider() -> Decider:
    if not _current:
        raise TypeError("a symbolic value was used outside an Explorer run")
    return _current[-1]


class Branches(Exception):
    """Raised by `unbranched` when the function asks a symbolic condition's truth."""


class _NoFork:
    """Stands in for an Explorer: literals decide, anything else raises Branches."""

    keeps_decisions = False

    def decide(self, cond: z3.BoolRef) -> bool:
        p = cond.as_ast().value
        if p in (_TRUE_P, _FALSE_P):
            return bool(p == _TRUE_P)
        raise Branches()

    def held(self) -> set[int] | None:
        return None  # a call made here runs as is (and raises Branches if it branches)


def unbranched(fn: Callable[[], Any]) -> Any:
    """`fn()` when it never branches on a symbolic condition (its one path, with the
    empty path condition); Branches when it would (then explore it with an Explorer)."""
    _current.append(_NoFork())
    try:
        return fn()
    finally:
        _current.pop()
