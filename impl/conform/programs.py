"""Programs generated from the model: each step is drawn knowing the model's state after
the steps before it (the window, the log end, whether the partition is deleted), so the
programs reach the interesting edges (the window's ends, LRLO at the window offset,
deleted partitions) rather than mostly bad input. A step is a dict (one JSON object) or a
str (a raw line, for input that is not a JSON object)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from hypothesis import strategies as st

from epochgc.impl.conform.steps import Step, line
from epochgc.model.keys import format_key
from epochgc.model.port import Session as _Session

Draw = Callable[[st.SearchStrategy[Any]], Any]

# Hostile names among the plain ones: a port keying a plain JavaScript object (or a dict
# with defaults) by name breaks on "__proto__" or "constructor"; non-ASCII must round-trip.
NODES = ("n0", "n1", "__proto__")
PARTITIONS = ("p0", "constructor", "t/é 1")
REPLICAS = ("r0", "r1")
MAX_EPOCH = 8
MAX_TERM = 3


# Strategies are built once per bounds: building one costs more than drawing from it.
_int = cache(st.integers)
_pick = cache(st.sampled_from)
_bool = st.booleans()


@cache
def _opt_int(lo: int, hi: int) -> st.SearchStrategy[int | None]:
    return st.none() | st.integers(lo, hi)


class Session(_Session):
    """The model's session plus what the generator remembers across steps."""

    def __init__(self) -> None:
        super().__init__()
        self.last_term: int | None = None


def _epoch(draw: Draw, s: Session) -> int:
    """Mostly one off an end of a window (applied or seen): that is where the decisions
    are; otherwise any small epoch."""
    r = s.replayer
    ends = {r.state.previous_applied_epoch, r.state.max_applied_epoch}
    for w in r.seen.values():
        if w is not None:
            ends |= {w.previous, w.max}
    anchors = tuple(sorted(e for e in ends if e is not None))
    if anchors and draw(_bool):
        return max(0, int(draw(_pick(anchors))) + int(draw(_int(-1, 1))))
    return int(draw(_int(0, MAX_EPOCH)))


def _floor(s: Session) -> int:
    r = s.replayer
    return max(r.last_offset, r.state.last_reconciled_log_offset)


def _fence(draw: Draw, s: Session) -> Step:
    # Mostly the latest term a node has seen (in-window decisions), sometimes one either
    # side of it (a new leader; a stale one).
    # (The generator's own memory: a delete drops the model's seen windows, not the term.)
    last = s.last_term
    how = int(draw(_int(0, 3)))  # 0 (the shrink target): the same term again
    if last is None or how == 3:
        term = int(draw(_int(0, MAX_TERM)))
    else:
        term = max(0, last + (0, 1, -1)[how])
    s.last_term = term
    step: dict[str, Any] = {"op": "fence", "term": term, "epoch": _epoch(draw, s)}
    node = draw(_pick((None, None, *NODES)))  # mostly the default node (n0)
    if node is not None:
        step["node"] = node
    return step


def _apply(op: str) -> Callable[[Draw, Session], Step]:
    def make(draw: Draw, s: Session) -> Step:
        return {"op": op, "epoch": _epoch(draw, s),
                "offset": _floor(s) + draw(_int(1, 3))}
    return make


def _reconciled(draw: Draw, s: Session) -> Step:
    # Anchored at the window offset (where the floor rises), the log end and LRLO itself.
    r = s.replayer
    anchors = tuple(sorted({o for o in (r.state.window_offset, r.last_offset,
                                        r.state.last_reconciled_log_offset) if o is not None}))
    if draw(_bool):
        lrlo = max(-1, int(draw(_pick(anchors))) + int(draw(_int(-1, 1))))
    else:
        lrlo = int(draw(_int(-1, r.last_offset + 2)))
    step: dict[str, Any] = {"op": "apply_reconciled", "lrlo": lrlo}
    if draw(_bool):
        step["lro"] = draw(_int(-1, 20))
    return step


def _restart(draw: Draw, s: Session) -> Step:
    node = draw(_pick((None, *NODES)))
    return {"op": "restart"} if node is None else {"op": "restart", "node": node}


def _lifecycle(draw: Draw, s: Session) -> Step:
    return {"op": "create_partition" if s.replayer.deleted else "delete_partition"}


def _report(draw: Draw) -> dict[str, Any]:
    return {"partition": draw(_pick((*PARTITIONS, "gone"))),
            "replica": draw(_pick(REPLICAS)),
            "inactive_epoch": draw(_opt_int(-1, MAX_EPOCH))}


def _gc_epoch(draw: Draw, s: Session) -> Step:
    reports = draw(_int(0, 5))
    seen: set[tuple[str, str]] = set()
    out = []
    for _ in range(reports):
        r = _report(draw)
        if (r["partition"], r["replica"]) not in seen:  # a duplicate is bad input
            seen.add((r["partition"], r["replica"]))
            out.append(r)
    return {"op": "gc_epoch", "snapshot_revision": draw(_int(0, MAX_EPOCH)),
            "partitions": draw(_SNAPSHOTS),
            "reports": out}


_SNAPSHOTS = st.lists(st.sampled_from(PARTITIONS), unique=True, max_size=3)
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
    if draw(_bool):
        key = format_key(draw(_int(0, 999)), draw(_int(0, MAX_EPOCH)), _NAME)
    else:
        key = draw(_pick(_MALFORMED))
    grace = draw(_pick((0, 10, 10.5)))
    return {"op": "gc_eligible", "key": key,
            "age_s": draw(_pick((0, 10, 10.5, 11))),
            "M": draw(_opt_int(-1, MAX_EPOCH)), "grace_s": grace}


# Lines that are not one strict JSON object.
_NOT_OBJECTS = (
    '["op","state"]',
    '{"op":"state"',
    '{"op":"state","op":"state"}',
    '{"op":"gc_eligible","key":"k","age_s":NaN,"M":1,"grace_s":0}',
)


def _bad(draw: Draw, s: Session) -> Step:
    """Input the model refuses: every port must refuse it too (and change nothing)."""
    kind = draw(_int(0, 11))
    if kind == 0:
        return {"op": "fence", "term": 1, "epoch": -1}
    if kind == 1:
        return {"op": "fence", "term": True, "epoch": 1}
    if kind == 2:
        return {"op": "apply_placeholder", "epoch": 1.0, "offset": _floor(s) + 1}
    if kind == 3:  # log offsets must grow
        return {"op": "apply_placeholder", "epoch": _epoch(draw, s),
                "offset": draw(_int(0, max(0, _floor(s))))}
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
        return str(draw(_pick(_NOT_OBJECTS)))
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
_WEIGHTS = (2, 5, 5, 2, 3, 2, 2, 2, 2, 1)
_CHOICES = tuple(i for i, w in enumerate(_WEIGHTS) for _ in range(w))


@st.composite
def programs(draw: Draw, variant: str, max_steps: int) -> list[Step]:
    """One program: up to `max_steps` steps, each drawn against the model's current state."""
    s = Session()
    s.handle(line({"op": "reset", "variant": variant}))
    # Swarm testing: each program uses a random subset of the step kinds, so some programs
    # are long runs of a few kinds (reconciles and applies only, fences and deletes only)
    # that an even mix of every kind rarely produces.
    enabled = [i for i, w in enumerate(_WEIGHTS) if draw(_bool) for _ in range(w)]
    choices = tuple(enabled) or _CHOICES
    out: list[Step] = []
    while len(out) < max_steps - 1 and draw(_int(0, 31)) != 0:  # 0 (the shrink target) ends it
        make: Callable[[Draw, Session], Step]
        if s.replayer.deleted and draw(_bool):
            make = _lifecycle  # re-create soon: a deleted partition mostly refuses things
        elif out and out[-1] == {"op": "create_partition"} and draw(_bool):
            make = _fence  # a re-created partition's first leader fences at once
        else:
            _, make = _KINDS[choices[draw(_int(0, len(choices) - 1))]]
        step = make(draw, s)
        s.handle(line(step))
        out.append(step)
    # A final read of the state: what the steps left behind (LRLO, the floor) is compared
    # even when no step's own answer shows it.
    out.append({"op": "state"})
    return out
