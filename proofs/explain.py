"""Counterexamples to induction, readable: a pre/post state diff, the violated invariant's
failing part and the write, object or partition it is about."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from typing import Any

from epochgc.model.invariants import INVARIANTS, TRANSITION_INVARIANTS
from epochgc.model.system import Partition, System, Write
from epochgc.model.variants import Variant


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """`partitions[0].state.max_applied_epoch` -> value, for every leaf of a state."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(value):
            if f.compare:
                out.update(flatten(getattr(value, f.name), f"{prefix}.{f.name}" if prefix
                                   else f.name))
        return out
    if isinstance(value, tuple):
        out = {}
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def diff(pre: Any, post: Any) -> list[str]:
    a, b = flatten(pre), flatten(post)
    return [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(a.keys() | b.keys())
            if a.get(k) != b.get(k)]


def culprits(name: str, pre: System, post: System, v: Variant) -> list[str]:
    """Which write (or partition) the violated invariant is about: re-evaluate it on the
    post-state restricted to one write, or to one partition with no writes."""
    if name in TRANSITION_INVARIANTS:
        inv = TRANSITION_INVARIANTS[name]
        blank = Partition(replicas=())
        out = []
        for p in range(len(post.partitions)):
            def only(s: System, p: int = p) -> System:
                parts = tuple(q if i == p else blank for i, q in enumerate(s.partitions))
                return replace(s, partitions=parts, writes=())
            if inv(only(pre), only(post), v) is False:
                out.append(f"partition p{p}")
        return out
    inv1 = INVARIANTS[name]
    out = []
    for i, w in enumerate(post.writes):
        if inv1(replace(post, writes=(w,)), v) is False:
            out.append(_write(i, w))
    if out or inv1(replace(post, writes=()), v) is not False:
        return out
    for p in range(len(post.partitions)):
        parts = tuple(q if i == p else Partition(replicas=())
                      for i, q in enumerate(post.partitions))
        if inv1(replace(post, partitions=parts, writes=()), v) is False:
            out.append(f"partition p{p}")
    return out or ["the cluster fields (revision, epochs, snapshot, GC round)"]


def _write(i: int, w: Write) -> str:
    return f"write w{i} (object o{w.obj}, partition p{w.partition})"


def describe(name: str, trace: dict[str, Any], v: Variant) -> str:
    """The text printed under a failed induction row."""
    pre, post, params = trace["pre"], trace["post"], trace.get("params", {})
    inv = name.split(" preserved by ")[0].split("] ")[-1]
    about = ", ".join(culprits(inv, pre, post, v)) if inv in INVARIANTS or \
        inv in TRANSITION_INVARIANTS else "?"
    lines = [f"violated: {inv}, about {about}",
             f"params: {params}", "pre -> post:"]
    lines += ["  " + d for d in diff(pre, post)] or ["  (no field changed)"]
    lines.append(f"pre-state: {pre}")
    return "\n".join(lines)
