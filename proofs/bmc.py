"""Bounded model checking along a schedule: the action names are fixed, the solver picks
every number (epochs, caches, offsets, report values) so that the goal holds at the end.

Used for reachability witnesses (each action can fire and change the state, so no
invariant is vacuous), for the counterexamples of the known-bad variants (F1-F5), and for
the liveness witnesses (a rejection `strict` makes that `reference` does not).
Every trace the solver finds is re-run through the concrete model and its goal
re-checked before it is reported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import z3

from epochgc.model.actions import step
from epochgc.model.errors import ModelError
from epochgc.model.fence import SeenWindow
from epochgc.model.logic import Cond
from epochgc.model.system import OBJECT_STATUS, WRITE_STATUS, System
from epochgc.model.variants import Variant
from epochgc.proofs.sym import Explorer
from epochgc.proofs.symsolver import METER, RLIMIT
from epochgc.proofs.symstate import symbolic_params
from epochgc.proofs.symvalues import SymBool, concretize

Schedule = Sequence[tuple[str, dict[str, Any]]]
Goal = Callable[[Sequence[System]], Cond]
# A goal over two runs of the same schedule with the same numbers: (variant, pair).
PairGoal = Callable[[Sequence[System], Sequence[System]], Cond]

# The bound of one search: paths of the schedule explored (each is one run of the model
# under the explorer, its branch sides settled by the solver under symsolver.RLIMIT), not
# seconds, so a search ends the same way on a quiet or a loaded machine. Calibration
# (every `bmc.search` of `python -m epochgc.proofs`, PYTHONHASHSEED=0): the most paths one
# search explored was 750; the bound is 20 times that. The run prints the largest it saw
# (symsolver.METER), to show the margin left.
LARGEST_PATHS = 750
MAX_PATHS = 20 * LARGEST_PATHS


class SearchBudgetExhausted(Exception):
    """A search explored `max_paths` paths without an answer: a failure (an `unknown`
    row), never an absence."""


@dataclass(frozen=True)
class TraceStep:
    action: str
    params: dict[str, Any]
    state: System  # after the step


@dataclass(frozen=True)
class Trace:
    initial: System
    steps: tuple[TraceStep, ...]


def search(
    template: System,
    v: Variant,
    schedule: Schedule,
    goal: Goal,
    max_paths: int = MAX_PATHS,
    rlimit: int = RLIMIT,
    pair: Variant | None = None,
    pair_goal: PairGoal | None = None,
) -> Trace | None:
    """A concrete trace following `schedule` from `template` that reaches `goal`, or None
    when no choice of numbers does (all paths explored). Raises SearchBudgetExhausted
    when `max_paths` paths were explored without an answer: a failure, never an absence.

    With `pair`, the same schedule and numbers also run under that variant and
    `pair_goal(states, pair_states)` must hold too (how a liveness witness shows that one
    variant rejects what another admits)."""
    ex = Explorer(rlimit=rlimit)
    explored = 0

    def run(ex: Explorer) -> Any:
        s = t = template
        states, others = [s], [t]
        params_all = []
        for i, (action, fixed) in enumerate(schedule):
            params = symbolic_params(ex, s, action, fixed, tag=f"s{i}.")
            s = step(s, v, action, **params)
            states.append(s)
            if pair is not None:
                t = step(t, pair, action, **params)
                others.append(t)
            params_all.append(params)
        g = goal(states)
        if pair_goal is not None:
            g = g & pair_goal(states, others)
        return states, params_all, g

    for path in ex.paths(run, errors=(ModelError,)):
        explored += 1
        METER.search_paths = max(METER.search_paths, explored)
        if explored > max_paths:
            raise SearchBudgetExhausted(f"no answer within {max_paths} paths")
        if path.kind != "ok":
            continue
        _, params_all, g = path.value
        expr = g.expr if isinstance(g, SymBool) else z3.BoolVal(bool(g))
        model = ex.model_for((), expr)
        if model is None:
            continue
        return replay(template, v, schedule, concretize(params_all, model), goal)
    return None


def replay(
    template: System, v: Variant, schedule: Schedule, params: Sequence[dict[str, Any]],
    goal: Goal,
) -> Trace:
    """Re-run a solver-found trace on the concrete model and re-check its goal."""
    s = template
    states = [s]
    steps = []
    for (action, _), p in zip(schedule, params, strict=True):
        s = step(s, v, action, **p)
        states.append(s)
        steps.append(TraceStep(action, dict(p), s))
    if goal(states) is not True:
        raise AssertionError("engine bug: the solver's trace does not reach the goal")
    return Trace(template, tuple(steps))


# -- presentation -------------------------------------------------------------------------


def _win(a: int | None, b: int | None) -> str:
    return "-" if a is None or b is None else f"[{a},{b}]"


def _seen(sw: SeenWindow | None) -> str:
    return "-" if sw is None else f"t{sw.term}[{sw.previous},{sw.max}]"


def table(trace: Trace) -> str:
    """A readable step table: what each step did to the partition, objects and writes."""
    head = ("#", "action", "params", "epoch", "applied", "floor", "woff", "lrlo", "end",
            "term", "seen(leader)", "objects", "writes", "M")
    rows = [head]
    for i, st in enumerate(trace.steps, 1):
        s = st.state
        p = s.partitions[0]
        ps = p.state
        params = ",".join(f"{k}={val}" for k, val in st.params.items())
        objs = " ".join(f"o{j}:{OBJECT_STATUS[o.status]}@{o.epoch}"
                        for j, o in enumerate(s.objects))
        writes = " ".join(f"w{j}:{WRITE_STATUS[w.status]}"
                          + (f"@{w.offset}" if w.offset >= 0 else "")
                          for j, w in enumerate(s.writes))
        m = "" if st.action != "gc_compute" or s.last_gc is None else (
            f"M={s.last_gc.M}" if s.last_gc.blocked is None else "blocked")
        rows.append((
            str(i), st.action, params, str(s.cluster_epoch),
            _win(ps.previous_applied_epoch, ps.max_applied_epoch),
            "-" if ps.min_epoch_lower_bound is None else str(ps.min_epoch_lower_bound),
            "-" if ps.window_offset is None else str(ps.window_offset),
            str(ps.last_reconciled_log_offset), str(p.log_end), str(p.term),
            _seen(p.replicas[p.leader].seen), objs, writes, m,
        ))
    widths = [max(len(r[c]) for r in rows) for c in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)
