"""Conformance-harness throughput: model-and-implementation steps per second (Spark excluded).

Runs the Hypothesis state machine (the real rules and every per-step check) with the
`bench` settings for a fixed number of programs and divides the steps the harness checked by
the wall time. Writes build/bench-harness.json in the benchmark row format.

    PYTHONPATH=. python benchmarks/bench_harness.py [--examples N] [--steps N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = 300.0  # steps/s: a million steps of the deep profile in under an hour


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=60)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--quick", action="store_true", help="20 programs")
    ap.add_argument("--out", default=str(ROOT / "build" / "bench-harness.json"))
    args = ap.parse_args(argv)
    if args.quick:
        args.examples = 20
    os.environ["EPOCHGC_CONFORMANCE_SPARK"] = "0"
    sys.path.insert(0, str(ROOT))
    from hypothesis import HealthCheck, settings
    from hypothesis.stateful import run_state_machine_as_test

    from tests.conformance import harness
    from tests.conformance.harness import STATS
    from tests.conformance.machine import ConformanceMachine

    cfg = settings(max_examples=args.examples, stateful_step_count=args.steps, deadline=None,
                   derandomize=True, database=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                          HealthCheck.data_too_large])

    def measure(raft_check: str) -> tuple[int, float]:
        """The same derandomized programs; Raft invariants once per harness step (the ci
        profile) or after every simulator event (the deep profile)."""
        harness.RAFT_CHECK = raft_check
        before = STATS["steps"]
        t = time.perf_counter()
        run_state_machine_as_test(ConformanceMachine, settings=cfg)
        return STATS["steps"] - before, time.perf_counter() - t

    steps, secs = measure("step")
    base_steps, base_secs = measure("event")  # the baseline, in the same command
    rate, base = steps / secs, base_steps / base_secs
    rows = [
        {"name": "harness_steps_per_s", "value": round(rate, 1), "unit": "steps/s",
         "baseline": None, "ratio": None, "target": TARGET, "better": "higher"},
        {"name": "harness_steps_per_s_vs_per_event_raft_checks", "value": round(rate, 1),
         "unit": "steps/s", "baseline": round(base, 1), "ratio": round(rate / base, 3),
         "target": None, "better": "higher"},
        {"name": "harness_steps", "value": steps, "unit": "steps", "baseline": None,
         "ratio": None, "target": None, "better": "higher"},
    ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"{steps} steps in {secs:.1f}s: {rate:.0f} steps/s (target {TARGET:.0f}); with Raft "
          f"checks after every simulator event: {base:.0f} steps/s -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
