"""Programs generated from the model: each step is drawn knowing the model's state after
the steps before it (the window, the log end, whether the partition is deleted), so the
programs reach the interesting edges (the window's ends, LRLO at the window offset,
deleted partitions) rather than mostly bad input. A step is a dict (one JSON object) or a
str (a raw line, for input that is not a JSON object)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from model.keys import format_key
from model.port import Session

Step = dict[str, Any] | str
Draw = Callable[[st.SearchStrategy[Any]], Any]

NODES = ("n0", "n1")
PARTITIONS = ("p0", "p1", "p2")
REPLICAS = ("r0", "r1")
MAX_EPOCH = 8
MAX_TERM = 3


def line(step: Step) -> str:
    return step if isinstance(step, str) else json.dumps(step, separators=(",", ":"))


def _epoch(draw: Draw, s: Session) -> int:
    # Near the applied window most of the time: that is where the decisions are.
    hi = s.replayer.state.max_applied_epoch
    if hi is not None and draw(st.booleans()):
        return max(0, hi + int(draw(st.integers(-3, 2))))
    return int(draw(st.integers(0, MAX_EPOCH)))


def _floor(s: Session) -> int:
    r = s.replayer
    return max(r.last_offset, r.state.last_reconciled_log_offset)


def _fence(draw: Draw, s: Session) -> Step:
    step: dict[str, Any] = {"op": "fence", "term": draw(st.integers(0, MAX_TERM)),
                            "epoch": _epoch(draw, s)}
    node = draw(st.sampled_from((None, *NODES)))
    if node is not None:
        step["node"] = node
    return step


def _apply(op: str) -> Callable[[Draw, Session], Step]:
    def make(draw: Draw, s: Session) -> Step:
        return {"op": op, "epoch": _epoch(draw, s),
                "offset": _floor(s) + draw(st.integers(1, 3))}
    return make


def _reconciled(draw: Draw, s: Session) -> Step:
    # Up to the log end (A4), and sometimes backwards: LRLO must not move back.
    step: dict[str, Any] = {"op": "apply_reconciled",
                            "lrlo": draw(st.integers(-1, max(-1, s.replayer.last_offset)))}
    if draw(st.booleans()):
        step["lro"] = draw(st.integers(-1, 20))
    return step


def _restart(draw: Draw, s: Session) -> Step:
    node = draw(st.sampled_from((None, *NODES)))
    return {"op": "restart"} if node is None else {"op": "restart", "node": node}


def _lifecycle(draw: Draw, s: Session) -> Step:
    return {"op": "create_partition" if s.replayer.deleted else "delete_partition"}


def _report(draw: Draw) -> dict[str, Any]:
    return {"partition": draw(st.sampled_from((*PARTITIONS, "gone"))),
            "replica": draw(st.sampled_from(REPLICAS)),
            "inactive_epoch": draw(st.none() | st.integers(-1, MAX_EPOCH))}


def _gc_epoch(draw: Draw, s: Session) -> Step:
    reports = draw(st.integers(0, 5))
    seen: set[tuple[str, str]] = set()
    out = []
    for _ in range(reports):
        r = _report(draw)
        if (r["partition"], r["replica"]) not in seen:  # a duplicate is bad input
            seen.add((r["partition"], r["replica"]))
            out.append(r)
    return {"op": "gc_epoch", "snapshot_revision": draw(st.integers(0, MAX_EPOCH)),
            "partitions": draw(st.lists(st.sampled_from(PARTITIONS), unique=True, max_size=3)),
            "reports": out}


_NAME = "obj-1"
# Keys the parser must refuse (each one edit away from a good key) and keys outside the
# data prefix: a port that accepts any of them would let GC delete what it cannot date.
_MALFORMED = (
    "level_zero/data/42/000000000000000003/x",
    "level_zero/data/0042/000000000000000003/x",
    "level_zero/data/042/3/x",
    "level_zero/data/042/0000000000000000003/x",
    "level_zero/data/042/000000000000000003/",
    "level_zero/data/042/000000000000000003/x/y",
    "level_zero/data/042/000000000000000003/.x",
    "level_zero/data/042/00000000000000000٣/x",
    "level_zero/data/04a/000000000000000003/x",
    "level_zero/meta/042/000000000000000003/x",
    "level_zero/data/042/000000000000000003/x ",
    "",
)


def _gc_eligible(draw: Draw, s: Session) -> Step:
    if draw(st.booleans()):
        key = format_key(draw(st.integers(0, 999)), draw(st.integers(0, MAX_EPOCH)), _NAME)
    else:
        key = draw(st.sampled_from(_MALFORMED))
    grace = draw(st.sampled_from((0, 10, 10.5)))
    return {"op": "gc_eligible", "key": key,
            "age_s": draw(st.sampled_from((0, 10, 10.5, 11))),
            "M": draw(st.none() | st.integers(-1, MAX_EPOCH)), "grace_s": grace}


# Lines that are not one strict JSON object.
_NOT_OBJECTS = (
    '["op","state"]',
    '{"op":"state"',
    '{"op":"state","op":"state"}',
    '{"op":"gc_eligible","key":"k","age_s":NaN,"M":1,"grace_s":0}',
)


def _bad(draw: Draw, s: Session) -> Step:
    """Input the model refuses: every port must refuse it too (and change nothing)."""
    kind = draw(st.integers(0, 11))
    if kind == 0:
        return {"op": "fence", "term": 1, "epoch": -1}
    if kind == 1:
        return {"op": "fence", "term": True, "epoch": 1}
    if kind == 2:
        return {"op": "apply_placeholder", "epoch": 1.0, "offset": _floor(s) + 1}
    if kind == 3:  # log offsets must grow
        return {"op": "apply_placeholder", "epoch": _epoch(draw, s),
                "offset": draw(st.integers(0, max(0, _floor(s))))}
    if kind == 4:
        return {"op": "apply_advance_epoch", "epoch": 1}
    if kind == 5:
        return {"op": "fence", "term": 1, "epoch": 1, "nodee": "n0"}
    if kind == 6:
        return {"op": "compact"}
    if kind == 7:  # the lifecycle op that does not apply now
        return {"op": "delete_partition" if s.replayer.deleted else "create_partition"}
    if kind == 8:
        return {"op": "gc_epoch", "snapshot_revision": 1, "partitions": ["p0", "p0"],
                "reports": []}
    if kind == 9:
        return {"op": "apply_reconciled", "lrlo": -2}
    if kind == 10:
        return str(draw(st.sampled_from(_NOT_OBJECTS)))
    return {"op": "restart", "node": ""}


# Cheap, common steps first: Hypothesis shrinks a choice toward the first entry.
_KINDS: tuple[tuple[str, Callable[[Draw, Session], Step]], ...] = (
    ("state", lambda draw, s: {"op": "state"}),
    ("fence", _fence),
    ("apply_placeholder", _apply("apply_placeholder")),
    ("apply_advance_epoch", _apply("apply_advance_epoch")),
    ("apply_reconciled", _reconciled),
    ("restart", _restart),
    ("lifecycle", _lifecycle),
    ("gc_epoch", _gc_epoch),
    ("gc_eligible", _gc_eligible),
    ("bad", _bad),
)
_WEIGHTS = (1, 5, 5, 2, 3, 2, 1, 2, 2, 1)
_CHOICES = tuple(i for i, w in enumerate(_WEIGHTS) for _ in range(w))


@st.composite
def programs(draw: Draw, variant: str, max_steps: int) -> list[Step]:
    """One program: up to `max_steps` steps, each drawn against the model's current state."""
    s = Session()
    s.handle(line({"op": "reset", "variant": variant}))
    out: list[Step] = []
    while len(out) < max_steps and draw(st.integers(0, 9)) != 0:  # 0 (the shrink target) ends it
        _, make = _KINDS[_CHOICES[draw(st.integers(0, len(_CHOICES) - 1))]]
        step = make(draw, s)
        s.handle(line(step))
        out.append(step)
    return out
