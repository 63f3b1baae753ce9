"""Production's fence rules as variants (issue 30; spec section 6, "Production's rules"):
their verdicts on production's own safety property, "the apply-time window check never
fires", in `model.ordered` (one partition's fence layer with Raft's order), and on ours,
"never deletes in-use data", in the quantified proof with a fence that may admit anything.

Production's property is decided by breadth-first search over `model.ordered`: every
action, every epoch, level by level, so the first violation found is a shortest one (in
actions). The rules only compare epochs, so a trace with k fences (phantoms included) is
order-isomorphic to one with epochs in 1..k; and a trace of n actions that ends with the
check firing has at least two lands (one set the window the other lands below), so at most
n - 2 fences: searching with epochs 1..depth-2 loses no trace of that length. States are
merged when they agree on everything the future reads (the windows, the queue, which terms
are current), so the search is exhaustive up to its depth. Each verdict is compared with
the recorded one (`EXPECTED`): a different answer fails the row (how `proofs.mutants` sees
a seeded bug).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from epochgc.model.errors import ModelError
from epochgc.model.fence import SeenWindow, fence
from epochgc.model.ordered import OState, out_of_window, quiet, step
from epochgc.model.partition import window
from epochgc.model.variants import PROD_VARIANTS, Variant, variant
from epochgc.proofs.obligations import Outcome
from epochgc.proofs.symsolver import RLIMIT, check

# The variants searched: production's, with and without release at enqueue, assert-at-apply,
# and our own fence rule beside them (it never claimed production's property).
SEARCHED: tuple[str, ...] = (*PROD_VARIANTS, "reference", "reference-enqueue")
MAX_DEPTH = 6  # a search that finds nothing this deep says "none within 6", never "proved"
N_REPLICAS = 2

# The recorded verdicts: the shortest counterexample's length in actions (None: none
# within MAX_DEPTH, recorded as a bounded result, `checked`, never `found`). Whatever the
# search says is the result; a change here is a finding. January and February share their
# shortest trace (phantom 1; fence 2; fence 1; both land); July rejects its fence 1 (no
# applied evidence) and has none within 6 (none within 7 either: `--depth 7 prod-july`,
# 33,509 states, 2 s);
# July with release at enqueue falls in 6 through a newer term's bump at an older term's
# stale max, which `advance_max_seen_epoch` leaves in place (the case #31168 described).
EXPECTED: dict[str, int | None] = {
    "prod-january": 5, "prod-january-enqueue": 5,
    "prod-february": 5, "prod-february-enqueue": 5,
    "prod-july": None, "prod-july-enqueue": 6,
    "proposal-august": 5, "proposal-august-enqueue": 5,
    "assert-at-apply": 6,
    "reference": 5, "reference-enqueue": 5,
}

Step = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class OTrace:
    steps: tuple[Step, ...]
    states: tuple[OState, ...]  # states[0] is the initial state; states[i] after step i


def _key(s: OState) -> tuple[Any, ...]:
    """What the future reads: windows, queue, leader, which terms are the current one."""
    t = s.term
    seen = tuple(None if w is None else (w.previous, w.max, w.term == t) for w in s.seen)
    a = s.applied
    return (a.previous_applied_epoch, a.max_applied_epoch, s.leader, seen,
            tuple((e.epoch, e.term == t) for e in s.queue), s.fired > 0, s.crashed)


def _moves(epochs: int) -> list[Step]:
    out: list[Step] = []
    for e in range(1, epochs + 1):
        out += [("fence", {"epoch": e}), ("phantom", {"epoch": e})]
    out += [("land", {}), ("drop", {}), ("replay_crash", {})]
    for r in range(N_REPLICAS):
        out += [("change_leader", {"r": r}), ("restart", {"r": r})]
    return out


def shortest(v: Variant, max_depth: int = MAX_DEPTH, s0: OState | None = None,
             epochs: int | None = None) -> tuple[OTrace | None, int]:
    """A shortest trace of `model.ordered` from `s0` (default: the initial state) after
    which the apply check has fired, or None when none has at most `max_depth` actions;
    and the number of distinct states explored. Fences use epochs 1..`epochs` (default
    `max_depth - 2`: exact for traces from the initial state, see the module docstring)."""
    s0 = OState(seen=(None,) * N_REPLICAS) if s0 is None else s0
    seen = {_key(s0)}
    parent: dict[tuple[Any, ...], tuple[tuple[Any, ...], Step, OState]] = {}
    frontier = [s0]
    moves = _moves(max(1, max_depth - 2) if epochs is None else epochs)
    for _ in range(max_depth):
        nxt = []
        for s in frontier:
            ks = _key(s)
            for action, params in moves:
                try:
                    s2 = step(s, v, action, **params)
                except ModelError:
                    continue
                k = _key(s2)
                if k in seen:
                    continue
                seen.add(k)
                parent[k] = (ks, (action, params), s2)
                if not quiet(s2):
                    return _unwind(parent, k, s0), len(seen)
                nxt.append(s2)
        frontier = nxt
    return None, len(seen)


def _unwind(parent: dict[tuple[Any, ...], tuple[tuple[Any, ...], Step, OState]],
            k: tuple[Any, ...], s0: OState) -> OTrace:
    steps: list[Step] = []
    states: list[OState] = []
    while k in parent:
        k0, st, s = parent[k]
        steps.append(st)
        states.append(s)
        k = k0
    return OTrace(tuple(reversed(steps)), (s0, *reversed(states)))


def run(v: Variant, schedule: Sequence[Step]) -> tuple[OTrace, str | None]:
    """Run `schedule` concretely; stops at the first step that is not enabled and says
    why (None when every step ran)."""
    s = OState(seen=(None,) * N_REPLICAS)
    states: list[OState] = [s]
    done: list[Step] = []
    for action, params in schedule:
        try:
            s = step(s, v, action, **params)
        except ModelError as e:
            return OTrace(tuple(done), tuple(states)), f"{action}({_params(params)}): {e.message}"
        done.append((action, params))
        states.append(s)
    return OTrace(tuple(done), tuple(states)), None


# The five-step F1 shape (REFERENCE section 3): fence 10 and apply; fence 14, its replicate
# fails; fence 12 and apply; fence 13 and apply; fence 11 and apply.
F1_SHAPE: tuple[Step, ...] = (
    ("fence", {"epoch": 10}), ("land", {}),
    ("phantom", {"epoch": 14}),
    ("fence", {"epoch": 12}), ("land", {}),
    ("fence", {"epoch": 13}), ("land", {}),
    ("fence", {"epoch": 11}), ("land", {}),
)
# The recorded verdicts of the shape (see `f1_verdict`).
EXPECTED_F1: dict[str, str] = {
    "prod-january": "11 admitted, lands below the window: the check fires",
    "prod-january-enqueue": "11 admitted, lands below the window: the check fires",
    "prod-february": "11 admitted, lands below the window: the check fires",
    "prod-february-enqueue": "11 admitted, lands below the window: the check fires",
    "prod-july": "11 admitted, lands below the window: the check fires",
    "prod-july-enqueue": "11 admitted, lands below the window: the check fires",
    "proposal-august": "11 rejected at the fence",
    "proposal-august-enqueue": "11 rejected at the fence",
    "assert-at-apply": "11 admitted, lands below the window: the replicas crash-loop",
    "reference": "11 rejected at the fence",
    "reference-enqueue": "11 rejected at the fence",
}


def _with_replay(v: Variant, tr: OTrace) -> OTrace:
    """A trace ending in a crash, followed by one restart-and-replay that crashes again."""
    if not tr.states[-1].crashed:
        return tr
    s = step(tr.states[-1], v, "replay_crash")
    return OTrace((*tr.steps, ("replay_crash", {})), (*tr.states, s))


def f1_verdict(v: Variant) -> tuple[str, OTrace]:
    """What the five-step shape does under `v` (a crash is shown with its replay)."""
    tr, stopped = run(v, F1_SHAPE)
    tr = _with_replay(v, tr)
    if stopped is not None:
        if len(tr.steps) == 7 and "rejects" in stopped:
            return "11 rejected at the fence", tr
        return f"the shape stops early: {stopped}", tr
    last = tr.states[-1]
    if last.crashed:
        return "11 admitted, lands below the window: the replicas crash-loop", tr
    if not quiet(last):
        return "11 admitted, lands below the window: the check fires", tr
    return "11 admitted and lands in the window", tr


# -- traces that tell the rules apart (issue 39) ---------------------------------------------


def outcome(v: Variant, schedule: Sequence[Step]) -> str:
    """What `schedule` does under `v`: where it stops (a rejection, a lock that waits) or
    how it ends (the check fires, the replicas crash-loop, quiet)."""
    tr, stopped = run(v, schedule)
    if stopped is not None:
        return f"step {len(tr.steps) + 1} {stopped}"
    last = tr.states[-1]
    if last.crashed:
        return "runs; the replicas crash-loop"
    return "runs; the check fires" if not quiet(last) else "runs quietly"


@dataclass(frozen=True)
class Separating:
    """A schedule that tells rule `a` from rule `b` (the second usually its predecessor):
    its recorded outcome under every searched variant, and `a`'s differs from `b`'s."""

    name: str
    a: str
    b: str
    schedule: tuple[Step, ...]
    expected: dict[str, str]


def _f(e: int) -> Step:
    return ("fence", {"epoch": e})


def _ph(e: int) -> Step:
    return ("phantom", {"epoch": e})


_LAND: Step = ("land", {})


def _leader(r: int) -> Step:
    return ("change_leader", {"r": r})


_FIRES, _QUIET, _CRASH = "runs; the check fires", "runs quietly", "runs; the replicas crash-loop"
_REJ = "fence(epoch={e}): the fence rejects it (nothing changes)"
_WAIT = "fence(epoch={e}): the exclusive lock waits for this term's replicates (O3)"


def _at(i: int, what: str, e: int) -> str:
    return f"step {i} " + what.format(e=e)


def _all(default: str, **per: str) -> dict[str, str]:
    out = dict.fromkeys(SEARCHED, default)
    out.update({k.replace("_", "-"): val for k, val in per.items()})
    return out


SEPARATING: tuple[Separating, ...] = (
    # February scopes the seen window to its term: in a newer term the applied window [2,2]
    # rejects 1; January still reads the old term's [1,2] and admits it below the window.
    Separating("a newer term reads the applied window", "prod-february", "prod-january",
               (_ph(1), _f(2), _LAND, _leader(0), _f(1), _LAND),
               _all(_at(5, _REJ, 1), prod_january=_FIRES, prod_january_enqueue=_FIRES)),
    # July: below the seen max only with applied evidence; nothing applied is none.
    Separating("nothing applied is no evidence", "prod-july", "prod-february",
               (_ph(1), _f(2), _f(1), _LAND, _LAND),
               _all(_FIRES, prod_july=_at(3, _REJ, 1), prod_july_enqueue=_at(3, _REJ, 1),
                    assert_at_apply=_at(3, _REJ, 1))),
    # Release at enqueue: a newer term's bump at the stale max 2 leaves the old term's window
    # in place, so fence 1 reads the empty applied window and is "above" it again: held
    # units make it wait for 2's replicate; released at enqueue, 1 lands after 2.
    Separating("release at enqueue under a stale max", "prod-july-enqueue", "prod-july",
               (_ph(2), _leader(0), _f(2), _f(1), _LAND, _LAND),
               _all(_at(4, _WAIT, 1), prod_january=_at(4, _REJ, 1),
                    prod_january_enqueue=_at(4, _REJ, 1), prod_february_enqueue=_FIRES,
                    prod_july_enqueue=_FIRES, assert_at_apply=_CRASH,
                    proposal_august=_at(4, _REJ, 1), proposal_august_enqueue=_at(4, _REJ, 1),
                    reference=_at(4, _REJ, 1), reference_enqueue=_at(4, _REJ, 1))),
    # The five-step F1 shape (#31149's trace): July admits 11, the August proposal rejects it.
    Separating("the five-step F1 shape", "proposal-august", "prod-july", F1_SHAPE,
               _all(_FIRES, proposal_august=_at(8, _REJ, 11),
                    proposal_august_enqueue=_at(8, _REJ, 11), reference=_at(8, _REJ, 11),
                    reference_enqueue=_at(8, _REJ, 11), assert_at_apply=_CRASH)),
    # August raises the lower edge for an interior epoch while a bump is pending, under the
    # exclusive lock: with 3 queued it waits; released at enqueue it raises at once.
    Separating("August's raise takes the exclusive lock", "proposal-august",
               "proposal-august-enqueue", (_ph(1), _ph(3), _f(3), _f(2), _LAND, _LAND),
               _all(_FIRES, proposal_august=_at(4, _WAIT, 2), prod_july=_at(4, _REJ, 2),
                    prod_july_enqueue=_at(4, _REJ, 2), assert_at_apply=_at(4, _REJ, 2))),
    # A newer term: August reads the applied window (empty: 3 is above it), not the old
    # term's [5,6]; January counts [5,6] and rejects 3.
    Separating("August counts only its term's window", "proposal-august", "prod-january",
               (_ph(5), _ph(6), _leader(0), _f(3), _LAND),
               _all(_QUIET, prod_january=_at(4, _REJ, 3),
                    prod_january_enqueue=_at(4, _REJ, 3))),
)


def task_separating(index: int) -> list[Outcome]:
    """One schedule under every searched variant, each against its recorded outcome, and
    the row that says the schedule tells its two rules apart (checked both ways)."""
    sp = SEPARATING[index]
    t0 = time.perf_counter()
    got = {n: outcome(variant(n), sp.schedule) for n in SEARCHED}
    bad = [f"{n}: recorded {sp.expected[n]!r}, got {got[n]!r}" for n in SEARCHED
           if got[n] != sp.expected[n]]
    apart = got[sp.a] != got[sp.b]
    dt = time.perf_counter() - t0
    steps = "; ".join(f"{a}({_params(p)})" for a, p in sp.schedule)
    rows = [Outcome(f"[{sp.a} vs {sp.b}] {sp.name}: every variant's recorded outcome",
                    "verdict", "failed" if bad else "found", dt,
                    "\n".join(bad) if bad else steps + "\n" + "\n".join(
                        f"{n}: {got[n]}" for n in SEARCHED), scope="prod-ordered"),
            Outcome(f"[{sp.a} vs {sp.b}] {sp.name}: the trace tells them apart", "verdict",
                    "found" if apart else "failed", 0.0,
                    f"{sp.a}: {got[sp.a]}; {sp.b}: {got[sp.b]}", scope="prod-ordered")]
    return rows


# Per rule, a schedule whose fence decisions (admitted, window) and applies no other rule
# makes: its vector replays under the rule and disagrees under each other rule. Rejected
# fences are steps (nothing changes); release at enqueue changes which interleavings
# happen, not any step, so a rule and its `-enqueue` share their vector's every step.
RULE_SCHEDULES: dict[str, tuple[Step, ...]] = {
    # The old term's [5,6] rejects 3 (January); a newer term's rules admit it.
    "prod-january": (_ph(5), _ph(6), _leader(0), _f(3)),
    # [1,3] admits 2 shared (July: no evidence; August: raises its edge); then in a newer
    # term the applied [2,2] rejects 1 (January: the old [1,3] admits it).
    "prod-february": (_ph(1), _ph(3), _f(2), _LAND, _leader(0), _f(1)),
    # Nothing applied: 1 below the seen max 2 is rejected (every other rule admits it).
    "prod-july": (_ph(1), _f(2), _f(1), _LAND),
    # An interior epoch while a bump is pending raises the lower edge: window [2,3].
    "proposal-august": (_ph(1), _ph(3), _f(2)),
}


def run_decisions(v: Variant, schedule: Sequence[Step]) -> OTrace:
    """`run`, except that a fence (or phantom) the rule rejects is a step that changes
    nothing; raises ModelError on a step not enabled for another reason."""
    from epochgc.model.ordered import NotEnabled

    s = OState(seen=(None,) * N_REPLICAS)
    states: list[OState] = [s]
    for action, params in schedule:
        if action in ("fence", "phantom"):
            r = fence(s.seen[s.leader], s.applied, s.term, params["epoch"], v)
            if not r.admitted:
                states.append(s)
                continue
        try:
            s = step(s, v, action, **params)
        except NotEnabled as e:
            raise ModelError("run_decisions", action, f"{action}({_params(params)}) under "
                             f"{v.name}: {e.message}") from None
        states.append(s)
    return OTrace(tuple(schedule), tuple(states))


def _decisions(v: Variant, schedule: Sequence[Step]) -> list[tuple[bool, Any]]:
    try:
        tr = run_decisions(v, schedule)
    except ModelError as e:  # another rule's decisions left a step disabled: it differs
        return [(False, e.message)]
    out = []
    for (action, params), pre in zip(tr.steps, tr.states[:-1], strict=True):
        if action in ("fence", "phantom"):
            r = fence(pre.seen[pre.leader], pre.applied, pre.term, params["epoch"], v)
            out.append((r.admitted, r.window))
    return out


RULES = tuple(RULE_SCHEDULES)


def task_rule_vector(name: str) -> list[Outcome]:
    """The rule's own vector: its schedule's decisions differ from every other rule's."""
    t0 = time.perf_counter()
    sched = RULE_SCHEDULES[name]
    mine = _decisions(variant(name), sched)
    same = [o for o in RULES if o != name and _decisions(variant(o), sched) == mine]
    v = variant(name)
    jsonl = to_vector(v, run_decisions(v, sched),
                      f"{name}: decisions no other production rule makes")
    return [Outcome(f"[{name}] its vector's decisions differ from every other rule's "
                    f"({', '.join(o for o in RULES if o != name)})", "verdict",
                    "failed" if same else "found", time.perf_counter() - t0,
                    f"the same decisions under: {', '.join(same)}" if same else
                    "; ".join(f"{'admitted' if a else 'rejected'} {w}" for a, w in mine),
                    {"file": f"rule-{name}.jsonl", "jsonl": jsonl}, scope="prod-ordered")]


# -- presentation -----------------------------------------------------------------------


def _params(p: dict[str, Any]) -> str:
    return ",".join(f"{k}={val}" for k, val in p.items())


def _w(sw: SeenWindow | None) -> str:
    return "-" if sw is None else f"t{sw.term}[{sw.previous},{sw.max}]"


def table(tr: OTrace) -> str:
    """A step table: each action and the partition after it."""
    head = ("#", "action", "params", "term", "leader", "seen(leader)", "seen(other)",
            "applied", "queue", "check fired")
    rows = [head]
    for i, ((action, params), s) in enumerate(zip(tr.steps, tr.states[1:], strict=True), 1):
        w = window(s.applied)
        others = " ".join(_w(x) for r, x in enumerate(s.seen) if r != s.leader)
        q = " ".join(f"{e.epoch}@t{e.term}" for e in s.queue) or "-"
        rows.append((str(i), action, _params(params), str(s.term), f"r{s.leader}",
                     _w(s.seen[s.leader]), others, "-" if w is None else f"[{w[0]},{w[1]}]",
                     q, str(s.fired) + (" (crashed)" if s.crashed else "")))
    widths = [max(len(r[c]) for r in rows) for c in range(len(head))]
    return "\n".join("  ".join(c.ljust(n) for c, n in zip(r, widths, strict=True)).rstrip()
                     for r in rows)


def _state_expect(s: OState) -> dict[str, Any]:
    a = s.applied
    return {"max_applied_epoch": a.max_applied_epoch,
            "previous_applied_epoch": a.previous_applied_epoch}


def to_vector(v: Variant, tr: OTrace, title: str, rejected: int | None = None) -> str:
    """The trace as a conformance vector (spec/VECTORS.md) with an expect on every step:
    fences (a phantom is a fence whose replicate then fails), applies at the log end in
    queue order (a crash-loop's replay is the same apply again), restarts. Leader changes
    and truncations show only in the next fence's term and node."""
    lines: list[dict[str, Any]] = [{"op": "state", "note": title,
                                    "expect": _state_expect(tr.states[0])}]
    for (action, params), pre, post in zip(tr.steps, tr.states[:-1], tr.states[1:],
                                           strict=True):
        note = f"{action}({_params(params)})"
        if action in ("fence", "phantom"):
            r = fence(pre.seen[pre.leader], pre.applied, pre.term, params["epoch"], v)
            lines.append({"op": "fence", "term": pre.term, "epoch": params["epoch"],
                          "node": f"r{pre.leader}",
                          "note": note + (": rejected" if not r.admitted else
                                          ": its replicate fails before the queue"
                                          if action == "phantom" else ": queued"),
                          "expect": {"admitted": r.admitted, "window": list(r.window or ())
                                     or None}})
        elif action in ("land", "replay_crash"):
            e = pre.queue[0].epoch
            w = window(post.applied)
            expect: dict[str, Any] = {"accepted": not out_of_window(pre.applied, e),
                                      "applied_window": None if w is None else list(w)}
            if v.assert_at_apply:
                expect["crashed"] = post.crashed
                expect["accepted"] = not post.crashed
                note += ": the replica restarts and replays it" if action == "replay_crash" else ""
            lines.append({"op": "apply_placeholder", "epoch": e, "offset": pre.log_end,
                          "note": note + (": the apply-time check fires"
                                          if post.fired > pre.fired or action == "replay_crash"
                                          else ""),
                          "expect": expect})
        elif action == "restart":
            lines.append({"op": "restart", "node": f"r{params['r']}", "note": note,
                          "expect": {}})
    if rejected is not None:  # the shape's next fence, which the rule rejects
        last = tr.states[-1]
        r = fence(last.seen[last.leader], last.applied, last.term, rejected, v)
        lines.append({"op": "fence", "term": last.term, "epoch": rejected,
                      "node": f"r{last.leader}", "note": f"fence(epoch={rejected}): rejected",
                      "expect": {"admitted": r.admitted, "window": list(r.window or ()) or None}})
    lines.append({"op": "state", "note": "final state", "expect": _state_expect(tr.states[-1])})
    out = [f"# variant: {v.name}", f"# {title}",
           "# generated by proofs/variants_prod.py (model/ordered.py; spec section 6)"]
    return "\n".join([*out, *(json.dumps(x) for x in lines)]) + "\n"


# -- runner tasks -------------------------------------------------------------------------


def task_prod(name: str) -> list[Outcome]:
    """The production property's verdict for one variant (shortest counterexample, or none
    within MAX_DEPTH) and the five-step shape's verdict, each against the recorded one."""
    v = variant(name)
    out = []
    t0 = time.perf_counter()
    tr, explored = shortest(v)
    dt = time.perf_counter() - t0
    got = None if tr is None else len(tr.steps)
    label = f"[{name}] apply check never fires (production's property)"
    verdict = ("refuted, shortest counterexample " f"{got} actions" if got is not None
               else f"no counterexample within {MAX_DEPTH} actions (bounded)")
    detail = f"{verdict}; {explored} states explored breadth-first"
    file = {}
    if tr is not None:
        detail += "\n" + table(tr)
        title = f"{name}: a shortest trace ({got} actions) to a placeholder outside the window"
        file = {"file": f"prod-shortest-{name}.jsonl",
                "jsonl": to_vector(v, _with_replay(v, tr), title)}
    if got != EXPECTED[name]:
        status = "failed"
        detail = f"recorded verdict {EXPECTED[name]}, got {got}: " + detail
    else:  # a bound without a counterexample is checked, never found or proved
        status = "found" if got is not None else "checked"
    out.append(Outcome(label, "verdict", status, dt, detail, file, scope="prod-ordered"))
    t0 = time.perf_counter()
    f1, ftr = f1_verdict(v)
    dt = time.perf_counter() - t0
    status = "found" if f1 == EXPECTED_F1[name] else "failed"
    title = f"{name}: the five-step F1 shape: {f1}"
    out.append(Outcome(f"[{name}] five-step F1 shape: {f1}", "verdict", status, dt,
                       ("" if status == "found" else f"recorded: {EXPECTED_F1[name]}\n")
                       + table(ftr),
                       {"file": f"f1-shape-{name}.jsonl", "jsonl": to_vector(
                           v, ftr, title, 11 if f1.endswith("rejected at the fence") else None)},
                       scope="prod-ordered"))
    return out


def write_vectors(directory: str) -> list[str]:
    """Write every searched variant's shortest counterexample and five-step shape, and each
    rule's own vector, into `directory` (spec/vectors); the file names written."""
    from pathlib import Path

    out = Path(directory)
    names = []
    rows = [o for name in SEARCHED for o in task_prod(name)]
    rows += [o for name in RULES for o in task_rule_vector(name)]
    for o in rows:
        if isinstance(o.trace, dict) and "file" in o.trace:
            (out / o.trace["file"]).write_text(o.trace["jsonl"], encoding="utf-8")
            names.append(o.trace["file"])
    return names


def warm_start(v: Variant) -> OState:
    """A partition that has applied one epoch (fence 1, applied): the search from here
    leaves out the empty partition's first apply, which every rule fails on."""
    return step(step(OState(seen=(None,) * N_REPLICAS), v, "fence", epoch=1), v, "land")


def main(argv: list[str] | None = None) -> int:
    """`python -m epochgc.proofs.variants_prod [DIR]` writes the vectors (default
    spec/vectors); `--warm DEPTH NAME...` searches from `warm_start` (minutes at depth 8)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m epochgc.proofs.variants_prod")
    ap.add_argument("--dir", default="spec/vectors", help="where the vectors go")
    ap.add_argument("--warm", type=int, metavar="DEPTH",
                    help="search from a partition that applied an epoch, to DEPTH actions")
    ap.add_argument("--epochs", type=int, default=7, help="fence epochs 1..N (with --warm)")
    ap.add_argument("--depth", type=int, metavar="DEPTH",
                    help="search from the empty partition to DEPTH actions (epochs 1..DEPTH)")
    ap.add_argument("names", nargs="*", default=[])
    args = ap.parse_args(argv)
    if args.depth is not None:
        for name in args.names or list(SEARCHED):
            t0 = time.perf_counter()
            tr, n = shortest(variant(name), args.depth)
            what = (f"none within {args.depth} actions" if tr is None
                    else f"shortest {len(tr.steps)} actions")
            print(f"{name}: {what} ({n} states, {time.perf_counter() - t0:.0f}s)")
        return 0
    if args.warm is None:
        for f in write_vectors(args.dir):
            print(f)
        return 0
    for name in args.names or list(SEARCHED):
        v = variant(name)
        t0 = time.perf_counter()
        tr, n = shortest(v, args.warm, warm_start(v), args.epochs)
        what = (f"none within {args.warm} actions" if tr is None
                else f"shortest {len(tr.steps)} actions")
        print(f"{name}: {what} ({n} states, epochs 1..{args.epochs}, "
              f"{time.perf_counter() - t0:.0f}s)")
        if tr is not None:
            print(table(tr))
    return 0



# -- ours, whatever the fence admits (the quantified proof) ---------------------------------


def _fence_any(L: Any, s: Any, prm: dict[str, Any]) -> tuple[Any, Any]:
    """`spec.fence_write` without "admits only what the window accepts": a fence rule that
    may admit any epoch (every production rule is one; the apply-time check decides)."""
    from epochgc.model.system import FAILED, FENCED, UPLOADED
    from epochgc.proofs.param.spec import _at, _write_status

    w0, ok = prm["w"], prm["admit"]
    return s.wstatus(w0) == UPLOADED, _write_status(L, s, w0, L.Ite(ok, FENCED, FAILED)).with_(
        wrepl=_at(L, w0, lambda: ok, s.wrepl))


def _other_any(L: Any, s: Any, prm: dict[str, Any]) -> tuple[Any, Any]:
    """`spec.other_write` without "the window accepts it" at the fence: a fence rule that
    may admit any epoch, the apply-time checks (R3, R37) deciding what is accepted."""
    from epochgc.proofs.param.spec import _other_ok, accepts, apply_ok, apply_placeholder

    p0, e = prm["p"], prm["epoch"]
    guard = L.And(_other_ok(L, s, p0, e), apply_ok(L, s, p0, e))
    return guard, apply_placeholder(L, s, p0, e, accepts(L, s, p0, e))


ANY_FENCE = "any fence rule"


def task_ours_any_fence(seed: int, rlimit: int) -> list[Outcome]:
    """Our property for every fence rule at once, for any number of partitions and writes:
    every invariant (safety among them) preserved by a fence that admits anything (a
    tracked write's, `fence_write`, and another producer's, `other_write`), plus a
    vacuity row showing such a fence admitting an epoch the applied window rejects. Every
    other action of the quantified spec reads no seen window (the fence is havocked there:
    `proofs/param/spec.py`), so their rows are the rows of `reference`."""
    import z3

    from epochgc.proofs.param import prove, spec
    from epochgc.proofs.param.logic import Z3Logic

    actions = dict(spec.ACTIONS)
    params, choices, _ = actions["fence_write"]
    actions["fence_write"] = (params, choices, _fence_any)
    params, choices, _ = actions["other_write"]
    actions["other_write"] = (params, choices, _other_any)
    rows = prove.prove_action("fence_write", seed, rlimit, actions=actions)
    rows += prove.prove_action("other_write", seed, rlimit, actions=actions)
    for o in rows:
        o.name = f"[{ANY_FENCE}] {o.name}"
    # Non-vacuity: an admission below the applied window is enabled under the invariants.
    t0 = time.perf_counter()
    L = Z3Logic()
    pre = L.state("")
    w0, ok = L.const("w", "W"), L.const("admit", "Bool")
    solver = prove._solver(seed, rlimit)
    for f in prove.assume_invariants(L, pre):
        solver.add(f)
    guard, _post = _fence_any(L, pre, {"w": w0, "admit": ok})
    below = z3.Not(prove._z(spec.accepts(L, pre, pre.wpart(w0), spec.epoch_of(pre, w0))))
    solver.add(prove._z(guard), prove._z(ok), below)
    r = check(solver)[0]
    name = (f"[{ANY_FENCE}] fence_write admits an epoch below the applied window under the "
            "invariants (any size)")
    status = "found" if r == z3.sat else "failed" if r == z3.unsat else "unknown"
    detail = ("the proof above covers admissions the reference fence never makes"
              if r == z3.sat else "vacuous: no such admission" if r == z3.unsat
              else solver.reason_unknown())
    rows.append(prove.row(name, "vacuity", status, time.perf_counter() - t0, detail))
    return rows


# -- ours, per production rule: its Python against the formulas (the correspondence) --------

# Shapes on which each rule's Python is proved to take only steps the any-fence formulas
# allow (every state of the shape, python -> formula): one partition with a leader and a
# follower (January's apply path slides the follower's seen window too).
PROD_CORR_SHAPES: dict[str, tuple[str, ...]] = {
    "prod-january": ("1p2r:0",), "prod-february": ("1p2r:0",),
    "prod-july": ("1p2r:0",), "proposal-august": ("1p2r:0",)}


def task_prod_correspondence(name: str, seed: int = 0, rlimit: int = RLIMIT
                             ) -> list[Outcome]:
    """The actions that read a production rule's switches, run on `name`'s Python on every
    state of each shape, each step one the formula allows: `fence_write` and `other_write`
    against the any-fence formulas the `[any fence rule]` rows prove (python -> formula:
    the rule admits less than "anything"), the others against the spec's own (both
    directions where the spec's formula is deterministic)."""
    from epochgc.proofs.param import spec, symcorr, tasks

    shapes = dict(tasks.exhaustive_shapes())
    checks = (("fence_write", _fence_any, "py"), ("other_write", _other_any, "py"),
              ("phantom_fence", None, "py"), ("land_write", None, "both"),
              ("late_land", None, "both"), ("housekeep", None, "both"))
    out = []
    for shape in PROD_CORR_SHAPES[name]:
        for action, formula, mode in checks:
            t0 = time.perf_counter()
            r = symcorr.check_action(action, shape, shapes[shape], rlimit, seed, mode,
                                     variant=variant(name), formula=formula)
            what = ("the any-fence formula" if formula is not None else "spec.py's")
            direction = "python -> formula" if mode == "py" else "both directions"
            status = "unknown" if r.unknown else "failed" if r.failure else "proved"
            o = Outcome(f"[{name}] python = formula: {action} on every state of {shape} "
                        f"under I1-I9 ({what}, {direction})", "correspondence", status,
                        time.perf_counter() - t0,
                        r.failure or f"{r.paths} paths, {r.queries} queries", paths=r.paths,
                        scope="shape")
            out.append(o)
    assert set(a for a, _, _ in checks) <= set(spec.ACTIONS)
    return out


if __name__ == "__main__":
    import sys

    sys.exit(main())
