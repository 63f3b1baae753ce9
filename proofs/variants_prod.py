"""Production's fence rules as variants (issue 30; spec section 6, "Production's rules"):
their verdicts on production's own safety property, "the apply-time window check never
fires", in `model.ordered` (one partition's fence layer with Raft's order), and on ours,
"never deletes in-use data", in the quantified proof with a fence that may admit anything.

Production's property is decided by breadth-first search over `model.ordered`: every
action, every epoch, level by level, so the first violation found is a shortest one (in
actions). The rules only compare epochs, so a trace of n actions (at most n fences) is
order-isomorphic to one with epochs in 1..n: searching with epochs 1..depth loses no
trace of that length. States are merged when they agree on everything the future reads
(the windows, the queue, which terms are current), so the search is exhaustive up to its
depth. Each verdict is compared with the recorded one (`EXPECTED`): a different answer
fails the row (how `proofs.mutants` sees a seeded bug).
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

# The variants searched: production's, with and without release at enqueue, assert-at-apply,
# and our own fence rule beside them (it never claimed production's property).
SEARCHED: tuple[str, ...] = (*PROD_VARIANTS, "reference", "reference-enqueue")
MAX_DEPTH = 6  # a search that finds nothing this deep says "none within 6", never "proved"
N_REPLICAS = 2

# The recorded verdicts: the shortest counterexample's length in actions (None: none
# within MAX_DEPTH). Whatever the search says is the result; a change here is a finding.
EXPECTED: dict[str, int | None] = {
    "prod-january": 5, "prod-january-enqueue": 5,
    "prod-july": 5, "prod-july-enqueue": 5,
    "prod-august": 5, "prod-august-enqueue": 5,
    "assert-at-apply": 5,
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
    `max_depth`: exact for traces from the initial state)."""
    s0 = OState(seen=(None,) * N_REPLICAS) if s0 is None else s0
    seen = {_key(s0)}
    parent: dict[tuple[Any, ...], tuple[tuple[Any, ...], Step, OState]] = {}
    frontier = [s0]
    moves = _moves(max_depth if epochs is None else epochs)
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
    "prod-july": "11 admitted, lands below the window: the check fires",
    "prod-july-enqueue": "11 admitted, lands below the window: the check fires",
    "prod-august": "11 rejected at the fence",
    "prod-august-enqueue": "11 rejected at the fence",
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
                          "note": note + (": its replicate fails before the queue"
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
    status = "found" if got == EXPECTED[name] else "failed"
    if status == "failed":
        detail = f"recorded verdict {EXPECTED[name]}, got {got}: " + detail
    out.append(Outcome(label, "verdict", status, dt, detail, file, scope="prod-ordered"))
    if not v.assert_at_apply:
        # Ours: the quantified rows `[any fence rule]` cover this variant exactly when it
        # keeps the apply-time rejection and differs from reference only in its fence.
        from dataclasses import replace

        from epochgc.model.variants import REFERENCE

        same = replace(v, name="reference", fence_rule=REFERENCE.fence_rule,
                       followers_slide=False, fence_lo_from_applied=True,
                       term_scoped_seen=True, release_at_enqueue=False) == REFERENCE
        out.append(Outcome(
            f"[{name}] never deletes in-use data (ours): proved for any size by the "
            f"[{ANY_FENCE}] rows", "verdict", "found" if same else "failed", 0.0,
            "its apply, GC and watermark are reference's; its fence is one that may admit "
            "anything, which the quantified rows prove safe" if same else
            "this variant changes more than the fence: the [any fence rule] rows do not "
            "cover it", scope="any"))
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
    """Write every searched variant's shortest counterexample and five-step shape as
    vectors into `directory` (spec/vectors); the file names written."""
    from pathlib import Path

    out = Path(directory)
    names = []
    for name in SEARCHED:
        for o in task_prod(name):
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
    ap.add_argument("names", nargs="*", default=[])
    args = ap.parse_args(argv)
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


ANY_FENCE = "any fence rule"


def task_ours_any_fence(seed: int, timeout_ms: int) -> list[Outcome]:
    """Our property for every fence rule at once, for any number of partitions and writes:
    every invariant (safety among them) preserved by a fence that admits anything, plus a
    vacuity row showing such a fence admitting an epoch the applied window rejects. Every
    other action of the quantified spec reads no seen window (the fence is havocked there:
    `proofs/param/spec.py`), so their rows are the rows of `reference`."""
    import z3
    from epochgc.proofs.param import prove, spec
    from epochgc.proofs.param.logic import Z3Logic

    actions = dict(spec.ACTIONS)
    params, choices, _ = actions["fence_write"]
    actions["fence_write"] = (params, choices, _fence_any)
    rows = prove.prove_action("fence_write", seed, timeout_ms, actions=actions)
    for o in rows:
        o.name = f"[{ANY_FENCE}] {o.name}"
    # Non-vacuity: an admission below the applied window is enabled under the invariants.
    t0 = time.perf_counter()
    L = Z3Logic()
    pre = L.state("")
    w0, ok = L.const("w", "W"), L.const("admit", "Bool")
    solver = prove._solver(seed, timeout_ms)
    for f in prove.assume_invariants(L, pre):
        solver.add(f)
    guard, _post = _fence_any(L, pre, {"w": w0, "admit": ok})
    below = z3.Not(prove._z(spec.accepts(L, pre, pre.wpart(w0), spec.epoch_of(pre, w0))))
    solver.add(prove._z(guard), prove._z(ok), below)
    r = solver.check()
    name = (f"[{ANY_FENCE}] fence_write admits an epoch below the applied window under the "
            "invariants (any size)")
    status = "found" if r == z3.sat else "failed" if r == z3.unsat else "unknown"
    detail = ("the proof above covers admissions the reference fence never makes"
              if r == z3.sat else "vacuous: no such admission" if r == z3.unsat
              else solver.reason_unknown())
    rows.append(prove.row(name, "vacuity", status, time.perf_counter() - t0, detail))
    return rows


if __name__ == "__main__":
    import sys

    sys.exit(main())
