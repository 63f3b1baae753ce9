"""How fast a GC round's executors stop deleting once their driver is killed (issue 38
item 1: `kill -9` of the driver mid-round; the executors deleted 66 more keys in the 5 s
after it died, in no record).

A real `epochgc gc` process (local master, its own JVM and Python workers, a local-directory
store) deletes `--keys` keys in batches of `--batch`; once `--kill-at` of them are gone it is
killed with SIGKILL. The bench then watches the store until every process of the round has
exited and reports, per run, from the round's own journal: delete batches begun after the
kill (an intent dated after it) and their keys, seconds from the kill to the last batch's
`done`, and seconds until the round's last process (JVM, Python workers) exited.
Run it against this tree and, as the baseline in the same command, another checkout
(`--baseline-tree`, e.g. a worktree of the commit before the fix). A measurement, not a
test: the kill lands wherever the round happens to be.

    python benchmarks/bench_driver_kill.py --baseline-tree /tmp/old --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HOUR = 3600.0


def make_store(root: Path, keys: int) -> None:
    now = time.time()
    (root / "_cluster/health").mkdir(parents=True)
    (root / "_cluster/partitions.json").write_text(json.dumps(
        {"revision": 10**6, "partitions": ["t/0"], "created": {"t/0": 1}}))
    (root / "_cluster/health/n1.json").write_text(json.dumps(
        {"node": "n1", "written_at": now,
         "replicas": [{"partition": "t/0", "term": 1, "inactive_epoch": 10, "created": 1}]}))
    old = now - 13 * HOUR
    per = -(-keys // 1000)
    n = 0
    for p in range(1000):
        d = root / f"level_zero/data/{p:03d}/{5:018d}"
        d.mkdir(parents=True)
        for i in range(per):
            if n == keys:
                break
            f = d / f"k{i:06d}"
            f.write_bytes(b"")
            os.utime(f, (old, old))
            n += 1


def count(root: Path) -> int:
    n = 0
    for _dirpath, _dirs, files in os.walk(root / "level_zero"):
        n += len(files)
    return n


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def journal_after(root: Path, killed_ns: int) -> tuple[int, int, float]:
    """From the round's own journal: (batches begun after the kill, keys in them, seconds
    from the kill to the last `done` written). An intent is written before its request, so
    one dated after the kill is a batch its task started with the driver already dead; the
    batch in flight at the kill (at most one per task here) is legitimately finished."""
    begun = keys = 0
    last_ns = killed_ns
    for path in (root / "_cluster/gc/journal").rglob("*.json"):
        t = path.stat().st_mtime_ns
        if path.name.endswith(".intent.json") and t > killed_ns:
            begun += 1
            keys += len(json.loads(path.read_bytes())["keys"])
        if path.name.endswith(".done.json"):
            last_ns = max(last_ns, t)
    return begun, keys, (last_ns - killed_ns) / 1e9


def one(tree: Path, keys: int, batch: int, kill_at: int, limit_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="epochgc-kill-") as tmp:
        root = Path(tmp) / "store"
        make_store(root, keys)
        env = dict(os.environ, PYTHONPATH=str(tree))
        cmd = [sys.executable, "-m", "epochgc.impl.gc", "--store", str(root), "--tasks", "2",
               "--master", "local[2]", "--delete-batch-size", str(batch), "-q"]
        proc = subprocess.Popen(cmd, cwd=tree, env=env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        start = time.monotonic()
        try:
            while count(root) > keys - kill_at:
                if proc.poll() is not None or time.monotonic() - start > limit_s:
                    raise RuntimeError("the round ended (or hung) before the kill point")
                time.sleep(0.02)
            killed_ns = time.time_ns()  # the file system's clock: journal mtimes compare
            os.kill(proc.pid, signal.SIGKILL)
            killed = time.monotonic()
            proc.wait()  # reaped: a zombie still counts as a member of its process group
            while group_alive(proc.pid) and time.monotonic() - killed < limit_s:
                time.sleep(0.02)
            exited = time.monotonic()
        finally:
            proc.wait()
            if group_alive(proc.pid):
                os.killpg(proc.pid, signal.SIGKILL)
        begun, after, last_s = journal_after(root, killed_ns)
        return {"batches_begun_after_kill": begun, "keys_in_them": after,
                "last_done_after_s": round(last_s, 3),
                "all_exited_after_s": round(exited - killed, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=40000)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--kill-at", type=int, default=4000, help="keys gone when killed")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--baseline-tree", type=Path, default=None)
    ap.add_argument("--limit-s", type=float, default=300.0)
    a = ap.parse_args()
    trees = [("this tree", ROOT)] + ([("baseline", a.baseline_tree)] if a.baseline_tree else [])
    out: dict[str, Any] = {}
    for name, tree in trees:
        runs = [one(tree, a.keys, a.batch, a.kill_at, a.limit_s) for _ in range(a.runs)]
        out[name] = {"runs": runs} | {
            f"median_{k}": statistics.median(r[k] for r in runs)
            for k in ("batches_begun_after_kill", "keys_in_them", "last_done_after_s",
                      "all_exited_after_s")}
        print(name, json.dumps(out[name]), flush=True)
    print(json.dumps({"keys": a.keys, "batch": a.batch, "kill_at": a.kill_at, **out}))


if __name__ == "__main__":
    main()
