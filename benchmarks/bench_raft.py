"""Raft benchmark against pysyncobj 0.3.17 (benchmark-only dependency), in the same run.

  python benchmarks/bench_raft.py [--quick] [--out build/bench-raft.json]

Rows (JSON list of {"name","value","unit","baseline","ratio","target","better"}):
  tcp_3proc_commits_per_s   3 processes on loopback, one group, pipelined 1 KiB proposals,
                            committed proposals/s; ours fsyncs every batch, pysyncobj does not.
  tcp_3proc_256_groups_group_commit_per_s
                            the same with 256 groups on each process and the load spread over
                            every group's leader: group commit (the groups' fsyncs of a Ready
                            batch issued concurrently, the default) vs the same cluster with
                            `--group-commit off` (one fsync per group in turn) as the baseline;
                            data on /tmp (a disk).
  tcp_3proc_256_groups_syncfs_per_s
                            the same with one syncfs per batch (on the node's one descriptor,
                            held since start: issue 37), against the same baseline.
  With `--runs N` the three configurations run N times, alternating (the order rotates each
  run), and each row gives the median ratio over the runs and every run's ratio.
  sim_commits_per_wall_s    committed entries per wall second, 3 nodes in one process: our
                            simulator vs pysyncobj ticked by hand over an in-memory transport.
  idle_cpu_256_groups       CPU % of one core used by the busiest of 3 local node processes
                            each hosting 256 idle groups (no baseline; target < 10).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from epochgc.impl.ports import free_ports  # noqa: E402
from epochgc.impl.raft.host import Proposal  # noqa: E402
from epochgc.impl.raft.kv import OP_LEADER, OP_PUT, ST_OK, KVClient  # noqa: E402
from epochgc.impl.raft.proc_cluster import ProcCluster  # noqa: E402
from epochgc.impl.raft.sim import Simulator  # noqa: E402

VALUE = b"v" * 1024


def row(
    name: str, value: float, unit: str, baseline: float | None, target: float, higher: bool = True
) -> dict[str, Any]:
    ratio = None
    if baseline:
        ratio = value / baseline if higher else baseline / value
    return {
        "name": name,
        "value": round(value, 2),
        "unit": unit,
        "baseline": None if baseline is None else round(baseline, 2),
        "ratio": None if ratio is None else round(ratio, 3),
        "target": target,
        "target_of": "ratio" if ratio is not None else "value",
        "better": "higher" if higher else "lower",
    }


# ---- 3 processes over TCP ------------------------------------------------------------------


async def _windowed(cl: KVClient, n: int, window: int, offset: int) -> int:
    """Keep `window` proposals in flight until n complete; returns how many succeeded."""
    loop = asyncio.get_running_loop()
    finished: asyncio.Future[None] = loop.create_future()
    state = {"next": 0, "done": 0, "ok": 0}

    def issue() -> None:
        i = state["next"]
        state["next"] += 1
        cl.request(OP_PUT, b"k%d" % (offset + i), VALUE).add_done_callback(on_done)

    def on_done(f: asyncio.Future[tuple[int, int, bytes]]) -> None:
        state["done"] += 1
        if not f.exception() and f.result()[0] == ST_OK:
            state["ok"] += 1
        if state["next"] < n:
            issue()
        elif state["done"] == n and not finished.done():
            finished.set_result(None)

    for _ in range(min(window, n)):
        issue()
    await finished
    return state["ok"]


async def _drive_ours(c: ProcCluster, n: int, window: int) -> float:
    lead = await c.find_leader()
    cl = await KVClient.connect("127.0.0.1", c.client_ports[lead])
    await _windowed(cl, 500, window, 10**9)  # warm up
    t0 = time.perf_counter()
    ok = await _windowed(cl, n, window, 0)
    dt = time.perf_counter() - t0
    await cl.close()
    return ok / dt


def bench_tcp_ours(n: int, window: int) -> float:
    with tempfile.TemporaryDirectory(dir="/tmp") as d:  # a real disk: fsyncs cost
        c = ProcCluster(d)
        c.start_all()
        try:
            return asyncio.run(_drive_ours(c, n, window))
        finally:
            c.stop_all()


def pso_node(idx: int, ports: list[int], n: int, window: int) -> None:
    """One pysyncobj process; the one that becomes leader runs the load and prints RESULT."""
    from pysyncobj import SyncObj, SyncObjConf, replicated

    class KV(SyncObj):  # type: ignore[misc]
        def __init__(self, me: str, others: list[str]) -> None:
            super().__init__(me, others, SyncObjConf(appendEntriesUseBatch=True))
            self.data: dict[bytes, bytes] = {}

        @replicated  # type: ignore[untyped-decorator]
        def put(self, k: bytes, v: bytes) -> None:
            self.data[k] = v

    addrs = [f"127.0.0.1:{p}" for p in ports]
    me = addrs[idx]
    obj = KV(me, [a for a in addrs if a != me])
    while obj._getLeader() is None:
        time.sleep(0.05)
    if str(obj._getLeader()) != me:
        time.sleep(600)
        return
    sem = threading.Semaphore(window)
    done = threading.Event()
    count = [0, 0]
    lock = threading.Lock()

    def cb(res: Any, err: Any) -> None:
        with lock:
            count[0] += 1
            count[1] += err == 0
            if count[0] == n:
                done.set()
        sem.release()

    t0 = time.perf_counter()
    for i in range(n):
        sem.acquire()
        obj.put(b"k%d" % i, VALUE, callback=cb)
    done.wait(300)
    dt = time.perf_counter() - t0
    print(f"RESULT {count[1] / dt}", flush=True)
    time.sleep(600)


def bench_tcp_pysyncobj(n: int, window: int) -> float:
    ports = free_ports(3)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--pso-node",
                str(i),
                "--ports",
                ",".join(map(str, ports)),
                "--n",
                str(n),
                "--window",
                str(window),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(3)
    ]
    try:
        result: list[float] = []

        def reader(p: subprocess.Popen[str]) -> None:
            assert p.stdout is not None
            for line in p.stdout:
                if line.startswith("RESULT"):
                    result.append(float(line.split()[1]))
                    return

        threads = [threading.Thread(target=reader, args=(p,), daemon=True) for p in procs]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 300
        while not result and time.monotonic() < deadline:
            time.sleep(0.1)
        if not result:
            raise RuntimeError("pysyncobj benchmark did not finish")
        return result[0]
    finally:
        for p in procs:
            p.kill()
            p.wait()


async def _group_leaders(
    c: ProcCluster, clients: dict[int, KVClient], groups: int, timeout: float
) -> dict[int, int]:
    deadline = time.monotonic() + timeout
    leaders: dict[int, int] = {}
    while time.monotonic() < deadline:
        for g in range(1, groups + 1):
            if g in leaders:
                continue
            res = await asyncio.gather(
                *(cl.request(OP_LEADER, b"", group=g) for cl in clients.values())
            )
            for nid, (status, lead, _) in zip(clients, res, strict=True):
                if status == ST_OK and lead == nid:
                    leaders[g] = nid
        if len(leaders) == groups:
            return leaders
        await asyncio.sleep(0.5)
    raise TimeoutError(f"{groups - len(leaders)} groups without a leader")


async def _drive_groups(c: ProcCluster, groups: int, n: int, window: int) -> float:
    clients = {i: await KVClient.connect("127.0.0.1", c.client_ports[i]) for i in c.ids}
    try:
        leaders = await _group_leaders(c, clients, groups, 180)
        loop = asyncio.get_running_loop()

        async def run(count: int, offset: int) -> int:
            finished: asyncio.Future[None] = loop.create_future()
            state = {"next": 0, "done": 0, "ok": 0}

            def issue() -> None:
                i = state["next"]
                state["next"] += 1
                g = 1 + i % groups
                cl = clients[leaders[g]]
                cl.request(OP_PUT, b"k%d" % (offset + i), VALUE, group=g).add_done_callback(on_done)

            def on_done(f: asyncio.Future[tuple[int, int, bytes]]) -> None:
                state["done"] += 1
                if not f.exception() and f.result()[0] == ST_OK:
                    state["ok"] += 1
                if state["next"] < count:
                    issue()
                elif state["done"] == count and not finished.done():
                    finished.set_result(None)

            for _ in range(min(window, count)):
                issue()
            await finished
            return state["ok"]

        await run(min(n, 2 * groups), 10**9)  # warm up: every group has written once
        t0 = time.perf_counter()
        ok = await run(n, 0)
        return ok / (time.perf_counter() - t0)
    finally:
        for cl in clients.values():
            await cl.close()


def bench_tcp_groups(groups: int, n: int, window: int, mode: str) -> float:
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        flag = ["--group-commit", mode]
        c = ProcCluster(d, groups=groups, extra=flag)
        c.start_all()
        try:
            return asyncio.run(_drive_groups(c, groups, n, window))
        finally:
            c.stop_all()


# ---- in-process simulation -----------------------------------------------------------------


def _all_done(ps: list[Proposal]) -> bool:
    return all(p.done for p in ps)


def bench_sim_ours(n: int, batch: int = 500) -> float:
    s = Simulator(3, seed=1, check=False)
    s.run_until(lambda: s.leader() is not None)
    lead = s.leader()
    assert lead is not None
    done = 0
    t0 = time.perf_counter()
    while done < n:
        ps = [s.propose(lead, VALUE) for _ in range(batch)]
        s.run_until(partial(_all_done, ps), 1_000_000)
        done += sum(p.error is None for p in ps)
    return done / (time.perf_counter() - t0)


def bench_sim_pysyncobj(n: int, batch: int = 500) -> float:
    from pysyncobj import SyncObj, SyncObjConf, replicated
    from pysyncobj.transport import Transport

    queue: list[tuple[Any, Any, Any]] = []
    transports: dict[str, Any] = {}

    class MemTransport(Transport):  # type: ignore[misc]
        def __init__(self, syncobj: Any, self_node: Any, other_nodes: Any) -> None:
            super().__init__(syncobj, self_node, other_nodes)
            self.node = self_node
            self.others = other_nodes
            transports[str(self_node)] = self

        def send(self, node: Any, message: Any) -> bool:
            queue.append((self.node, str(node), message))
            return True

    class KV(SyncObj):  # type: ignore[misc]
        def __init__(self, me: str, others: list[str]) -> None:
            conf = SyncObjConf(autoTick=False, appendEntriesUseBatch=True)
            super().__init__(me, others, conf, transportClass=MemTransport)
            self.data: list[bytes] = []

        @replicated  # type: ignore[untyped-decorator]
        def put(self, v: bytes) -> None:
            self.data.append(v)

    addrs = [f"mem:{i}" for i in range(3)]
    objs = [KV(a, [b for b in addrs if b != a]) for a in addrs]
    for t in transports.values():
        for o in t.others:
            t._onNodeConnected(o)

    def pump() -> None:
        for o in objs:
            o.doTick(0.0)
        while queue:
            batch_msgs = queue[:]
            queue.clear()
            for src, dst, msg in batch_msgs:
                transports[dst]._onMessageReceived(src, msg)

    while not any(o._isLeader() for o in objs):
        pump()
    leader = next(o for o in objs if o._isLeader())
    ok = [0, 0]

    def cb(res: Any, err: Any) -> None:
        ok[0] += 1
        ok[1] += err == 0

    t0 = time.perf_counter()
    submitted = 0
    while submitted < n:
        for _ in range(batch):
            leader.put(VALUE, callback=cb)
        submitted += batch
        while ok[0] < submitted:
            pump()
    dt = time.perf_counter() - t0
    for o in objs:
        o.destroy()
    return ok[1] / dt


# ---- idle cost -----------------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _all_groups_led(c: ProcCluster, groups: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    clients = {i: await KVClient.connect("127.0.0.1", c.client_ports[i]) for i in c.ids}
    try:
        while time.monotonic() < deadline:
            missing = 0
            for g in range(1, groups + 1):
                res = await asyncio.gather(
                    *(cl.request(OP_LEADER, b"", group=g) for cl in clients.values())
                )
                if not any(
                    status == ST_OK and lead == nid
                    for nid, (status, lead, _) in zip(clients, res, strict=True)
                ):
                    missing += 1
            if missing == 0:
                return
            await asyncio.sleep(0.5)
        raise TimeoutError("groups without a leader")
    finally:
        for cl in clients.values():
            await cl.close()


def bench_idle(groups: int, seconds: float) -> float:
    with tempfile.TemporaryDirectory() as d:
        c = ProcCluster(d, groups=groups)
        c.start_all()
        try:
            asyncio.run(_all_groups_led(c, groups, 120))
            time.sleep(5)  # let elections and catch-up settle
            pids = c.pids()
            before = {n: _cpu_seconds(p) for n, p in pids.items()}
            t0 = time.monotonic()
            time.sleep(seconds)
            dt = time.monotonic() - t0
            used = {n: (_cpu_seconds(p) - before[n]) / dt * 100 for n, p in pids.items()}
            return max(used.values())
        finally:
            c.stop_all()


def best_of(runs: int, fn: Callable[[], float]) -> float:
    return max(fn() for _ in range(runs))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench-raft.json"))
    ap.add_argument("--pso-node", type=int, default=None)
    ap.add_argument("--ports", default="")
    ap.add_argument("--n", type=int, default=0)
    ap.add_argument("--window", type=int, default=0)
    ap.add_argument(
        "--only", default="tcp,groups,sim,idle", help="comma list of: tcp,groups,sim,idle"
    )
    ap.add_argument("--runs", type=int, default=1, help="groups: alternating runs (median)")
    ap.add_argument("--n-groups", type=int, default=0, help="groups: proposals per run")
    args = ap.parse_args()
    only = set(args.only.split(","))
    if args.pso_node is not None:
        pso_node(args.pso_node, [int(p) for p in args.ports.split(",")], args.n, args.window)
        return
    q = args.quick
    n_tcp = 3000 if q else 20000
    window = 1000
    n_sim = 3000 if q else 20000
    rows = []
    if "tcp" in only:
        ours = bench_tcp_ours(n_tcp, window)
        base = bench_tcp_pysyncobj(n_tcp, window)
        rows.append(row("tcp_3proc_commits_per_s", ours, "proposals/s", base, 1.0))
        print(json.dumps(rows[-1]), flush=True)
    if "groups" in only:
        n_groups = args.n_groups or (4000 if q else 20000)
        modes = ["off", "parallel", "syncfs"]
        got: dict[str, list[float]] = {m: [] for m in modes}
        for k in range(args.runs):
            for mode in modes[k % 3 :] + modes[: k % 3]:  # rotate: drift hits each alike
                got[mode].append(bench_tcp_groups(256, n_groups, window, mode))
            print(json.dumps({"run": k, **{m: round(v[-1], 1) for m, v in got.items()}}),
                  flush=True)
        for mode, name in (
            ("parallel", "tcp_3proc_256_groups_group_commit_per_s"),
            ("syncfs", "tcp_3proc_256_groups_syncfs_per_s"),
        ):
            ratios = sorted(o / b for o, b in zip(got[mode], got["off"], strict=True))
            mid = ratios[len(ratios) // 2]
            k = next(i for i, (o, b) in enumerate(zip(got[mode], got["off"], strict=True))
                     if o / b == mid)
            r = row(name, got[mode][k], "proposals/s", got["off"][k], 1.5)
            r["runs"] = args.runs
            r["ratios"] = [round(x, 3) for x in ratios]
            rows.append(r)
            print(json.dumps(rows[-1]), flush=True)
    if "sim" in only:
        ours = best_of(1 if q else 2, lambda: bench_sim_ours(n_sim))
        base = best_of(1 if q else 2, lambda: bench_sim_pysyncobj(n_sim))
        rows.append(row("sim_commits_per_wall_s", ours, "entries/s", base, 1.0))
        print(json.dumps(rows[-1]), flush=True)
    if "idle" in only:
        idle = bench_idle(256, 5 if q else 15)
        rows.append(row("idle_cpu_256_groups", idle, "% of one core", None, 10.0, higher=False))
        print(json.dumps(rows[-1]), flush=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
