"""Implementation benchmark (not a timed test): the fence's cost over the Raft core, produce
latency, and the simulator's speed.

  python benchmarks/bench_impl.py [--quick] [--rounds N] [--requests N] [--fence-only]
                                  [--out FILE]

Rows (JSON list of {"name","value","unit","baseline","ratio","target","target_of","better"}):
  fence_replicate_per_s   one partition on a 3-process loopback cluster: placeholders fenced
                          and replicated per second, pipelined (W requests in flight on one
                          connection to the leader), all at one epoch (in window). Baseline,
                          in the same run and cluster: the same placeholder bytes proposed
                          straight to the Raft core (expected-term, no sync/lock/fence;
                          `--bench-ops`). Phases alternate; the median of each is reported.
                          The fence releases its lock once the placeholder is queued into
                          Raft (the default). Target ratio >= 0.95 (issue 30).
  fence_replicate_sliding_per_s  the same with a rising epoch: request i carries epoch
                          e0 + i // W, so the window slides every W requests and each slide
                          takes the exclusive lock; baseline: raw proposals of the same
                          epochs. Target ratio >= 0.95 (issue 30).
  *_cpu_us                the CPU time the three node processes used per placeholder in the
                          same phases (user + system, /proc), fenced vs raw: on a shared
                          machine a steadier view of the fence's cost than throughput.
  fence_replicate_hold_per_s, fence_replicate_hold_sliding_per_s  both again on a second
                          cluster whose fence holds the lock through the replicate
                          (`--hold-through-replicate`, the design notes' rule), each against
                          raw proposals on that cluster: what release at enqueue changes.
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


class Epochs:
    """The epoch each request carries: fixed, or rising by one every `every` requests (one
    counter across phases, so the window keeps sliding forward and nothing is stale)."""

    def __init__(self, start: int, every: int | None) -> None:
        self.start, self.every, self.sent = start, every, 0

    def next(self) -> int:
        i, self.sent = self.sent, self.sent + 1
        return self.start if self.every is None else self.start + i // self.every


async def phase(client: RpcClient, op: str, epochs: Epochs, n: int, window: int) -> tuple[
        float, list[float]]:
    """n requests, `window` in flight; returns (ops/s, latencies in s)."""
    lat: list[float] = []
    todo = iter(range(n))

    async def worker() -> None:
        for _ in todo:
            t = time.perf_counter()
            r = await client.call(op=op, partition=PART, epoch=epochs.next(), key=KEY, start=0,
                                  end=64, count=1)
            if r["status"] in ("failed", "not_leader"):
                raise LeaderMoved(f"{op}: {r}")
            if r["status"] != "ok":
                raise RuntimeError(f"{op}: {r}")
            lat.append(time.perf_counter() - t)

    t0 = time.perf_counter()
    try:
        async with asyncio.TaskGroup() as tg:  # one failure cancels the other workers
            for _ in range(window):
                tg.create_task(worker())
    except* LeaderMoved as eg:
        raise eg.exceptions[0] from None
    return n / (time.perf_counter() - t0), lat


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds the processes have used so far (Linux /proc)."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / os.sysconf("SC_CLK_TCK")


class LeaderMoved(Exception):
    """The partition's leadership moved during a phase (an election on a loaded machine):
    the phase pair is run again at the new leader."""


async def fence_bench(lc: LocalCluster, quick: bool, rounds: int | None, hold: bool,
                      requests: int | None = None) -> tuple[list[dict[str, Any]], list[float]]:
    """Fenced vs raw phases, alternating, at one epoch and with a rising one; returns the rows
    (named for the fence's release point) and the first kind's fenced latencies."""
    access = ProcClusterAccess(lc.client_addrs())
    client: RpcClient | None = None

    async def connect() -> tuple[RpcClient, int]:
        nonlocal client
        if client is not None:
            await client.close()
        leader, epoch = await leader_and_epoch(access)
        host, port = lc.client_addrs()[leader]
        client = await RpcClient.connect(host, port)
        return client, epoch

    try:
        client, epoch = await connect()
        n, window, r = (600, 32, 3) if quick else (3000, 64, 5)
        rounds, n = rounds or r, requests or n
        fixed = Epochs(epoch, None)
        await phase(client, "replicate", fixed, n // 4, window)  # warm-up: slide, sync
        await phase(client, "bench_propose", fixed, n // 4, window)
        # One rising stream for both sides: it starts above everything sent so far.
        rising = Epochs(epoch + 1, window)
        got: dict[str, tuple[list[float], list[float]]] = {}
        got_cpu: dict[str, tuple[list[float], list[float]]] = {}
        pids = [int(lc.meta["pids"][str(nid)]) for nid in lc.ids]
        fence_lat: list[float] = []
        for kind, epochs in (("", fixed), ("_sliding", rising)):
            fenced: list[float] = []
            raw: list[float] = []
            fenced_cpu: list[float] = []
            raw_cpu: list[float] = []
            for _ in range(rounds):  # alternate, so drift hits both sides alike
                for attempt in range(5):
                    try:
                        c0 = cpu_seconds(pids)
                        ops, lat = await phase(client, "replicate", epochs, n, window)
                        c1 = cpu_seconds(pids)
                        base = (await phase(client, "bench_propose", epochs, n, window))[0]
                        c2 = cpu_seconds(pids)
                        break
                    except LeaderMoved as e:
                        if attempt == 4:
                            raise
                        print(f"leadership moved ({e}); the pair runs again", file=sys.stderr)
                        await asyncio.sleep(1.0)  # let the election settle
                        client, _ = await connect()
                fenced.append(ops)
                raw.append(base)
                fenced_cpu.append((c1 - c0) / n * 1e6)
                raw_cpu.append((c2 - c1) / n * 1e6)
                if not kind:
                    fence_lat += lat
            got[kind] = (fenced, raw)
            got_cpu[kind] = (fenced_cpu, raw_cpu)
    finally:
        if client is not None:
            await client.close()
        await access.close()
    rows = []
    for kind, (fenced, raw) in got.items():
        name = "fence_replicate" + ("_hold" if hold else "") + kind + "_per_s"
        rows.append(row(name, statistics.median(fenced), "placeholders/s",
                        statistics.median(raw), None if hold else 0.95))
        rows[-1]["runs"] = runs(fenced, raw)
        fc, rc = got_cpu[kind]
        rows.append(row(name.replace("_per_s", "_cpu_us"), statistics.median(fc),
                        "CPU us/placeholder (3 nodes)", statistics.median(rc), better="lower"))
        rows[-1]["runs"] = runs(fc, rc)
    return rows, fence_lat


def runs(xs: list[float], bases: list[float]) -> dict[str, Any]:
    """Each phase pair's figures and ratio (min, median and max of the ratios show the
    spread the medians hide)."""
    ratios = [x / b for x, b in zip(xs, bases, strict=True)]
    return {"values": [round(x, 1) for x in xs], "baselines": [round(b, 1) for b in bases],
            "ratios": [round(r, 3) for r in ratios],
            "ratio_min_median_max": [round(min(ratios), 3),
                                     round(statistics.median(ratios), 3),
                                     round(max(ratios), 3)]}


async def produce_bench(lc: LocalCluster, store: LocalStore, quick: bool) -> list[dict[str, Any]]:
    """Produce latency: whole produce calls, 4 producers concurrently."""
    access = ProcClusterAccess(lc.client_addrs())
    try:
        await leader_and_epoch(access)
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
    return [
        row("produce_latency_p50", pct(lats, 0.5) * 1e3, "ms", better="lower"),
        row("produce_latency_p99", pct(lats, 0.99) * 1e3, "ms", better="lower"),
    ]


def run_cluster(tmp: str, name: str, hold: bool, args: argparse.Namespace,
                store: LocalStore) -> list[dict[str, Any]]:
    lc = LocalCluster(os.path.join(tmp, name))
    # Mints every 5 s, as in production (they do not move this partition's window: its
    # placeholders carry their own epochs); the 0.1 s tick is the production default
    # (node_main's 0.05 s is for fast tests); a longer one (--tick) makes elections rarer on
    # a loaded machine (proposals do not wait for ticks).
    extra = ["--bench-ops", "--tick", str(args.tick)] + (
        ["--hold-through-replicate"] if hold else [])
    lc.init(3, str(store.root), [PART], 5.0, extra=extra)
    try:
        for nid in lc.ids:
            lc.start(nid)
        rows, fence_lat = asyncio.run(fence_bench(lc, args.quick, args.rounds, hold,
                                                  args.requests))
        if not hold:
            rows += [
                row("fence_latency_p50", pct(fence_lat, 0.5) * 1e3, "ms", better="lower"),
                row("fence_latency_p99", pct(fence_lat, 0.99) * 1e3, "ms", better="lower"),
            ]
            if not args.fence_only:
                rows += asyncio.run(produce_bench(lc, store, args.quick))
        return rows
    finally:
        lc.stop_all()


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
    ap.add_argument("--rounds", type=int, default=None,
                    help="fenced/raw phase pairs per kind (default 5; 3 with --quick)")
    ap.add_argument("--requests", type=int, default=None,
                    help="requests per phase (default 3000; 600 with --quick)")
    ap.add_argument("--tick", type=float, default=0.1,
                    help="the nodes' Raft tick in seconds (election timeout 10-20 ticks)")
    ap.add_argument("--fence-only", action="store_true",
                    help="only the fence rows (no produce latency, no simulator speed)")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench-impl.json"))
    args = ap.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-impl-") as tmp:
        store = LocalStore(os.path.join(tmp, "store"), create=True)
        rows += run_cluster(tmp, "c", False, args, store)
        rows += run_cluster(tmp, "hold", True, args, store)
    if not args.fence_only:
        rows.append(sim_bench(args.quick))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)
    for r in rows:
        extra = f"  baseline {r['baseline']}  ratio {r['ratio']}" if r["baseline"] else ""
        runs = (f"  pair ratios min/median/max {r['runs']['ratio_min_median_max']}"
                if "runs" in r else "")
        print(f"{r['name']:36} {r['value']:>12} {r['unit']}{extra}{runs}")


if __name__ == "__main__":
    main()
