"""The deep conformance run (`tox -e deep`): a million harness steps over parallel workers.

Each worker is its own process running the Hypothesis state machine in chunks; chunk k of
worker w has seed `base + w + k * workers` (derandomized: a chunk's programs are a function of
its seed, so a finding is replayed with `--replay SEED`). Every `--event-share`-th chunk runs
the Raft core's invariants after every simulator event, the others once per harness step
(apply-time state-machine safety runs on every apply either way); the default is every chunk
(a check compares only the replicas an event gave an input and verifies only the log entries
appended since, so checking after every event costs ~3% more than once per step). The parent
stops handing out work once `--steps` are reached or `--seconds` are spent, writes the progress
JSON after every chunk (a run cut short still says how far it got) and prints the coverage
table at the end.

    python -m tests.conformance.deep --steps 1000000 --json build/deep.json  # a worker per core
    python -m tests.conformance.deep --replay 17          # one chunk, in this process
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _setup_worker(spark_budget: int) -> None:
    os.environ.setdefault("EPOCHGC_CONFORMANCE_PROFILE", "deep")
    if spark_budget == 0:
        os.environ["EPOCHGC_CONFORMANCE_SPARK"] = "0"
    import tempfile

    from tests.conformance import machine
    from tests.conformance.harness import TMP_BASE

    machine.SPARK_BUDGET = spark_budget
    if TMP_BASE is not None:
        # The GC tasks' spool files (two per in-process round) where the harness keeps its
        # store and simulated disks (tmpfs), not on the machine's disk.
        tempfile.tempdir = TMP_BASE


_TESTS: dict[tuple[int, int, bool], Any] = {}  # (examples, step count, shrink) -> the test


def run_chunk(seed: int, examples: int, step_count: int, raft_check: str,
              shrink: bool = True) -> dict[str, Any]:
    """One chunk of programs with a fixed seed; the STATS it added and any failure.

    The deep run's chunks do not shrink (`shrink=False`): a shrink's steps would count as
    harness steps (one failing chunk once counted 94,610) and spend the run's time; the
    failure's `--replay SEED` shrinks it."""
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis import seed as hseed
    from hypothesis.stateful import get_state_machine_test

    from tests.conformance import harness
    from tests.conformance.harness import STATS
    from tests.conformance.machine import ConformanceMachine

    harness.RAFT_CHECK = raft_check
    before = Counter(STATS)
    t, c = time.monotonic(), time.process_time()
    failure = None
    try:
        # Built once per size: building one digests the machine's whole source (~0.1 s).
        test = _TESTS.get((examples, step_count, shrink))
        if test is None:
            cfg = settings(
                max_examples=examples, stateful_step_count=step_count, deadline=None,
                derandomize=False, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.data_too_large],
                phases=[Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else []),
            )
            test = _TESTS[(examples, step_count, shrink)] = get_state_machine_test(
                ConformanceMachine, settings=cfg, _flaky_state={"selecting_rule": False})
        hseed(seed)(test)()
    except Exception as e:  # a finding is reported, the run goes on
        # The error's own line first: the tail alone (a long falsifying program) once cut
        # it off, leaving findings without their message.
        failure = (f"{type(e).__name__}: {str(e)[:2000]}\n"
                   + "".join(traceback.format_exception(e))[-6000:])
    delta = Counter(STATS)
    delta.subtract(before)
    return {"seed": seed, "raft_check": raft_check, "wall": time.monotonic() - t,
            "cpu": time.process_time() - c, "stats": {k: v for k, v in delta.items() if v},
            "failure": failure}


def _orphan_watch(parent: int) -> None:
    """A worker whose driver died (killed, not stopped) exits rather than run on alone."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(3)


def _worker(w: int, args: argparse.Namespace, spark_budget: int, out: Any, stop: Any,
            parent: int) -> None:
    threading.Thread(target=_orphan_watch, args=(parent,), daemon=True).start()
    _setup_worker(spark_budget)
    k = 0
    while not stop.is_set():
        seed = args.seed + w + k * args.workers
        raft_check = "event" if args.event_share and k % args.event_share == 0 else "step"
        res = run_chunk(seed, args.examples, args.step_count, raft_check, shrink=False)
        res["worker"] = w
        out.put(res)
        k += 1
    out.put({"worker": w, "done": True})


def _cores() -> int:
    """The cores this process may run on (the affinity mask, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 2


def _loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def _heartbeat_tick() -> int:
    """The simulated Raft timing the workers run (their environment is this process's): a
    finding replays only under the same one."""
    from tests.conformance.harness import RAFT_CONFIG

    return int(RAFT_CONFIG.heartbeat_tick)


def _report(args: argparse.Namespace, chunks: list[dict[str, Any]], total: Counter[str],
            t0: float, loads: list[float], finished: bool) -> dict[str, Any]:
    from tests.conformance.coverage import events, rule_names, table

    wall = time.monotonic() - t0
    steps = total.get("steps", 0)
    cpu = sum(c["cpu"] for c in chunks)
    lines, warnings = table(total, rule_names())
    per_cpu = steps / cpu if cpu else 0.0
    return {
        "finished": finished, "target_steps": args.steps, "steps": steps,
        "examples": total.get("examples", 0), "chunks": len(chunks), "workers": args.workers,
        "wall_s": round(wall, 1), "steps_per_s": round(steps / wall, 1) if wall else 0.0,
        "cpu_s": round(cpu, 1), "steps_per_cpu_s": round(per_cpu, 1),
        # A quiet machine gives each worker a whole core: the time at this per-core rate.
        "projected_quiet_wall_s": round(args.steps / (per_cpu * args.workers), 1)
        if per_cpu else None,
        "loadavg_mean_1min": round(sum(loads) / len(loads), 2) if loads else None,
        "loadavg_end": _loadavg(),
        "failures": [{"seed": c["seed"], "worker": c["worker"], "raft_check": c["raft_check"],
                      "failure": c["failure"]} for c in chunks if c["failure"]],
        "events": events(total), "coverage_warnings": warnings, "coverage_table": lines,
        "stats": dict(sorted(total.items())),
        "settings": {"examples_per_chunk": args.examples, "step_count": args.step_count,
                     "seed": args.seed, "event_share": args.event_share,
                     "spark_budget": args.spark, "heartbeat_tick": _heartbeat_tick()},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1_000_000, help="harness steps to reach")
    ap.add_argument("--workers", type=int, default=_cores(),
                    help="parallel worker processes (default: one per core)")
    ap.add_argument("--examples", type=int, default=5, help="programs per chunk")
    ap.add_argument("--step-count", type=int, default=200, help="max rules per program")
    ap.add_argument("--seed", type=int, default=0, help="base seed")
    ap.add_argument("--event-share", type=int, default=1,
                    help="every Nth chunk checks Raft invariants after every simulator event"
                         " (1: every chunk, the default; 0: never)")
    ap.add_argument("--spark", type=int, default=8,
                    help="real PySpark GC rounds in the run (all in worker 0: one JVM)")
    ap.add_argument("--seconds", type=float, default=None, help="stop handing out chunks after")
    ap.add_argument("--json", default=str(ROOT / "build" / "deep.json"))
    ap.add_argument("--replay", type=int, default=None, help="run the chunk of this seed here")
    ap.add_argument("--raft-check", default="step", choices=["step", "event"],
                    help="with --replay: step or event")
    args = ap.parse_args(argv)
    if args.replay is not None:
        _setup_worker(args.spark)
        res = run_chunk(args.replay, args.examples, args.step_count, args.raft_check)
        print(res["failure"] or f"seed {args.replay}: passed ({res['stats'].get('steps')} steps)")
        return 1 if res["failure"] else 0

    ctx = mp.get_context("spawn")  # no JVM or event loop inherited by a fork
    out, stop = ctx.Queue(), ctx.Event()
    # Worker 0 runs every Spark round: one JVM (a session costs ~20 s of CPU to start, and
    # its idle threads a little more until the budget is spent and it stops).
    procs = [ctx.Process(target=_worker,
                         args=(w, args, args.spark if w == 0 else 0, out, stop, os.getpid()),
                         daemon=True) for w in range(args.workers)]
    # SIGTERM ends the run like Ctrl-C: the finally below stops and reaps the workers.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    t0 = time.monotonic()
    for p in procs:
        p.start()
    chunks: list[dict[str, Any]] = []
    total: Counter[str] = Counter()
    loads: list[float] = []
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    running = len(procs)
    try:
        while running:
            res = out.get()
            if res.get("done"):
                running -= 1
                continue
            chunks.append(res)
            total.update(res["stats"])
            loads.append(os.getloadavg()[0])
            steps, wall = total.get("steps", 0), time.monotonic() - t0
            late = args.seconds is not None and wall >= args.seconds
            if steps >= args.steps or late:
                stop.set()
            print(f"[{wall:7.0f}s] worker {res['worker']} seed {res['seed']}"
                  f" ({res['raft_check']}): {res['stats'].get('steps', 0)} steps in"
                  f" {res['wall']:.0f}s, total {steps} ({steps / wall:.0f}/s)"
                  + ("  FAILED" if res["failure"] else ""), flush=True)
            rep = _report(args, chunks, total, t0, loads, False)
            path.write_text(json.dumps(rep, indent=1) + "\n")
    finally:
        stop.set()
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.terminate()
    rep = _report(args, chunks, total, t0, loads, total.get("steps", 0) >= args.steps)
    path.write_text(json.dumps(rep, indent=1) + "\n")
    print("\n".join(rep["coverage_table"]))
    for f in rep["failures"]:
        print(f"\nFAILURE (replay: EPOCHGC_CONFORMANCE_HEARTBEAT_TICK={_heartbeat_tick()}"
              f" python -m tests.conformance.deep --replay {f['seed']}"
              f" --examples {args.examples} --step-count {args.step_count}"
              f" --raft-check {f['raft_check']}):\n{f['failure']}")
    print(f"\n{rep['steps']} steps ({rep['examples']} programs) in {rep['wall_s']} s:"
          f" {rep['steps_per_s']} steps/s, {rep['steps_per_cpu_s']} steps per CPU-second per"
          f" worker; load average {rep['loadavg_mean_1min']}; projected on a quiet"
          f" {args.workers}-core machine: {rep['projected_quiet_wall_s']} s; -> {path}")
    if rep["coverage_warnings"]:
        print(f"WARNING: {rep['coverage_warnings']} rules or events never happened")
    return 1 if rep["failures"] or not rep["finished"] else 0


if __name__ == "__main__":
    sys.exit(main())
