"""What a restart costs now that recovery reads what the device holds (issue 37, F1).

  python benchmarks/bench_restart.py [--quick] [--mib 256] [--entry-bytes 1024] [--runs 3]

One group's disk log of about `--mib` MiB (64 MiB segments, on the file system of
`--dir`, default build/: a disk, not tmpfs) is written and synced once; then
`DiskStorage.load()` is timed `--runs` times, alternating, in two ways:

  durable   the default FileIO: each file fsynced, dropped from the page cache and read
            with O_DIRECT (`FileIO.read_durable`), so a write-back that failed before the
            restart cannot pass for data on the disk;
  cached    the same load reading through the page cache (what load() did before F1's fix;
            after a clean restart the cache is warm, so this is its best case).

Row: load seconds per GiB, durable against cached (lower is better; no target: it is the
price of F1's fix, and a restart is rare). The durable read is cold by construction, so the
ratio is roughly the device's read speed against memory's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from epochgc.impl.raft.disklog import DiskStorage  # noqa: E402
from epochgc.impl.raft.fileio import OsFileIO  # noqa: E402
from epochgc.impl.raft.messages import Entry, HardState  # noqa: E402


class CachedReads(OsFileIO):
    """The page cache's view: what load() read before the fix (the baseline only)."""

    def read_durable(self, path: str) -> bytes:
        return self.read(path)


def write_log(directory: str, mib: int, entry_bytes: int) -> int:
    s = DiskStorage(directory)
    s.load()
    n = (mib << 20) // entry_bytes
    payload = os.urandom(entry_bytes)
    batch = 4096
    for start in range(1, n + 1, batch):
        entries = [Entry(i, 1, data=payload) for i in range(start, min(n, start + batch - 1) + 1)]
        s.write(HardState(term=1, vote=1, commit=entries[-1].index) if start == 1 else None,
                None, entries)
        s.sync()
    s.close()
    return n


def load_seconds(directory: str, fs: OsFileIO, entries: int) -> float:
    t = time.perf_counter()
    s = DiskStorage(directory, fs=fs)
    state = s.load()
    elapsed = time.perf_counter() - t
    assert len(state.entries) == entries, (len(state.entries), entries)
    s.close()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="32 MiB, 2 runs")
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--entry-bytes", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench-restart.json"))
    args = ap.parse_args()
    if args.quick:
        args.mib, args.runs = 32, 2
    os.makedirs(args.dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="bench-restart-", dir=args.dir)
    try:
        directory = os.path.join(work, "g1")
        n = write_log(directory, args.mib, args.entry_bytes)
        size = sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))
        got: dict[str, list[float]] = {"durable": [], "cached": []}
        for k in range(args.runs):
            order = [("durable", OsFileIO()), ("cached", CachedReads())]
            for name, fs in order[k % 2:] + order[:k % 2]:
                got[name].append(load_seconds(directory, fs, n))
            print(json.dumps({"run": k, **{m: round(v[-1], 3) for m, v in got.items()}}),
                  flush=True)
        gib = size / (1 << 30)
        durable = statistics.median(got["durable"]) / gib
        cached = statistics.median(got["cached"]) / gib
        row = {
            "name": "restart_load_s_per_gib_durable_vs_cached",
            "value": round(durable, 3), "unit": "s per GiB of log",
            "baseline": round(cached, 3), "ratio": round(durable / cached, 3),
            "target": None, "target_of": None, "better": "lower",
            "entries": n, "bytes": size, "runs": args.runs,
            "durable_s": [round(x, 3) for x in got["durable"]],
            "cached_s": [round(x, 3) for x in got["cached"]],
        }
        print(json.dumps(row), flush=True)
        with open(args.out, "w") as f:
            json.dump([row], f, indent=2)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
