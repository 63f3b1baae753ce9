"""`python -m proofs` (what `tox -e prove` runs): every proof obligation, one row each.

Kinds: `invariant` (init and induction queries, and "no trace" bounded checks of the bug
shapes under `reference`), `witness` (each action reachable; liveness witnesses),
`counterexample` (each known-bad variant breaks safety), `crosshair` (the model's PEP 316
contracts). A `failed` or `unknown` row makes the run exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from model.system import ACTIONS
from model.variants import REFERENCE, SAFE_VARIANTS, variant
from proofs import bmc, crosshair_check, obligations, scenarios, vectors
from proofs.obligations import Outcome

BUDGET_S = 30.0  # per bounded search; running out is a failure, never a pass


# -- tasks (module level so worker processes can run them) ----------------------------------


def _labelled(variant_name: str, out: list[Outcome]) -> list[Outcome]:
    """Rows of a variant other than `reference` carry its name."""
    if variant_name != "reference":
        for o in out:
            o.name = f"[{variant_name}] {o.name}"
    return out


def task_induction(variant_name: str, action: str) -> list[Outcome]:
    v = variant(variant_name)
    return _labelled(variant_name,
                     obligations.induction(scenarios.INDUCTION_TEMPLATE, v, [action]))


def task_init(variant_name: str) -> list[Outcome]:
    v = variant(variant_name)
    return _labelled(variant_name, obligations.init_obligations(scenarios.INDUCTION_TEMPLATE, v))


def task_witness(index: int) -> list[Outcome]:
    action = scenarios.TOUR[index][0]
    t0 = time.perf_counter()
    try:
        tr = bmc.search(scenarios.TRACE_TEMPLATE, REFERENCE, scenarios.TOUR[: index + 1],
                        scenarios.changed, BUDGET_S)
    except TimeoutError as e:
        return [Outcome(f"{action} is reachable", "witness", "unknown",
                        time.perf_counter() - t0, str(e))]
    status = "found" if tr is not None else "failed"
    detail = "" if tr is not None else "action can never take effect: invariants may be vacuous"
    return [Outcome(f"{action} is reachable", "witness", status, time.perf_counter() - t0, detail)]


def task_bug(index: int) -> list[Outcome]:
    b = scenarios.BUGS[index]
    out = []
    for vname, kind in ((b.variant, "counterexample"), ("reference", "invariant")):
        v = variant(vname)
        t0 = time.perf_counter()
        name = (f"{b.name} [{vname}] breaks {b.invariant}" if kind == "counterexample"
                else f"{b.name} shape cannot break {b.invariant} in reference")
        try:
            tr = bmc.search(scenarios.TRACE_TEMPLATE, v, b.schedule, b.goal(v), BUDGET_S)
        except TimeoutError as e:
            out.append(Outcome(name, kind, "unknown", time.perf_counter() - t0, str(e)))
            continue
        dt = time.perf_counter() - t0
        if kind == "counterexample":
            if tr is None:
                out.append(Outcome(name, kind, "failed", dt, "expected counterexample not found"))
            else:
                title = f"{b.name}: {b.title}"
                lines = vectors.trace_to_vector(tr, v, title)
                out.append(Outcome(name, kind, "found", dt, bmc.table(tr),
                                   {"file": f"{b.name.lower()}-{b.variant}.jsonl",
                                    "jsonl": vectors.dump(lines, b.variant, title)}))
        else:
            status = "proved" if tr is None else "failed"
            out.append(Outcome(name, kind, status, dt,
                               "" if tr is None else bmc.table(tr)))
    return out


def task_liveness(index: int) -> list[Outcome]:
    sc = scenarios.LIVENESS[index]
    v = variant(sc.variant)
    name = f"{sc.name} [{sc.variant}] rejects what reference admits"
    t0 = time.perf_counter()

    try:
        tr = bmc.search(scenarios.TRACE_TEMPLATE, v, sc.schedule, sc.goal(v), BUDGET_S,
                        pair=REFERENCE, pair_goal=sc.reference_goal)
    except TimeoutError as e:
        return [Outcome(name, "witness", "unknown", time.perf_counter() - t0, str(e))]
    dt = time.perf_counter() - t0
    if tr is None or not sc.reference_admits([st.params for st in tr.steps]):
        return [Outcome(name, "witness", "failed", dt, "no spurious rejection found")]
    return [Outcome(name, "witness", "found", dt, bmc.table(tr))]


def task_crosshair(module: str) -> list[Outcome]:
    return [crosshair_check.check(module)]


def _tasks(quick: bool) -> list[tuple[Any, tuple[Any, ...]]]:
    tasks: list[tuple[Any, tuple[Any, ...]]] = []
    # Longest first, so the pool stays busy.
    tasks += [(task_crosshair, (m,)) for m in crosshair_check.MODULES]
    variants = ("reference",) if quick else SAFE_VARIANTS
    for vname in variants:
        tasks.append((task_init, (vname,)))
        tasks += [(task_induction, (vname, a)) for a in ACTIONS]
    tasks += [(task_bug, (i,)) for i in range(len(scenarios.BUGS))]
    tasks += [(task_liveness, (i,)) for i in range(len(scenarios.LIVENESS))]
    first: dict[str, int] = {}
    for i, (a, _) in enumerate(scenarios.TOUR):
        first.setdefault(a, i)
    tasks += [(task_witness, (i,)) for i in sorted(first.values())]
    return tasks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m proofs", description=__doc__)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--report", default="build/prove-report.json")
    ap.add_argument("--write-vectors", metavar="DIR",
                    help="write the counterexample vectors here (spec/vectors/generated)")
    ap.add_argument("--quick", action="store_true",
                    help="induction for `reference` only (strict and collapse skipped)")
    ap.add_argument("--tables", action="store_true", help="print every trace table")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    results: list[Outcome] = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(fn, *a) for fn, a in _tasks(args.quick)]
        for f in futures:
            for o in f.result():
                results.append(o)
                print(f"{o.status:8} {o.seconds:7.2f}s  {o.kind:14} {o.name}", flush=True)
                if o.status in ("failed", "unknown") and o.detail:
                    print("    " + o.detail.replace("\n", "\n    "))
                    if o.trace is not None and "pre" in o.trace:
                        print(f"    pre:    {o.trace['pre']}\n    params: {o.trace['params']}"
                              f"\n    post:   {o.trace['post']}")
    total = time.perf_counter() - t0

    found = [o for o in results if o.kind == "counterexample" and o.status == "found"]
    for o in found:
        print(f"\n== {o.name}\n{o.detail}")
    if args.tables:
        for o in results:
            if o.kind == "witness" and o.status == "found":
                print(f"\n== {o.name}\n{o.detail}")
    if args.write_vectors:
        out = Path(args.write_vectors)
        out.mkdir(parents=True, exist_ok=True)
        for o in found:
            (out / o.trace["file"]).write_text(o.trace["jsonl"])
        print(f"\nwrote {len(found)} vectors to {out}")

    bad = [o for o in results if o.status in ("failed", "unknown")]
    slowest = max(results, key=lambda o: o.seconds)
    report = {
        "total_seconds": round(total, 3),
        "obligations": [
            {k: v for k, v in asdict(o).items() if k in ("name", "kind", "status", "seconds")}
            for o in results
        ],
    }
    Path(args.report).parent.mkdir(parents=True, exist_ok=True)
    Path(args.report).write_text(json.dumps(report, indent=1) + "\n")
    print(f"\n{len(results)} obligations, {len(bad)} failed or unknown, "
          f"{total:.1f}s total, slowest {slowest.seconds:.2f}s ({slowest.name}); "
          f"report: {args.report}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
