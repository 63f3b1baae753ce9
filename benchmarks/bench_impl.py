"""Implementation benchmark (not a timed test): the fence's cost over the Raft core, produce
latency, and the simulator's speed.

  python benchmarks/bench_impl.py [--quick] [--out build/bench-impl.json]

Rows (JSON list of {"name","value","unit","baseline","ratio","target","better"}):
  fence_replicate_per_s   one partition on a 3-process loopback cluster: placeholders fenced
                          and replicated per second, pipelined (W requests in flight on one
                          connection to the leader). Baseline, in the same run and cluster:
                          the same placeholder bytes proposed straight to the Raft core
                          (expected-term, no sync/lock/fence; `--bench-ops`). Phases
                          alternate; the median of each is reported. Target ratio >= 0.8.
  produce_latency_p50/p99 full produce of one batch (L0 upload to the local-directory store,
                          fence, replicate, commit) to one partition, 4 producers at once.
  fence_latency_p50/p99   one pipelined fence+replicate request, from the first phase.
  sim_records_per_wall_s  records produced per wall second on the in-process simulator
                          (3 nodes, 4 partitions, 8 records per partition per batch).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from epochgc.impl.broker.producer import Producer  # noqa: E402
from epochgc.impl.broker.raftport import thread_io  # noqa: E402
from epochgc.impl.cluster.client import ProcClusterAccess  # noqa: E402
from epochgc.impl.cluster.local import LocalCluster  # noqa: E402
from epochgc.impl.cluster.rpc import RpcClient  # noqa: E402
from epochgc.impl.sim.cluster import SimCluster  # noqa: E402
from epochgc.impl.store.local import LocalStore  # noqa: E402

PART = "b/0"
KEY = "level_zero/data/000/" + "0" * 18 + "/" + "b" * 32  # same shape as a real key


def row(name: str, value: float, unit: str, baseline: float | None = None,
        target: float | None = None, better: str = "higher") -> dict[str, Any]:
    ratio = value / baseline if baseline else None
    return {"name": name, "value": round(value, 3), "unit": unit,
            "baseline": None if baseline is None else round(baseline, 3),
            "ratio": None if ratio is None else round(ratio, 3), "target": target,
            "target_of": None if target is None else "ratio" if ratio is not None else "value",
            "better": better}


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


async def leader_and_epoch(access: ProcClusterAccess) -> tuple[int, int]:
    for _ in range(300):
        try:
            meta = await access.any_call(op="meta")
            info = meta["partitions"].get(PART)
            epoch = await access.cluster_epoch()
            if info and info["leader"] and epoch:
                return int(info["leader"]), epoch
        except ConnectionError:
            pass
        await asyncio.sleep(0.1)
    raise TimeoutError("no leader")


async def phase(client: RpcClient, op: str, epoch: int, n: int, window: int) -> tuple[float,
                                                                                      list[float]]:
    """n requests, `window` in flight; returns (ops/s, latencies in s)."""
    lat: list[float] = []
    todo = iter(range(n))

    async def worker() -> None:
        for _ in todo:
            t = time.perf_counter()
            r = await client.call(op=op, partition=PART, epoch=epoch, key=KEY, start=0, end=64,
                                  count=1)
            if r["status"] != "ok":
                raise RuntimeError(f"{op}: {r}")
            lat.append(time.perf_counter() - t)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(window)))
    return n / (time.perf_counter() - t0), lat


async def cluster_bench(lc: LocalCluster, store: LocalStore, quick: bool) -> list[dict[str, Any]]:
    access = ProcClusterAccess(lc.client_addrs())
    try:
        leader, epoch = await leader_and_epoch(access)
        host, port = lc.client_addrs()[leader]
        client = await RpcClient.connect(host, port)
        n, window, rounds = (600, 32, 3) if quick else (3000, 64, 5)
        await phase(client, "replicate", epoch, n // 4, window)  # warm-up: slide, sync
        await phase(client, "bench_propose", epoch, n // 4, window)
        fenced: list[float] = []
        raw: list[float] = []
        fence_lat: list[float] = []
        for _ in range(rounds):  # alternate, so drift hits both sides alike
            ops, lat = await phase(client, "replicate", epoch, n, window)
            fenced.append(ops)
            fence_lat += lat
            raw.append((await phase(client, "bench_propose", epoch, n, window))[0])
        await client.close()

        # Produce latency: whole produce calls, 4 producers concurrently.
        lats: list[float] = []
        count = 40 if quick else 200

        async def producer(i: int) -> None:
            prod = Producer(access, store, thread_io, random.Random(i))
            for j in range(count // 4):
                t = time.perf_counter()
                await prod.produce({PART: [b"r%d-%d-%d" % (i, j, k) for k in range(8)]})
                lats.append(time.perf_counter() - t)

        await asyncio.gather(*(producer(i) for i in range(4)))
    finally:
        await access.close()
    f, r = statistics.median(fenced), statistics.median(raw)
    return [
        row("fence_replicate_per_s", f, "placeholders/s", r, 0.8),
        row("fence_latency_p50", pct(fence_lat, 0.5) * 1e3, "ms", better="lower"),
        row("fence_latency_p99", pct(fence_lat, 0.99) * 1e3, "ms", better="lower"),
        row("produce_latency_p50", pct(lats, 0.5) * 1e3, "ms", better="lower"),
        row("produce_latency_p99", pct(lats, 0.99) * 1e3, "ms", better="lower"),
    ]


def sim_bench(quick: bool) -> dict[str, Any]:
    parts = ("t/0", "t/1", "t/2", "t/3")
    with tempfile.TemporaryDirectory() as d:
        c = SimCluster(seed=1, partitions=parts, store=LocalStore(d, create=True))
        c.bootstrap()
        batches = 30 if quick else 200
        t0 = time.perf_counter()
        for i in range(batches):
            c.produce({p: [b"%d-%d" % (i, k) for k in range(8)] for p in parts})
        wall = time.perf_counter() - t0
    return row("sim_records_per_wall_s", batches * len(parts) * 8 / wall, "records/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a small run (about a minute)")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench-impl.json"))
    args = ap.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-impl-") as tmp:
        store = LocalStore(os.path.join(tmp, "store"), create=True)
        lc = LocalCluster(os.path.join(tmp, "c"))
        # Mints every 5 s slide the window now and then, as in production; the 0.1 s tick
        # is the production default (node_main's 0.05 s is for fast tests).
        lc.init(3, str(store.root), [PART], 5.0, extra=["--bench-ops", "--tick", "0.1"])
        try:
            for nid in lc.ids:
                lc.start(nid)
            rows += asyncio.run(cluster_bench(lc, store, args.quick))
        finally:
            lc.stop_all()
    rows.append(sim_bench(args.quick))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)
    for r in rows:
        extra = f"  baseline {r['baseline']}  ratio {r['ratio']}" if r["baseline"] else ""
        print(f"{r['name']:26} {r['value']:>12} {r['unit']}{extra}")


if __name__ == "__main__":
    main()
