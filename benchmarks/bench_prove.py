"""Proof phase benchmark (not a timed test): writes build/bench-prove.json.

    python benchmarks/bench_prove.py [--quick] [--repeat N] [--baseline-ref REF]
                                     [--fresh] [--out build/bench-prove.json]

The whole `python -m epochgc.proofs` (what `tox -e prove` runs) of this tree against a baseline:
the same command on `model/` and `proofs/` exported from git at REF (default: the commit
before issue 11's speed work), run in the same command, alternating (base, new, new, base,
...) so load from other processes hits both alike. Rows: wall and CPU (user + sys of the
run and every process it waited for: pool workers, CrossHair) seconds, best of N, as ratios
new / baseline; and how many report rows differ from the baseline's (name, kind, status,
scope, paths): 0 means the same obligations, verdicts and path counts. `--quick` passes
`--quick` to both runs (induction for `reference` only); `--fresh` removes the last report
before every run, so tasks are ordered as in a fresh clone (CI).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# The last commit before the proof-speed work of issue 11 (proofs/sym.py replays, no memo).
BASELINE_REF = "b3fca5d"


def export(ref: str, dest: Path) -> None:
    """`model/` and `proofs/` as of `ref` into `dest` (what `python -m epochgc.proofs` imports)."""
    proc = subprocess.run(["git", "archive", "--format=tar", ref, "epochgc", "model", "proofs"],
                          cwd=ROOT, capture_output=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"bench_prove: cannot export baseline ref {ref!r} from {ROOT}: "
                         f"{proc.stderr.decode().strip()}")
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        tar.extractall(dest, filter="data")


def run(tree: Path, report: Path, quick: bool, fresh: bool = False) -> tuple[float, float]:
    """(wall s, CPU s) of one `python -m epochgc.proofs` on `tree`; a failed run stops the bench.
    `fresh`: no last report to order the tasks by, as in a fresh clone (CI)."""
    if fresh:
        report.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "epochgc.proofs", "--report", str(report)]
    cmd += ["--quick"] if quick else []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=tree, env=_env(tree), capture_output=True, text=True,
                          check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"bench_prove: `python -m epochgc.proofs` failed on {tree}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _env(tree: Path) -> dict[str, str]:

    # The tree first on the path: the editable install would otherwise win for `model`.
    return {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}


def rows_of(report: Path) -> dict[str, tuple[Any, ...]]:
    data = json.loads(report.read_text())
    return {o["name"]: (o["kind"], o["status"], o.get("scope"), o.get("paths"))
            for o in data["obligations"]}


def differing(base: dict[str, tuple[Any, ...]], new: dict[str, tuple[Any, ...]]) -> list[str]:
    out = [f"only in baseline: {n}" for n in sorted(set(base) - set(new))]
    out += [f"only in this tree: {n}" for n in sorted(set(new) - set(base))]
    out += [f"{n}: baseline {base[n]}, this tree {new[n]}" for n in sorted(set(base) & set(new))
            if base[n] != new[n]]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="both runs with --quick")
    ap.add_argument("--repeat", type=int, default=2, help="runs per side (best of N)")
    ap.add_argument("--baseline-ref", default=BASELINE_REF)
    ap.add_argument("--out", default="build/bench-prove.json")
    ap.add_argument("--fresh", action="store_true",
                    help="every run without a last report (task order as in a fresh clone)")
    args = ap.parse_args()
    times: dict[str, list[tuple[float, float]]] = {"baseline": [], "new": []}
    loads: list[float] = []  # 1-minute load average after each run
    with tempfile.TemporaryDirectory(prefix="bench-prove-") as d:
        base_tree = Path(d) / "baseline"
        export(args.baseline_ref, base_tree)
        trees = {"baseline": base_tree, "new": ROOT}
        reports = {k: Path(d) / f"{k}.json" for k in trees}
        for i in range(max(1, args.repeat)):
            order = ("baseline", "new") if i % 2 == 0 else ("new", "baseline")
            for side in order:
                wall, cpu = run(trees[side], reports[side], args.quick, args.fresh)
                times[side].append((wall, cpu))
                loads.append(os.getloadavg()[0])  # other processes share the 2 cores
                print(f"{side:9} run {i + 1}: {wall:6.1f} s wall, {cpu:6.1f} s CPU, "
                      f"load {loads[-1]:.1f}", flush=True)
        diff = differing(rows_of(reports["baseline"]), rows_of(reports["new"]))
    print(f"report rows differing from the baseline ({args.baseline_ref}): {len(diff)}")
    for line in diff[:40]:
        print("  " + line)
    suffix = ("_quick" if args.quick else "") + ("_fresh" if args.fresh else "")
    rows: list[dict[str, object]] = []
    for what, idx in (("wall", 0), ("cpu", 1)):
        new = min(t[idx] for t in times["new"])
        base = min(t[idx] for t in times["baseline"])
        rows.append({"name": f"prove_{what}_s_vs_{args.baseline_ref}{suffix}",
                     "value": round(new, 2), "unit": "s", "baseline": round(base, 2),
                     "ratio": round(new / base, 3), "target": None, "better": "lower"})
    rows.append({"name": f"prove_load_average_max{suffix}", "value": round(max(loads), 2),
                 "unit": "load", "baseline": round(min(loads), 2), "ratio": None,
                 "target": None, "better": "lower"})  # baseline column: the minimum
    rows.append({"name": f"prove_report_rows_differing_from_{args.baseline_ref}{suffix}",
                 "value": len(diff), "unit": "count", "baseline": None, "ratio": None,
                 "target": None, "better": "lower"})
    out = Path(args.out)
    if not out.is_absolute():
        out = ROOT / out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=1) + "\n")
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
