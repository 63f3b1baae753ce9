"""Conformance-harness throughput: harness steps per second per core (Spark excluded).

Runs the deep run's own chunks (`tests.conformance.deep.run_chunk`: the Hypothesis state
machine, every rule and every per-step check) in this one process for fixed seeds, three
times in the same command:

- now: the deep run's mix (chunk k checks the Raft core's invariants after every simulator
  event when k % 4 == 0, else once per harness step), each program's store on tmpfs, and
  the held-write rules' early exit (no idle wait for a write the fence refused);
- the code changes alone: as now, but Raft checks after every event in every chunk;
- baseline: what `tox -e deep` ran before (Raft checks after every event in every program,
  the store on the real disk, the full idle wait).

Per core = harness steps / CPU seconds of this process (the harness is one thread, so on an
idle core that is its steps per wall second; on a shared machine CPU time is the fair clock).
Also reports the wall time of the last full deep run (build/deep.json) when there is one.
Writes build/bench-harness.json in the benchmark row format.

    python benchmarks/bench_harness.py [--chunks N] [--examples N] [--steps N] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGET = 600.0  # steps/s per core (issue 14): 1,000,000 steps in under 30 min on 2 cores


def _measure(chunks: int, examples: int, steps: int, mix: bool, tmp: str | None,
             early_exit: bool) -> tuple[int, float, float]:
    from tests.conformance import harness
    from tests.conformance.deep import run_chunk

    harness.TMP_BASE = tmp
    harness.HOLD_WAIT_EARLY_EXIT = early_exit
    total, cpu, wall = 0, 0.0, 0.0
    for k in range(chunks):
        check = "event" if not mix or k % 4 == 0 else "step"
        res = run_chunk(1000 + k, examples, steps, check)
        if res["failure"]:
            raise SystemExit(f"chunk {1000 + k} failed:\n{res['failure']}")
        total += res["stats"].get("steps", 0)
        cpu += res["cpu"]
        wall += res["wall"]
    return total, cpu, wall


def _deep_rows() -> list[dict[str, Any]]:
    path = ROOT / "build" / "deep.json"
    if not path.exists():
        return []
    d = json.loads(path.read_text())
    wall, name = d["wall_s"], f"deep run wall, {d['target_steps']:,} steps"
    if not d.get("finished"):  # extrapolated at the run's own rate, and said so
        wall = round(wall * d["target_steps"] / max(1, d["steps"]), 1)
        name += f" (NOT finished: extrapolated from {d['steps']} steps in {d['wall_s']} s)"
    return [
        {"name": name, "value": wall, "unit": "s", "baseline": 1800.0,
         "ratio": round(wall / 1800.0, 3), "target": 1.0, "better": "lower"},
        {"name": "deep run projected wall on a quiet 2-core machine",
         "value": d.get("projected_quiet_wall_s"), "unit": "s", "baseline": 1800.0,
         "ratio": round(d["projected_quiet_wall_s"] / 1800.0, 3)
         if d.get("projected_quiet_wall_s") else None, "target": 1.0, "better": "lower"},
        {"name": "deep run steps per CPU-second per worker", "value": d["steps_per_cpu_s"],
         "unit": "steps/s/core", "baseline": None, "ratio": None, "target": TARGET,
         "better": "higher"},
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=4, help="seeded chunks per configuration")
    ap.add_argument("--examples", type=int, default=4, help="programs per chunk")
    ap.add_argument("--steps", type=int, default=200, help="max rules per program")
    ap.add_argument("--quick", action="store_true", help="4 chunks of 2 programs of 100")
    ap.add_argument("--out", default=str(ROOT / "build" / "bench-harness.json"))
    args = ap.parse_args(argv)
    if args.quick:
        args.examples, args.steps = 2, 100
    os.environ["EPOCHGC_CONFORMANCE_SPARK"] = "0"
    os.environ.setdefault("EPOCHGC_CONFORMANCE_PROFILE", "deep")
    sys.path.insert(0, str(ROOT))
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    disk = tempfile.gettempdir()
    base = _measure(args.chunks, args.examples, args.steps, False, disk, False)
    now = _measure(args.chunks, args.examples, args.steps, True, shm, True)
    # The code changes alone, at the old check frequency (Raft checks after every event).
    same = _measure(args.chunks, args.examples, args.steps, False, shm, True)
    same_rate = same[0] / same[1]
    rate, base_rate = now[0] / now[1], base[0] / base[1]
    wall_rate, base_wall = now[0] / now[2], base[0] / base[2]
    rows = [
        {"name": "harness steps/s/core", "value": round(rate, 1), "unit": "steps/CPU-s",
         "baseline": round(base_rate, 1), "ratio": round(rate / base_rate, 3),
         "target": TARGET, "better": "higher"},
        {"name": "harness steps/s/core, Raft checks after every event (code changes only)",
         "value": round(same_rate, 1), "unit": "steps/CPU-s", "baseline": round(base_rate, 1),
         "ratio": round(same_rate / base_rate, 3), "target": None, "better": "higher"},
        {"name": "harness steps/s (wall, one process)", "value": round(wall_rate, 1),
         "unit": "steps/s", "baseline": round(base_wall, 1),
         "ratio": round(wall_rate / base_wall, 3), "target": None, "better": "higher"},
        {"name": "harness steps measured", "value": now[0], "unit": "steps",
         "baseline": base[0], "ratio": None, "target": None, "better": "higher"},
        *_deep_rows(),
    ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2) + "\n")
    load = os.getloadavg()[0]
    print(f"deep mix: {now[0]} steps, {rate:.0f} steps/CPU-s ({wall_rate:.0f}/s wall); code"
          f" changes only (per-event Raft checks): {same_rate:.0f} steps/CPU-s; before"
          f" (per-event Raft checks, store on disk): {base[0]} steps, {base_rate:.0f}"
          f" steps/CPU-s ({base_wall:.0f}/s wall); ratio {rate / base_rate:.2f}; target"
          f" {TARGET:.0f}; load average {load:.1f} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
