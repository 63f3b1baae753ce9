"""Two interpretations of one formula source (`proofs/param/spec.py`).

The quantified transition system is written once, against a small logic interface `L`
(quantifiers, connectives, if-then-else) and states `St` (functions from elements to
values). `Z3Logic` turns it into quantified Z3 formulas over uninterpreted sorts (the
parameterized proof); `FiniteLogic` evaluates it on a concrete finite structure with
plain Python values (the correspondence check). The formulas never branch on Python truth
values, so both interpretations read the same text.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import z3

SORTS = ("W", "O", "P", "R")  # writes, objects, partitions, replicas
INT, BOOL = "Int", "Bool"

# name -> (argument sorts, value kind). Every mutable field of the abstract state.
SIG: dict[str, tuple[tuple[str, ...], str]] = {
    "revision": ((), INT),
    "cluster_epoch": ((), INT),
    "snapshot_revision": ((), INT),
    "gc_set": ((), BOOL),  # a GC round has computed M (System.gc_m is not None)
    "gc_m": ((), INT),
    "clock": ((), INT),  # the store's clock (objects age on it)
    "grace": ((), INT),  # GC's grace period (fixed, any value >= 0)
    "created": (("P",), BOOL),
    "crev": (("P",), INT),
    "wset": (("P",), BOOL),  # the four window fields are set (they are set together, I3)
    "max": (("P",), INT),
    "prev": (("P",), INT),
    "floor": (("P",), INT),
    "woff": (("P",), INT),
    "lrlo": (("P",), INT),
    "log_end": (("P",), INT),
    "in_snap": (("P",), BOOL),
    "iset": (("P", "R"), BOOL),  # the replica has an M(p) view
    "inact": (("P", "R"), INT),
    "rset": (("P", "R"), BOOL),  # the replica published a report with a value
    "rep": (("P", "R"), INT),
    "rnull": (("P", "R"), BOOL),  # its report in the store says "no value" (else: absent)
    "ostatus": (("O",), INT),
    "oepoch": (("O",), INT),
    "owritten": (("O",), INT),  # the clock when the object was uploaded
    "wstatus": (("W",), INT),
    "woffset": (("W",), INT),
    "durable": (("W",), BOOL),  # ghost: the placeholder's data is durable in L1 (R27)
    "wrepl": (("W",), BOOL),  # ghost: the fence admitted it (its placeholder went to the log)
    # The epoch barrier (R36-R38).
    "cache_floor": ((), INT),  # every cached epoch is at least this (caches invalidated)
    "bset": (("P",), BOOL),  # a barrier command was applied: its candidate is pending
    "bepoch": (("P",), INT),  # the highest candidate applied
    "boff": (("P",), INT),  # the log offset of its command
    "gset": (("P",), BOOL),  # a safe epoch was promoted
    "gsafe": (("P",), INT),  # the promoted safe epoch
}
# Rigid (never changed by an action): which object and partition a write belongs to.
# W -> O and W -> P only: the function graph is stratified (no cycle), as EPR needs.
STATIC: dict[str, tuple[tuple[str, ...], str]] = {"wobj": (("W",), "O"), "wpart": (("W",), "P")}


class St:
    """A state: `s.crev(p)`, `s.revision()`. Views made by `with_` override some fields."""

    def __init__(self, fns: dict[str, Callable[..., Any]],
                 changed: frozenset[str] = frozenset()) -> None:
        self._fns = fns
        self.changed = changed  # fields a view overrides (the rest are the base state's)
        # As instance attributes: `s.crev` then skips the failed normal lookup that
        # precedes `__getattr__` (hundreds of thousands per correspondence task).
        self.__dict__.update(fns)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        try:
            return self._fns[name]
        except KeyError:
            raise AttributeError(name) from None

    def with_(self, **over: Callable[..., Any]) -> St:
        return St({**self._fns, **over}, self.changed | over.keys())


class Z3Logic:
    """Quantified formulas over uninterpreted sorts."""

    def __init__(self) -> None:
        self.sort = {s: z3.DeclareSort(s) for s in SORTS}
        self._n = itertools.count()

    # connectives
    def And(self, *xs: Any) -> Any:
        return z3.And(*xs) if xs else z3.BoolVal(True)

    def Or(self, *xs: Any) -> Any:
        return z3.Or(*xs) if xs else z3.BoolVal(False)

    def Not(self, x: Any) -> Any:
        return z3.Not(x)

    def Implies(self, a: Any, b: Any) -> Any:
        return z3.Implies(a, b)

    def Ite(self, c: Any, a: Any, b: Any) -> Any:
        return z3.If(c, a, b)

    def _vars(self, sorts: Sequence[str]) -> list[Any]:
        return [z3.Const(f"{s.lower()}!{next(self._n)}", self.sort[s]) for s in sorts]

    def forall(self, sorts: Sequence[str], body: Callable[..., Any]) -> Any:
        xs = self._vars(sorts)
        return z3.ForAll(xs, body(*xs))

    def exists(self, sorts: Sequence[str], body: Callable[..., Any]) -> Any:
        xs = self._vars(sorts)
        return z3.Exists(xs, body(*xs))

    def const(self, name: str, kind: str) -> Any:
        if kind == INT:
            return z3.Int(name)
        if kind == BOOL:
            return z3.Bool(name)
        return z3.Const(name, self.sort[kind])

    def state(self, tag: str, static: St | None = None) -> St:
        """A state whose every field is an uninterpreted function (suffix `tag`)."""
        fns: dict[str, Callable[..., Any]] = {}
        for name, (args, kind) in SIG.items():
            rng = z3.IntSort() if kind == INT else z3.BoolSort()
            if not args:
                c = z3.Const(name + tag, rng)
                fns[name] = lambda c=c: c
            else:
                fns[name] = z3.Function(name + tag, *(self.sort[a] for a in args), rng)
        if static is None:
            for name, (args, rng_sort) in STATIC.items():
                fns[name] = z3.Function(name, *(self.sort[a] for a in args), self.sort[rng_sort])
        else:
            fns["wobj"], fns["wpart"] = static.wobj, static.wpart
        return St(fns)


class FiniteLogic:
    """The same formulas evaluated on a finite structure: elements are ints 0..n-1."""

    def __init__(self, sizes: dict[str, int]) -> None:
        self.sizes = sizes

    def And(self, *xs: Any) -> bool:
        return all(xs)

    def Or(self, *xs: Any) -> bool:
        return any(xs)

    def Not(self, x: Any) -> bool:
        return not x

    def Implies(self, a: Any, b: Any) -> bool:
        return (not a) or bool(b)

    def Ite(self, c: Any, a: Any, b: Any) -> Any:
        return a if c else b

    def forall(self, sorts: Sequence[str], body: Callable[..., Any]) -> bool:
        return all(body(*xs) for xs in itertools.product(*(range(self.sizes[s]) for s in sorts)))

    def exists(self, sorts: Sequence[str], body: Callable[..., Any]) -> bool:
        return any(body(*xs) for xs in itertools.product(*(range(self.sizes[s]) for s in sorts)))


Structure = dict[str, Any]  # name -> value (0-ary) or dict[args tuple -> value]


def finite_state(struct: Structure) -> St:
    fns: dict[str, Callable[..., Any]] = {}
    for name, val in struct.items():
        if isinstance(val, dict):
            fns[name] = lambda *a, d=val: d[a]
        else:
            fns[name] = lambda v=val: v
    return St(fns)


def materialize(s: St, sizes: dict[str, int], base: Structure | None = None) -> Structure:
    """Every mutable field of a (view) state, evaluated on a finite universe; with `base`
    (the structure the view was made from) only the fields the view overrides."""
    out: Structure = {k: v for k, v in base.items() if k in SIG} if base is not None else {}
    for name, (args, _) in SIG.items():
        if base is not None and name not in s.changed:
            continue
        f = getattr(s, name)
        if not args:
            out[name] = f()
        else:
            out[name] = {a: f(*a) for a in itertools.product(*(range(sizes[x]) for x in args))}
    return out
