"""The crash-state explorer's counts, pinned per workload (issue 42): a checker bug that makes
it explore less (fewer crash points, fewer images, a crash inside recovery skipped, two
ground truths merged into one check) turns every crash test green; its counts drop, and the
pinned table says by how much.

The table (`crash_state_counts.json`, next to this file) holds, per run below, every
(workload, what) count of `crashexplore.Result.counts`. When the explorer or its models
change on purpose (a new persistence model, more crash points, a new workload), regenerate it
and review the diff:

    python -m tests.raft.crashcounts --write
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from tests.raft import crashexplore as cx

TABLE = Path(__file__).with_name("crash_state_counts.json")


def named() -> cx.Result:
    """Every named workload, each also with ENOSPC/EIO at every write and EIO at every
    fsync, both models, every crash inside each recovery (test_crash_states.py's
    `test_every_workload_every_crash_state_recovers_the_ground_truth`)."""
    return cx.explore_all(cx.WORKLOADS, True, in_recovery=True)


def generated() -> cx.Result:
    """Every sequence of 2 generated steps (but the conflict step), and of 1 with faults (a
    truncation on conflict too), without the crashes inside recovery
    (`test_generated_workloads_recover_the_ground_truth`)."""
    res = cx.explore_all(cx.generated_workloads(2, [n for n in cx.STEPS if n != "conflict"]),
                         False, in_recovery=False)
    res.merge(cx.explore_all(cx.generated_workloads(1), True, in_recovery=False))
    return res


RUNS: dict[str, Callable[[], cx.Result]] = {"named": named, "generated": generated}


def counts(res: cx.Result) -> dict[str, int]:
    """`workload: what` -> count, sorted (the table's form)."""
    return {f"{w}: {what}": n for (w, what), n in sorted(res.counts.items())}


def pinned(run: str) -> dict[str, int]:
    table: dict[str, dict[str, int]] = json.loads(TABLE.read_text())
    return table[run]


def differences(run: str, res: cx.Result) -> list[str]:
    """Each count that differs from the table, as `key: pinned -> now` (empty: the same)."""
    want, got = pinned(run), counts(res)
    return [f"{k}: {want.get(k, 0)} -> {got.get(k, 0)}"
            for k in sorted(set(want) | set(got)) if want.get(k, 0) != got.get(k, 0)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"rewrite {TABLE.name}")
    args = ap.parse_args(argv)
    results = {name: run() for name, run in RUNS.items()}
    if args.write:
        table = {name: counts(res) for name, res in results.items()}
        TABLE.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
        print(f"wrote {TABLE}")
        return 0
    bad = [f"{name}: {d}" for name, res in results.items() for d in differences(name, res)]
    print("\n".join(bad) or "every count equals the pinned table")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
