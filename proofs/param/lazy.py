"""Symbolic Python states whose optional fields fork only when the model reads them.

`proofs.symstate` decides every optional field of a state up front (is the window set,
has each replica a view of M(p), a report, a seen window), so a state of 3 partitions and
2 replicas is a thousand paths before an action has run. Here each group of optional
fields that are present together (a partition's four window fields; a replica's seen
window, its M(p) view, its report; the GC round's M) is a `Group`: a Z3 boolean decided by
the explorer the first time the model reads one of its fields. A field the action never
reads stays a pair (presence formula, value) that the abstraction (`proofs.param.symcorr`)
turns into terms without forking.

The lazy objects are instances of a subclass of the model's frozen dataclass that reports
the model's class as its `__class__`, so `dataclasses.replace` builds a plain model object
(reading, and so deciding, every field) and dataclass equality compares them as usual.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import fields
from typing import Any

import z3

from epochgc.model.fence import SeenWindow
from epochgc.model.partition import PartitionState
from epochgc.model.system import Obj, Partition, Replica, System, Write
from epochgc.proofs.sym import Explorer
from epochgc.proofs.symmerge import caches_decisions
from epochgc.proofs.symterms import const_bool as _const_bool
from epochgc.proofs.symvalues import SymBool, SymInt

WINDOW = ("max_applied_epoch", "previous_applied_epoch", "min_epoch_lower_bound",
          "window_offset")


class Group:
    """Optional fields present together: `cond` says whether they are; decided (one
    explorer fork) on the first read."""

    __slots__ = ("cond", "decided")

    def __init__(self, cond: z3.BoolRef) -> None:
        self.cond = cond
        self.decided: bool | None = None
        if _MADE:
            _MADE[-1].append(self)

    def present(self) -> bool:
        if self.decided is None:
            d = bool(SymBool(self.cond))
            if not caches_decisions():  # a merged call's run: its other runs differ
                return d
            self.decided = d
        return self.decided

    def term(self) -> Any:
        """Whether present, without deciding: the decision if made, else the formula."""
        return self.cond if self.decided is None else self.decided


_CLASSES: dict[type, type] = {}
LAZY_TYPES: set[type] = set()  # the lazy subclasses made so far (`type(x) in LAZY_TYPES`)
# `dataclasses.replace(obj, **changes)` reads every field it does not change and calls
# `obj.__class__(**fields)`. On a lazy object, reading an undecided group's field there
# would fork the path only to copy the field: inside replace (the calling frame runs its
# code) the field comes back as a `_Pending` and `__class__` as a constructor that puts
# the pending fields back as groups, so the copy stays lazy, sharing the groups (a
# decision made on either is the decision for both: they are the same fields).
# (Python 3.13 moved the body into `dataclasses._replace`: whichever reads the fields.)
_REPLACE_CODE = getattr(dataclasses, "_replace", dataclasses.replace).__code__


class _Pending:
    """An undecided group field carried through `dataclasses.replace`."""

    __slots__ = ("group", "value")

    def __init__(self, group: Group, value: Any) -> None:
        self.group, self.value = group, value


def _rebuilder(base: type) -> Any:
    def build(**kw: Any) -> Any:
        groups = {k: (v.group, v.value) for k, v in kw.items() if type(v) is _Pending}
        if not groups:
            return base(**kw)
        return lazy(base, groups, **{k: v for k, v in kw.items() if k not in groups})
    return build


def _lazy_class(base: type) -> type:
    cls = _CLASSES.get(base)
    if cls is not None:
        return cls
    rebuild = _rebuilder(base)

    def __getattribute__(self: Any, name: str) -> Any:
        if name == "__class__":
            return rebuild if sys._getframe(1).f_code is _REPLACE_CODE else base
        groups = object.__getattribute__(self, "__dict__").get("_groups")
        if groups is not None and name in groups:
            g, v = groups[name]
            if g.decided is None and sys._getframe(1).f_code is _REPLACE_CODE:
                return _Pending(g, v)
            return v if g.present() else None
        return object.__getattribute__(self, name)

    cls = type(f"Lazy{base.__name__}", (base,), {"__getattribute__": __getattribute__})
    _CLASSES[base] = cls
    LAZY_TYPES.add(cls)
    return cls


def lazy(base: type, groups: dict[str, tuple[Group, Any]], **plain: Any) -> Any:
    """An instance of dataclass `base` with `plain` fields and the optional fields of
    `groups` (field -> (group, value when present)) decided on first read."""
    obj = _lazy_class(base)(**plain, **{f: None for f in groups})
    object.__setattr__(obj, "_groups", groups)
    return obj


def optional(obj: Any, name: str) -> tuple[Any, Any]:
    """(present, value) of an optional field without deciding anything: `present` is a
    bool or a Z3 formula; `value` is the value it has when present (None when absent)."""
    groups = obj.__dict__.get("_groups") if type(obj) in _CLASSES.values() else None
    if groups is not None and name in groups:
        g, v = groups[name]
        return g.term(), v
    v = getattr(obj, name)
    return v is not None, v


def with_plain(obj: Any, **plain: Any) -> Any:
    """A copy of a lazy object with some fields set outright (the rest still lazy)."""
    groups = {k: v for k, v in obj.__dict__["_groups"].items() if k not in plain}
    base = type(obj).__mro__[1]
    keep = {f.name: obj.__dict__[f.name] for f in fields(base)
            if f.init and f.name not in groups and f.name not in plain}
    return lazy(base, groups, **keep, **plain)


def _int(ex: Explorer, name: str) -> SymInt:
    return ex.fresh_int(name)


def lazy_system(ex: Explorer, template: System, seen: bool = True, tag: str = "") -> System:
    """`_lazy_system`, built once per explorer: every path of an exploration builds the
    same state from the same names, so a later path gets the first one's objects with
    every group undecided again (and the fresh-name counter where building left it). The
    state is never changed in place (lazy objects are frozen; a step copies)."""
    cache = ex.__dict__.setdefault("_lazy_states", {})
    key = (id(template), seen, tag, ex._n)
    hit = cache.get(key)
    if hit is not None:
        state, groups, n_after, _ = hit
        for g in groups:
            g.decided = None
        ex._n = n_after
        return state  # type: ignore[no-any-return]
    made: list[Group] = []
    _MADE.append(made)
    try:
        state = _lazy_system(ex, template, seen, tag)
    finally:
        _MADE.pop()
    cache[key] = (state, made, ex._n, template)  # the template kept: its id stays its own
    return state


_MADE: list[list[Group]] = []  # the groups the state being built makes


def _lazy_system(ex: Explorer, template: System, seen: bool, tag: str) -> System:
    """Every state of the template's shape: every number a fresh unbounded integer, every
    flag a fresh boolean, every optional group a lazy fork. The leader is replica 0
    (replicas are interchangeable: a state with another leader is a renaming of one of
    these). `seen=False` leaves the seen windows out (None): for predicates, where a seen
    window only adds its own `previous <= max`, which is assumed (`extras`). `tag`
    prefixes the groups' names (a second state of a pair)."""

    def const_bool(name: str) -> z3.BoolRef:
        return _const_bool(tag + name)

    parts = []
    for p, tp in enumerate(template.partitions):
        g = Group(const_bool(f"p{p}.set"))
        win = {f: (g, _int(ex, f"p{p}.{f}")) for f in WINDOW}
        state = lazy(PartitionState, win,
                     last_reconciled_offset=_int(ex, f"p{p}.lro"),
                     last_reconciled_log_offset=_int(ex, f"p{p}.lrlo"),
                     start_offset=_int(ex, f"p{p}.start"),
                     barrier_epoch=_int(ex, f"p{p}.bepoch"),
                     barrier_offset=_int(ex, f"p{p}.boff"),
                     gc_safe_epoch=_int(ex, f"p{p}.gsafe"))
        reps = []
        for r in range(len(tp.replicas)):
            n = f"p{p}.r{r}"
            grp: dict[str, tuple[Group, Any]] = {
                "inactive": (Group(const_bool(f"{n}.inactive?")), _int(ex, f"{n}.inactive")),
                "reported": (Group(const_bool(f"{n}.reported?")), _int(ex, f"{n}.reported")),
            }
            null = ex.fresh_bool(f"{n}.reported_null")
            if seen:
                grp["seen"] = (Group(const_bool(f"{n}.seen?")), SeenWindow(
                    _int(ex, f"{n}.seen.term"), _int(ex, f"{n}.seen.prev"),
                    _int(ex, f"{n}.seen.max")))
                reps.append(lazy(Replica, grp, reported_null=null))
            else:
                reps.append(lazy(Replica, grp, seen=None, reported_null=null))
        parts.append(Partition(
            created=ex.fresh_bool(f"p{p}.created"),  # type: ignore[arg-type]
            creation_revision=_int(ex, f"p{p}.crev"), state=state,
            log_end=_int(ex, f"p{p}.log_end"), term=_int(ex, f"p{p}.term"), leader=0,
            in_snapshot=ex.fresh_bool(f"p{p}.in_snapshot"),  # type: ignore[arg-type]
            replicas=tuple(reps)))
    objs = tuple(Obj(_int(ex, f"o{o}.status"), _int(ex, f"o{o}.epoch"),
                     _int(ex, f"o{o}.written_at"))
                 for o in range(len(template.objects)))
    writes = tuple(Write(w.obj, w.partition, _int(ex, f"w{i}.status"),
                         _int(ex, f"w{i}.offset"),
                         ex.fresh_bool(f"w{i}.durable"),  # type: ignore[arg-type]
                         ex.fresh_bool(f"w{i}.replicated"))  # type: ignore[arg-type]
                   for i, w in enumerate(template.writes))
    gc = Group(const_bool("gc_m?"))
    plain = {f.name: getattr(template, f.name) for f in fields(System) if f.init}
    plain.update(revision=_int(ex, "revision"), cluster_epoch=_int(ex, "cluster_epoch"),
                 snapshot_revision=_int(ex, "snapshot_revision"), partitions=tuple(parts),
                 clock=_int(ex, "clock"), grace=_int(ex, "grace"),
                 cache_floor=_int(ex, "cache_floor"),
                 objects=objs, writes=writes)
    del plain["gc_m"]
    return lazy(System, {"gc_m": (gc, _int(ex, "gc_m"))}, **plain)  # type: ignore[no-any-return]
