"""Is a counterexample to induction reachable? A bounded search for a trace from the initial
state to a state that breaks the same invariant, written as a conformance vector when found.

A counterexample to induction is a pre-state the invariants admit and one step that breaks
one of them; it says the invariant is not inductive, not that the system reaches the bad
state. This search answers the second question for the common case: seeded random walks of
the concrete model (the model's own `step`), every state checked. It is a bounded search
(`walks` walks of at most `depth` steps, numbers from a small domain): finding nothing
proves nothing, and the runner says so.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from epochgc.model.actions import ACTIONS, step
from epochgc.model.errors import ModelError
from epochgc.model.invariants import INVARIANTS, TRANSITION_INVARIANTS
from epochgc.model.system import System
from epochgc.model.variants import Variant
from epochgc.proofs import vectors
from epochgc.proofs.bmc import Trace, TraceStep

WALKS = 600  # 300 until issue 28 added tick, expire_report and any-epoch late landings
DEPTH = 14
_SIZES = {"partition": "P", "replica": "R", "object": "O", "write": "W"}


def _broken(name: str, v: Variant) -> Callable[[System, System], bool]:
    if name in INVARIANTS:
        return lambda _pre, post: INVARIANTS[name](post, v) is False
    return lambda pre, post: TRANSITION_INVARIANTS[name](pre, post, v) is False


def _params(s: System, action: str, rng: random.Random) -> dict[str, Any]:
    sizes = {"P": len(s.partitions), "R": len(s.partitions[0].replicas), "O": len(s.objects),
             "W": len(s.writes)}
    hi = max(3, s.cluster_epoch + 2, max((p.log_end for p in s.partitions), default=0) + 2)
    out: dict[str, Any] = {}
    for n, kind in ACTIONS[action][1]:
        if kind in ("epoch", "offset"):
            out[n] = rng.randrange(-1, hi + 1)
        elif kind == "foreign":
            out[n] = rng.choice([(), (None,), (rng.randrange(0, hi + 1),)])
        else:
            out[n] = rng.randrange(max(1, sizes[_SIZES[kind]]))
    return out


def search(template: System, v: Variant, name: str, walks: int = WALKS, depth: int = DEPTH,
           seed: int = 0) -> Trace | None:
    """The shortest-found trace from `template` whose last step breaks invariant `name`
    (a state invariant or a transition invariant), or None when no walk reached one."""
    broken = _broken(name, v)
    rng = random.Random(seed)
    # With no grace period the clock decides nothing: a tick would only dilute the walks.
    names = [a for a in ACTIONS if a != "tick" or template.grace != 0]
    best: Trace | None = None
    for _ in range(walks):
        s, steps = template, []
        for _ in range(depth if best is None else len(best.steps) - 1):
            for _try in range(50):
                action = rng.choice(names)
                params = _params(s, action, rng)
                try:
                    t = step(s, v, action, **params)
                except ModelError:
                    continue
                if t != s:
                    break
            else:
                break
            steps.append(TraceStep(action, params, t))
            if broken(s, t):
                best = shrink(template, v, name, Trace(template, tuple(steps)))
                break
            s = t
    return best


def _replay(template: System, v: Variant, steps: list[tuple[str, dict[str, Any]]],
            broken: Callable[[System, System], bool]) -> Trace | None:
    """`steps` re-run from `template`; a Trace if every step applies and the last breaks."""
    s, out = template, []
    for action, params in steps:
        try:
            t = step(s, v, action, **params)
        except ModelError:
            return None
        out.append(TraceStep(action, params, t))
        pre, s = s, t
    return Trace(template, tuple(out)) if out and broken(pre, s) else None


def shrink(template: System, v: Variant, name: str, trace: Trace) -> Trace:
    """Drop steps one at a time while the trace still breaks `name` (steps the walk took
    that the violation does not need)."""
    broken = _broken(name, v)
    steps = [(st.action, st.params) for st in trace.steps]
    i = 0
    while i < len(steps) - 1:
        shorter = _replay(template, v, steps[:i] + steps[i + 1:], broken)
        if shorter is not None:
            steps, trace = steps[:i] + steps[i + 1:], shorter
        else:
            i += 1
    return trace


def vector_text(trace: Trace, v: Variant, title: str) -> str:
    return vectors.dump(vectors.trace_to_vector(trace, v, title), v.name, title)
