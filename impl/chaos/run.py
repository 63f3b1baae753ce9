"""`epochgc chaos`: a real cluster of broker processes on loopback under a seeded nemesis,
a verifying produce workload, reconciler/housekeeper (in the brokers) and PySpark GC rounds
(in this process), then heal, quiesce and check (see impl/chaos/checker.py):

  lost              acknowledged records not read back byte for byte
  in_use_deleted    L0 objects deleted (seen by listing the store after every GC round)
                    while a committed unreconciled placeholder referenced them, judged
                    from the nodes' trace (impl/chaos/inuse.py) and, during the run, from
                    every live replica's committed state after each round; or while a
                    write into them was in flight (the producers' log of upload..settled)
  trace_divergences the nodes' trace against the model (epochgc check-trace)
  raft_divergences  committed entries that differ between replicas' on-disk logs
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from epochgc.impl import signals
from epochgc.impl.chaos.checker import raft_divergences, trace_divergence
from epochgc.impl.chaos.cluster import ChaosCluster
from epochgc.impl.chaos.history import History
from epochgc.impl.chaos.inuse import Round, in_flight_in_use, live_references
from epochgc.impl.chaos.inuse import check as trace_inuse
from epochgc.impl.chaos.nemesis import Nemesis, dir_store_switch
from epochgc.impl.chaos.proxy import HttpProxy
from epochgc.impl.chaos.schedule import plan
from epochgc.impl.chaos.workload import Workload
from epochgc.impl.cluster.client import ProcClusterAccess
from epochgc.impl.cluster.demo_checks import InflightLog, LeaderWatch
from epochgc.impl.cluster.demo_gc import DemoGc
from epochgc.impl.cluster.payload import compare
from epochgc.impl.store.base import ObjectStore
from epochgc.impl.store.faulty import FaultyStore
from epochgc.impl.store.url import StoreSpec, open_spec, parse_store_url
from epochgc.model.keys import DATA_PREFIX

# What a run writes in its --out directory (never over an earlier run's: chaos/cli.py).
HISTORY = "history.txt"
RESULT = "result.json"
OUTPUTS = (RESULT, HISTORY)
MINT_INTERVAL = 1.0  # epochs minted often: windows slide many times a minute
CACHE_TTL = 1.0
# The controller leader runs the epoch barrier (R36-R38) whenever the minimum M(p) stalls
# this long (faults stall it often), so barriers run under every kind of fault.
BARRIER_AFTER = 4.0
GRACE_S = 2.0
GC_EVERY_S = 3.0
PRODUCERS = 3
QUIESCE_S = 60.0
SPARK_WAIT_S = 600.0


@dataclass
class ChaosResult:
    seconds: float = 0.0
    acked: int = 0
    lost: int = 0
    in_use_deleted: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    leader_changes: int = 0
    objects_created: int = 0
    objects_deleted: int = 0
    trace_divergences: int = 0
    raft_divergences: int = 0
    survived_disk_faults: int = 0
    unexpected_exits: int = 0
    gc_rounds: int = 0
    # Rounds the GC safety monitor blocked (issue 30): a node the nemesis killed or cut
    # off stops reporting, and GC waits (fails closed) instead of deleting on an old view.
    gc_safety_blocked_rounds: int = 0
    # An operator's pause (`gc-admin pause`, 40-60 % of the run, issue 30): the rounds that
    # started while GC was paused or were refused or stopped by the pause, and what those
    # started while paused deleted (must be 0).
    gc_paused_rounds: int = 0
    gc_paused_deleted: int = 0
    # The final round (nemesis healed, GC not paused) could not run: GC that never comes
    # back is a failure too, not a quiet run (an outside tester's S3 run latched a pause
    # and said OK with nothing collected).
    gc_final_failed: int = 0
    failed_batches: int = 0

    def ok(self) -> bool:
        return (self.lost == 0 and self.in_use_deleted == 0 and self.trace_divergences == 0
                and self.raft_divergences == 0 and self.survived_disk_faults == 0
                and self.gc_paused_deleted == 0 and self.gc_final_failed == 0)


class ChaosRun:
    def __init__(self, nodes: int, seconds: float, seed: int, out: Path, store: str | None,
                 s3_endpoint: str | None, partitions: int = 6, gc_engine: str = "auto",
                 echo: bool = False) -> None:
        self.nodes, self.seconds, self.seed = nodes, seconds, seed
        self.out = out
        out.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix="epochgc-chaos-"))
        self.parts = [f"t/{i}" for i in range(partitions)]
        self.h = History(out / HISTORY,
                         (lambda s: print(s, file=sys.stderr, flush=True)) if echo else None)
        self.store_url = store or str(self.tmp / "store")
        self.s3_endpoint = s3_endpoint
        self.gc_engine = gc_engine
        self.lc = ChaosCluster(self.tmp / "cluster")
        self.trace = self.tmp / "trace.ndjson"
        self.result = ChaosResult()
        self.watch = LeaderWatch()
        self.inflight = InflightLog(time.time)
        self.deleted: set[str] = set()
        self.bad: set[str] = set()
        self.rounds: list[Round] = []
        self.inflight_deleted: set[str] = set()
        self.acked_keys: set[str] = set()
        self.applied_hw: dict[str, int] = {}  # partition -> highest applied index answered
        self.http: HttpProxy | None = None
        self.controller_leader = 0
        self.gc_paused = False  # set once the pause is written, cleared before it is lifted
        self._gc: DemoGc | None = None
        self.error: str | None = None  # why the run ended before its checks (its result line)

    # ---- set-up --------------------------------------------------------------------------

    def _specs(self) -> tuple[StoreSpec, StoreSpec]:
        """(what everyone uses, what the checker uses: the same store without the proxy)."""
        direct = parse_store_url(self.store_url, self.s3_endpoint)
        if direct.kind != "s3":
            return direct, direct
        assert self.http is not None
        via = parse_store_url(self.store_url, f"http://127.0.0.1:{self.http.port}")
        return via, direct

    async def _setup(self) -> tuple[ObjectStore, ObjectStore, DemoGc, Nemesis]:
        direct0 = parse_store_url(self.store_url, self.s3_endpoint)
        if direct0.kind == "file":
            Path(direct0.location).mkdir(parents=True, exist_ok=True)
        else:
            if not self.s3_endpoint:
                raise ValueError("--store s3://... needs --s3-endpoint (the proxy goes in front)")
            port = int(self.s3_endpoint.rsplit(":", 1)[1].split("/")[0])
            self.http = HttpProxy(port)
            await self.http.start()
        via, direct = self._specs()
        extra = ["--cache-ttl", str(CACHE_TTL), "--trace", str(self.trace),
                 "--barrier-after", str(BARRIER_AFTER)]
        if via.kind == "s3":
            extra += ["--s3-endpoint", str(via.endpoint_url)]
        self.lc.init(self.nodes, self.store_url, self.parts, MINT_INTERVAL, extra=extra)
        await self.lc.start_proxies()
        checker_store = open_spec(direct)
        if via.kind == "file":
            faulty = FaultyStore(open_spec(via))
            switch = dir_store_switch(self.lc, faulty)
            producer_store: ObjectStore = faulty
        else:
            http = self.http
            assert http is not None

            def switch(mode: str | None) -> None:
                http.mode = mode

            producer_store = open_spec(via)
        gc = DemoGc(via, open_spec(via), GRACE_S, self.gc_engine)
        nem = Nemesis(self.lc, self.h, self._leaders, switch)
        return producer_store, checker_store, gc, nem

    def _leaders(self) -> dict[str, int]:
        out = {p: leader for p, (_, leader) in self.watch.last.items()}
        out["controller"] = self.controller_leader
        return out

    # ---- the run -------------------------------------------------------------------------

    def run(self, keep: bool = False) -> ChaosResult:
        t0 = time.monotonic()
        ok = interrupted = False
        try:
            signals.checkpoint("start")
            signals.run(self._main())
            self._final_checks()
            ok = self.result.ok()
        except KeyboardInterrupt:  # SIGINT or SIGTERM (impl/signals.py)
            interrupted = True
            raise
        except Exception as e:  # said on the result line, then as the command's error
            self.error = str(e) or type(e).__name__
            raise
        finally:
            with signals.deferred():  # never cut short by a signal
                self._clean_up(interrupted, ok, keep, t0)
        return self.result

    def _clean_up(self, interrupted: bool, ok: bool, keep: bool, t0: float) -> None:
        if interrupted:
            # A node a cancelled restart brought up after `_main` stopped the others, and
            # what `_main`'s own cleanup did not get to when a signal cut it short.
            if self.lc.meta:
                self.lc.stop_all()
            if self._gc is not None:
                self._gc.interrupt(signals.interrupted().name)
                self._gc.close()
            self.h("interrupted", signal=signals.interrupted().name,
                   data_dir="kept" if keep else "removed")
        self.result.seconds = round(time.monotonic() - t0, 1)
        if not interrupted:  # an interrupted run's counts were never gathered
            # A run that failed says so first: its counts are what happened before it
            # ended (newuser16 S5: "faults=- leader_changes=0" after a pause and 2 leader
            # changes, the counts of a run that never got to gather them).
            ended = {"ended": f"error before the checks: {self.error}"} if self.error else {}
            self.h("result", **ended, **{k: v for k, v in self.result.__dict__.items()})
        self.h.close()
        if keep or (not ok and not interrupted):
            self.h.path.with_name("data-dir.txt").write_text(str(self.tmp) + "\n")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    async def _main(self) -> None:
        producer_store, checker_store, gc, nem = await self._setup()
        self._gc = gc  # the outer cleanup's too: a signal may cut the `finally` below short
        access = ProcClusterAccess(self.lc.client_addrs())
        wl: Workload | None = None
        try:
            for n in self.lc.ids:
                await asyncio.to_thread(self.lc.start, n)
            self.h("cluster up", nodes=self.nodes, dir=self.tmp, store=self.store_url,
                   gc=gc.engine, seed=self.seed)
            await self._wait_ready(access)
            await self._wait_gc(gc)
            wl = Workload(access, producer_store, self.parts, self.inflight, self.h, self.seed)
            stop = asyncio.Event()
            t_work = time.monotonic()
            episodes = plan(self.seconds, self.nodes, self.seed)
            self.h("nemesis plan", episodes=len(episodes),
                   kinds=dict(Counter(e.kind for e in episodes)))
            tasks = [asyncio.create_task(wl.produce_loop(w, stop)) for w in range(PRODUCERS)]
            tasks.append(asyncio.create_task(self._watch_loop(access, stop)))
            tasks.append(asyncio.create_task(self._gc_loop(access, gc, checker_store, stop)))
            tasks.append(asyncio.create_task(self._gc_pause(checker_store, stop)))
            nemesis = asyncio.create_task(nem.run(episodes, t_work, stop))
            await asyncio.sleep(self.seconds)
            # Every planned episode runs (the plan ends within the run; one delayed by a
            # slow restart runs late rather than not at all, issue 41), each healing itself.
            await nemesis
            stop.set()
            await nem.heal_all()
            await asyncio.gather(*tasks)
            await self._quiesce(access)
            await self._gc_round(access, gc, checker_store, final=True)
            await self._read_back(access, wl)
        except asyncio.CancelledError:  # interrupted: a running GC round stops at a batch
            gc.interrupt(signals.interrupted().name)
            await signals.cancel_all()  # the workload ends before the nodes stop
            raise
        finally:
            self._count(wl, nem)  # whatever the ending: the result line says what happened
            await access.close()
            self.lc.stop_all()
            gc.close()
            await self.lc.close_proxies()
            if self.http is not None:
                await self.http.close()

    def _count(self, wl: Workload | None, nem: Nemesis) -> None:
        r = self.result
        if wl is not None:
            r.acked = wl.acked
            self.acked_keys = {run.key for run in wl.runs}
            r.failed_batches = wl.failed_batches
            r.objects_created = sum(p.stats.objects_created for p in wl.producers)
        r.faults = dict(sorted(nem.faults.items()))
        r.survived_disk_faults = nem.survived_disk_faults
        r.unexpected_exits = nem.unexpected_exits
        r.leader_changes = self.watch.changes
        r.objects_deleted = len(self.deleted)
        r.in_use_deleted = len(self.bad)

    def _final_checks(self) -> None:
        divs = raft_divergences({n: self.lc.dir / f"n{n}" for n in self.lc.ids})
        for d in divs[:20]:
            self.h("RAFT DIVERGENCE", detail=str(d))
        self.result.raft_divergences = len(divs)
        td = trace_divergence(self.trace)
        if td is not None:
            self.h("TRACE DIVERGES FROM THE MODEL", detail=td.replace("\n", " | ")[:2000])
        self.result.trace_divergences = 0 if td is None else 1
        accepted: set[str] = set(self.acked_keys)
        judged: tuple[set[str], set[str]] | None = None
        if self.trace.exists():
            found, accepted_in_trace, raced = trace_inuse(str(self.trace), self.rounds)
            accepted |= accepted_in_trace
            judged = (accepted_in_trace, raced)
            for key, why in found:
                if key not in self.bad:
                    self.h("IN-USE OBJECT DELETED (trace)", key=key, why=why)
                self.bad.add(key)
        in_use = in_flight_in_use(self.inflight_deleted, self.acked_keys, judged)
        for key in sorted(in_use):
            if key not in self.bad:
                self.h("IN-USE OBJECT DELETED (in flight, accepted during or after its"
                       " deleting round)", key=key)
            self.bad.add(key)
        self.h("deleted while in flight", total=len(self.inflight_deleted),
               of_them_ever_accepted=len(self.inflight_deleted & accepted),
               accepted_during_or_after_the_round=len(in_use))
        self.result.in_use_deleted = len(self.bad)
        self.h("checks done", raft_divergences=len(divs), trace="conforms" if td is None
               else "diverges")

    async def _wait_ready(self, access: ProcClusterAccess, timeout: float = 60.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            leaders = await self._poll(access)
            if all(leaders.get(p) for p in self.parts):
                try:
                    if await access.cluster_epoch() > 0:
                        self.h("leaders elected, first epoch minted")
                        return
                except ConnectionError:
                    pass
            await asyncio.sleep(0.2)
        raise RuntimeError("the cluster did not elect partition leaders and mint an epoch")

    async def _wait_gc(self, gc: DemoGc) -> None:
        """GC rounds must run during the faults, not only at the end: on a loaded machine
        the Spark session can take minutes to start, so the nemesis waits for it."""
        t = time.monotonic()
        while not gc.ready() and time.monotonic() - t < SPARK_WAIT_S:
            await asyncio.sleep(0.5)
        if not gc.ready():
            raise RuntimeError(f"the Spark session did not start in {SPARK_WAIT_S:.0f} s")
        said = gc.settle()  # GcFailed: --gc-engine spark and Spark did not start
        # `why`: the reason --gc-engine auto runs the model's round (newuser16 S11).
        self.h("GC engine ready", engine=gc.engine, waited_s=round(time.monotonic() - t, 1),
               **({"why": gc.fallback} if gc.fallback else {}))
        if said is not None and gc.fallback is None:
            self.h(said)

    async def _poll(self, access: ProcClusterAccess) -> dict[str, int]:
        live = [n for n in self.lc.up() if n not in self.lc.paused]
        before = self.watch.changes
        leaders = await self.watch.poll(access, live)
        if self.watch.changes != before:
            self.h("leader change(s) seen", total=self.watch.changes)
        for n in live:
            r = await access.call(n, op="status", timeout=2.0)
            if r.get("status") == "ok":
                c = r["data"]["controller"]["leader"]
                if c:
                    self.controller_leader = int(c)
                break
        return leaders

    async def _watch_loop(self, access: ProcClusterAccess, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self._poll(access)
            await asyncio.sleep(0.3)

    # ---- GC and the in-use check ---------------------------------------------------------

    async def _gc_loop(self, access: ProcClusterAccess, gc: DemoGc, store: ObjectStore,
                       stop: asyncio.Event) -> None:
        while not stop.is_set():
            await asyncio.sleep(GC_EVERY_S)
            if gc.ready() and not stop.is_set():
                await self._gc_round(access, gc, store)

    async def _gc_pause(self, store: ObjectStore, stop: asyncio.Event) -> None:
        """An operator pauses GC (`gc-admin pause`) at 40 % of the run and starts it again
        at 60 %, while the nemesis goes on: no round that starts while paused may delete."""
        from epochgc.impl.gc.admin import write_admin_state

        with contextlib.suppress(asyncio.TimeoutError):
            async with asyncio.timeout(self.seconds * 0.4):  # not wait_for (rpc.py)
                await stop.wait()
            return  # stopped before the window
        await asyncio.to_thread(write_admin_state, store, True, "chaos: operator pause",
                                time.time())
        self.gc_paused = True  # after the write: a round that sees this flag sees the pause
        self.h("gc-admin pause")
        with contextlib.suppress(asyncio.TimeoutError):
            async with asyncio.timeout(self.seconds * 0.2):  # not wait_for (rpc.py)
                await stop.wait()
        self.gc_paused = False  # before the write: a round that saw the flag saw the pause
        await asyncio.to_thread(write_admin_state, store, False, "", time.time())
        self.h("gc-admin start")

    async def _gc_round(self, access: ProcClusterAccess, gc: DemoGc, store: ObjectStore,
                        final: bool = False) -> None:
        paused = self.gc_paused
        start = time.time()
        t_start = self._trace_len()
        try:
            r: Any = await asyncio.to_thread(gc.run_round)
        except Exception as e:  # a round failing under a store fault is retried later
            self.h("GC round failed", why=str(e)[:160])
            r = None
        end = time.time()
        t_end = self._trace_len()
        self.result.gc_rounds += 1
        stored = set(self.inflight.stored)
        listing = await asyncio.to_thread(lambda: {i.key for i in store.list_all(DATA_PREFIX)})
        gone = stored - listing - self.deleted
        self.deleted |= gone
        # Issue 41 F7: a round that started just before the pause was written, or just
        # after the flag was cleared and before the pause was lifted, met the pause (it was
        # refused, or stopped) but was not counted. What it deleted before meeting it is
        # no violation: only a round started while paused must delete nothing.
        if paused or (r is not None and (r.paused or r.stopped_by_pause)):
            self.result.gc_paused_rounds += 1
        if paused:
            self.result.gc_paused_deleted += len(gone)
            for k in sorted(gone):
                self.h("DELETED WHILE GC WAS PAUSED", key=k)
        self.rounds.append(Round(t_start, t_end, frozenset(gone)))
        referenced: set[str] = set()
        live = [n for n in self.lc.up() if n not in self.lc.paused]
        for part, (applied, keys) in (await live_references(access, live)).items():
            if applied >= self.applied_hw.get(part, -1):  # else a replica still catching up
                self.applied_hw[part] = applied
                referenced |= keys
        bad = self.deleted & referenced
        for k in sorted(bad - self.bad):
            self.h("IN-USE OBJECT DELETED", key=k)
        self.bad |= bad
        # Deleted while a write into it was in flight: a violation only if that write was
        # still acceptable, i.e. if any placeholder of it was ever accepted (judged at the
        # end from the trace and the acknowledgements). One that never was is an orphan
        # upload: its epoch <= M is below every partition's window, so no fence can admit
        # it (the design's argument), and deleting it is GC doing its job.
        for k in sorted(gone):
            if self.inflight.overlaps(k, start, end):
                self.inflight_deleted.add(k)
                self.h("deleted while in flight (judged at the end)", key=k)
        if final and (r is None or r.paused or r.stopped_by_pause):
            self.result.gc_final_failed = 1
            self.h("FINAL GC ROUND DID NOT RUN", why="failed" if r is None else "paused")
        if r is not None:
            self.result.gc_safety_blocked_rounds += r.safety_blocked
            self.h(f"{'final ' if final else ''}GC round", engine=r.engine, M=r.M,
                   deleted=len(gone), blocked=r.blocked or "-")

    def _trace_len(self) -> int:
        try:
            return self.trace.stat().st_size
        except FileNotFoundError:
            return 0

    # ---- the end -------------------------------------------------------------------------

    async def _quiesce(self, access: ProcClusterAccess) -> None:
        """Every node up, every partition led, every placeholder reconciled (bounded)."""
        end = time.monotonic() + QUIESCE_S
        pending = -1
        while time.monotonic() < end:
            leaders = await self._poll(access)
            pending = 0
            for n in self.lc.up():
                st = await access.call(n, op="status")
                if st.get("status") != "ok":
                    pending += 1
                    continue
                pending += sum(s["unreconciled"] for s in st["data"]["partitions"].values()
                               if s["leader"] == n)
            if pending == 0 and all(leaders.get(p) for p in self.parts):
                break
            await asyncio.sleep(0.3)
        await asyncio.sleep(1.5)  # one health-report interval
        self.h("quiescent" if pending == 0 else "NOT quiescent", unreconciled=pending)

    async def _read_back(self, access: ProcClusterAccess, wl: Workload) -> None:
        got: dict[str, dict[int, bytes]] = {}
        for p in self.parts:
            got[p], unreadable = await access.read_checked(p)
            if unreadable:
                self.h("records unreadable (object gone)", partition=p, count=len(unreadable))
        bad = compare(wl.runs, got)
        for line in bad[:20]:
            self.h("LOST", record=line)
        self.result.lost = len(bad)
        self.h("read back", records=sum(len(v) for v in got.values()), acked=wl.acked,
               lost=len(bad))
