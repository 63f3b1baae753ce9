"""`tox -e bench`: every benchmark of the project, one table, `build/bench.json`.

Runs the proof phase (timed) and each `benchmarks/bench_*.py` in its own process (so one
benchmark's threads, Spark session or cluster cannot slow the next), each writing its own
`build/bench-*.json`; then merges all rows. `--quick` passes through (smaller sizes).

Rows: {"name", "value", "unit", "baseline", "ratio", "target", "target_of", "better"}.
`ratio` is value/baseline of a baseline run in the same command; `target` is what its issue
asks for, null where none was asked, and `target_of` says whether it bounds the `ratio` or
the `value` (a row with a target and no target_of fails the run: a row with both a ratio
and an absolute target was ambiguous); `better` says which way the value improves
("higher" or "lower"): a row without it fails the run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"


def row_problems(rows: list[dict[str, object]]) -> list[str]:
    """What makes rows unreadable: no direction, or a target without what it bounds."""
    problems = []
    unsaid = [str(r.get("name")) for r in rows if r.get("better") not in ("higher", "lower")]
    if unsaid:
        problems.append("rows without better=higher|lower: " + ", ".join(unsaid))
    # A row with both a ratio and a target must say which one the target is for.
    vague = [str(r.get("name")) for r in rows
             if r.get("target") is not None and r.get("target_of") not in ("ratio", "value")]
    if vague:
        problems.append("rows with a target but no target_of=ratio|value: " + ", ".join(vague))
    return problems


def _prove_rows(quick: bool) -> list[dict[str, object]]:
    report = BUILD / "prove-report.json"
    t0 = time.perf_counter()
    args = [sys.executable, "-m", "epochgc.proofs", "--report", str(report)]
    proc = subprocess.run([*args, "--quick"] if quick else args, cwd=ROOT, check=False,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
        raise SystemExit("proofs failed; no benchmark figures for them")
    data = json.loads(report.read_text())
    z3_rows = [o for o in data["obligations"] if o["kind"] != "crosshair"]
    slowest = max(o["seconds"] for o in z3_rows)
    slowest_query = float(data.get("slowest_query_seconds", slowest))
    budget = 30.0  # issue 11: the whole `tox -e prove` in at most 30 s on 2 cores
    return [
        {"name": "prove_total_wall_s" + ("_quick" if quick else ""), "value": round(wall, 2),
         "unit": "s", "baseline": budget, "ratio": round(wall / budget, 3), "target": 1.0,
         "target_of": "ratio", "better": "lower"},
        {"name": "prove_slowest_solver_query_s", "value": round(slowest_query, 3), "unit": "s",
         "baseline": 2.0, "ratio": round(slowest_query / 2.0, 3), "target": 1.0,
         "target_of": "ratio", "better": "lower"},
        {"name": "prove_slowest_obligation_s", "value": round(slowest, 3), "unit": "s",
         "baseline": None, "ratio": None, "target": None, "better": "lower"},
        {"name": "prove_obligations", "value": len(data["obligations"]), "unit": "count",
         "baseline": None, "ratio": None, "target": None, "better": "higher"},
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (under 10 minutes)")
    ap.add_argument("--only", nargs="*", help="benchmark names, e.g. raft gc conform prove")
    args = ap.parse_args()
    BUILD.mkdir(exist_ok=True)
    rows: list[dict[str, object]] = []
    failures: list[str] = []
    wanted = set(args.only or [])
    if not wanted or "prove" in wanted:
        print("== prove", flush=True)
        rows += _prove_rows(args.quick)
    for script in sorted((ROOT / "benchmarks").glob("bench_*.py")):
        name = script.stem.removeprefix("bench_")
        if wanted and name not in wanted:
            continue
        out = BUILD / f"bench-{name}.json"
        out.unlink(missing_ok=True)
        cmd = [sys.executable, str(script), "--out", str(out)] + (["--quick"] if args.quick else [])
        print(f"== {name}: {' '.join(cmd[1:])}", flush=True)
        proc = subprocess.run(cmd, cwd=ROOT, check=False)
        if proc.returncode != 0 or not out.exists():
            failures.append(name)
            continue
        rows += json.loads(out.read_text())
    failures += row_problems(rows)
    (BUILD / "bench.json").write_text(json.dumps(rows, indent=1) + "\n")
    head = ("name", "value", "unit", "baseline", "ratio", "target", "target_of", "better")
    table = [head] + [tuple("" if r.get(k) is None else str(r.get(k)) for k in head) for r in rows]
    widths = [max(len(t[i]) for t in table) for i in range(len(head))]
    print()
    for t in table:
        print("  ".join(c.ljust(w) for c, w in zip(t, widths, strict=True)).rstrip())
    print(f"\n{len(rows)} rows -> build/bench.json")
    if failures:
        print(f"benchmarks that failed: {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
