"""Seeded bugs for `epochgc chaos`: each patched into a copy of the tree, then a chaos run
on the copy must exit 1 with the named count non-zero (the checks catch real bugs, so the
zeros of a clean run mean something). Minutes per mutant: not in the default test run.

    python -m tests.chaos.mutants [--seconds 60] [--only NAME] [--gc-engine model]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from epochgc.proofs.mutate import Mutant, copy_tree, patch, run_command

ROOT = Path(__file__).resolve().parents[2]

MUTANTS = (
    (Mutant(
        "ignore-failed-fsync", "the disk log swallows a failed fsync and keeps acknowledging",
        "impl/raft/disklog.py",
        "        except OSError as e:\n            raise self.fail(e) from e\n\n"
        "    def post_barrier",
        "        except OSError:\n            pass  # MUTANT\n\n    def post_barrier",
    ), "survived_disk_faults"),
    (Mutant(
        "ack-before-fsync", "the Raft batch is fsynced in the background: replies, commits "
        "and acknowledgements go out before it is durable (and its errors are lost)",
        "impl/raft/host.py",
        "        sync_all(list(to_sync.values()))\n",
        "        __import__('threading').Thread(  # MUTANT\n"
        "            target=sync_all, args=(list(to_sync.values()),), daemon=True).start()\n",
    ), "lost|raft_divergences|trace_divergences|survived_disk_faults"),
    (Mutant(
        "housekeeper-past-placeholder", "the housekeeper moves LRLO past unreconciled "
        "placeholders (GC may then delete objects still referenced)",
        "impl/partition/statemachine.py",
        "        return pending[0].log_index - 1 if pending else self.last_index",
        "        return self.last_index  # MUTANT",
    ), "in_use_deleted|lost"),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", default="60")
    ap.add_argument("--seed", default="3")
    ap.add_argument("--only", default=None)
    ap.add_argument("--gc-engine", default="auto")
    args = ap.parse_args()
    killed = 0
    todo = [(m, want) for m, want in MUTANTS if args.only in (None, m.name)]
    for m, want in todo:
        with tempfile.TemporaryDirectory(prefix="epochgc-chaosmut-") as d:
            root = Path(d)
            copy_tree(ROOT, root, ["epochgc", "impl", "model", "proofs"])
            patch(root, m)
            env = dict(os.environ, PYTHONPATH=str(root))
            out = root / "out"
            code, text, secs = run_command(
                [sys.executable, "-m", "epochgc.impl.cli", "chaos", "--seconds", args.seconds,
                 "--seed", args.seed, "--json", "--out", str(out), "--gc-engine",
                 args.gc_engine], root, env, float(args.seconds) + 300)
            keep = ROOT / "build" / "chaos-mutants"
            keep.mkdir(parents=True, exist_ok=True)
            if (out / "history.txt").exists():
                shutil.copy(out / "history.txt", keep / f"{m.name}.history.txt")
            try:
                res = json.loads((out / "result.json").read_text())
            except (OSError, ValueError):
                res = {}
            hit = {k: res[k] for k in want.split("|") if res.get(k)}
            ok = code == 1 and bool(hit)
            killed += ok
            print(f"{m.name}: {'KILLED' if ok else 'SURVIVED'} exit={code} {hit or ''} "
                  f"in {secs:.0f}s ({m.what})", flush=True)
            if not ok:
                print(text[-3000:], flush=True)
    print(f"chaos mutants killed: {killed}/{len(todo)}")
    sys.exit(0 if killed == len(todo) else 1)


if __name__ == "__main__":
    main()
