"""`epochgc demo --seconds S [--json]`: the whole design in one command, on the embedded
defaults.

A 3-node cluster as processes (LocalCluster, temp data dir, local-directory store), two
producers writing verifiable records (`impl.cluster.payload`) to 8 partitions in shared L0
objects, epochs minted every 2 s, the leader of t/0 SIGKILLed and restarted, the brokers'
reconcilers and housekeepers running, GC rounds (the PySpark job when pyspark is importable,
the model's round otherwise), and a final read-back. A third producer writes to topic `u`
(u/0, u/1; every other object also feeds t/7), which is deleted mid-run and re-created
later (issue 13): its objects are stranded and the GC rounds collect them
(`stranded_collected`), a shared one only once t/7 no longer needs it.

`S` is the budget for the whole run, start-up to clean-up: the workload ends early enough
for the tail (`plan_work_end`: the drain, a final GC round as long as the last one, the
read-back, stopping the nodes and Spark, the trace check), and no GC round starts that
would end past the workload. Only two things may take a run past it, and the run says
by how much: a budget too short for `MIN_WORK_S` of work after start-up, and Spark's
start-up on a slow host (the pause showcase needs a round, and a round needs the session).
newuser13 Q10: `--seconds 20` took 30-34 s (a round under way when the work ended was
waited for, and the clean-up and trace check came after the budget's end).

The showcase steps wait on the state they show, not on time (Q10: on a loaded host the
pause window closed before Spark was ready, "0 round(s) refused while paused", and the
break-glass step printed a refusal with retry advice): the pause step runs a round while
paused and resumes after it; break-glass, refused while the leader's cached epoch lags
the partition, waits until the leader's cache has caught up and asks again.

The two safety figures are independent of the code under test:
- `lost`: every acknowledged record of a partition that still exists (its current
  incarnation) is read back and compared byte for byte with the record recomputed from its
  acknowledgement.
- `in_use_deleted`: deleted keys are observed by listing the store after each round, and
  compared with the keys the partitions' committed state still references (accepted,
  unreconciled placeholders, from the most advanced replica) and with the writes that were
  in flight during the round.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import click

from epochgc.impl import signals
from epochgc.impl.broker.producer import PartitionDeletedError, ProduceError, Producer
from epochgc.impl.broker.raftport import thread_io
from epochgc.impl.cluster.client import ProcClusterAccess
from epochgc.impl.cluster.demo_checks import InflightLog, LeaderWatch, in_use_keys
from epochgc.impl.cluster.demo_gc import DemoGc, GcFailed
from epochgc.impl.cluster.local import LocalCluster
from epochgc.impl.cluster.payload import AckedRun, compare, make_record
from epochgc.impl.entry import started_at
from epochgc.impl.finite import FiniteFloat
from epochgc.impl.preflight import Refused, require_spark
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.url import parse_store_url
from epochgc.model.keys import DATA_PREFIX

PARTS = [f"t/{i}" for i in range(8)]
MINT_INTERVAL = 2.0
GRACE_S = 2.0  # production uses 12 h; the demo's objects must age out within seconds
# Reserved at the end, besides the final GC round (as long as the last round): the drain
# (`_drain`: one health-report interval, more while reconcilers catch up), the read-back,
# and the clean-up (stopping 3 nodes and Spark, the trace check: 2.5 s of a 20 s run at
# load 6 on 2 cores).
TAIL_S = 2.0
CLEAN_UP_S = 3.0
# A round's length before one was measured: Spark's first round is cold (its Python
# workers start, the JVM compiles): 5.9 s and 8 s at load 6-7 on 2 cores, later ones 1-2 s.
COLD_ROUND_S = {"spark": 6.0, "model": 1.0}
MIN_WORK_S = 4.0
BREAK_GLASS_TRIES = 10  # each after the state that lets it through was seen
STATE_WAIT_S = 5 * 2.0  # bound on one wait for a state (5 mint intervals): never reached
RECORDS_PER_PARTITION = 4
RECORD_SIZE = 48
PRODUCERS = 2
GC_EVERY_S = 1.5
PAUSE_AT = 0.55  # the pause window opens at this share of the work (issue 30)
PAUSE_S = 0.15  # between a producer's batches
TOPIC_U = "u"  # deleted mid-run and re-created (issue 13)
U_PARTS = [f"{TOPIC_U}/{i}" for i in range(2)]
U_SHARED_WITH = "t/7"  # every other batch of u's producer also feeds this live partition
DELETE_AT, RECREATE_AT = 0.45, 0.7  # shares of the work phase
BARRIER_AT = 0.55  # the epoch barrier (R36-R38) on demand, while producers run
# A controller request's whole bound (`controller_call`'s within_s): a controller leader
# that does not commit ends the demo in one line naming each node's last answer, where it
# waited up to 50 rounds of 30 s a node (newuser21 X9, found on `epochgc barrier`).
ASK_S = 30.0


def plan_work_end(deadline: float, work_start: float, final_round_s: float) -> float:
    """When the workload ends: early enough for the tail, with a final round of
    `final_round_s`, within the budget's `deadline`; never before `MIN_WORK_S` of work."""
    return max(deadline - TAIL_S - CLEAN_UP_S - final_round_s, work_start + MIN_WORK_S)


def _why(answer: dict[str, Any]) -> str:
    """A refused or unanswered controller request in words (its `message`), not the
    answer's dict."""
    return str(answer.get("message") or answer.get("reason") or answer.get("status"))


@dataclass
class DemoResult:
    acked: int = 0
    lost: int = 0
    stale_rejections: int = 0
    leader_changes: int = 0
    objects_created: int = 0
    objects_deleted: int = 0
    in_use_deleted: int = 0
    cluster_M: int | None = None
    topics_deleted: int = 0
    stranded_collected: int = 0  # objects of deleted partitions the GC rounds deleted
    deleted_refusals: int = 0  # batches to a deleted partition refused with its name
    barrier_candidate: int | None = None  # the epoch barrier's candidate (R36)
    barrier_promoted: int = 0  # partitions whose safe epoch reached it by the end (R38)
    # Issue 30, GC operations: rounds refused while GC was paused (`gc-admin pause`, the
    # pause window) and what they deleted (must be 0), running rounds a pause stopped, and
    # rounds the safety monitor (or a missing report) blocked.
    gc_paused_rounds: int = 0
    gc_paused_deleted: int = 0
    gc_stopped_by_pause: int = 0
    gc_safety_blocked_rounds: int = 0
    gc_break_glass: str | None = None  # the advance-epoch call's status: ok, nothing or refused

    def ok(self) -> bool:
        return self.lost == 0 and self.in_use_deleted == 0 and self.gc_paused_deleted == 0


class Demo:
    def __init__(self, seconds: float, say: Callable[[str], None], engine: str = "auto",
                 t0: float | None = None) -> None:
        self.t0 = time.monotonic() if t0 is None else t0
        self.deadline = self.t0 + seconds
        self.say = say
        self.engine = engine
        self.tmp = Path(tempfile.mkdtemp(prefix="epochgc-demo-"))
        self.store_dir = self.tmp / "store"
        self.lc = LocalCluster(self.tmp / "cluster")
        # Every node traces its window transitions and decisions; the run checks the trace
        # against the model at the end (epochgc check-trace).
        self.trace = self.tmp / "trace.ndjson"
        self.trace_check: str | None = None  # None: conforms
        self._gc: DemoGc | None = None  # made in `run`, where an interrupt is cleaned up
        self.store: LocalStore
        self.inflight = InflightLog(time.time)
        self.watch = LeaderWatch()
        self.live: list[int] = []
        self.runs: list[AckedRun] = []
        self.producers: list[Producer] = []
        self.deleted: set[str] = set()
        self.bad: set[str] = set()
        self.result = DemoResult()
        self.failed_batches = 0
        self.rounds = 0
        self.targets: dict[str, frozenset[str]] = {}  # key -> partitions its batch was for
        self.u_deleted_at: float | None = None  # wall time the deletion was applied
        self.u_deletion_rev: int | None = None  # the lowest deletion revision of u's parts
        self.u_producer: Producer | None = None
        self.last_round_s: float | None = None  # of the rounds that ran (not refused)
        self.work_start = 0.0
        self._round_lock: asyncio.Lock | None = None  # one round at a time (`_gc_round`)
        self.ended = ""  # what the clean-up stopped and removed, in words

    @property
    def gc(self) -> DemoGc:
        assert self._gc is not None, "the demo's GC is made when it runs"
        return self._gc

    def engine_used(self) -> str:
        return self._gc.engine if self._gc is not None else self.engine

    def _check_trace(self) -> None:
        """Replay the nodes' own trace against the model: the run's decisions, not only its
        outcome, must be the model's."""
        from epochgc.impl.checktrace import Malformed, check

        try:
            res = check(str(self.trace))
        except (Malformed, OSError) as e:
            self.trace_check = f"trace unreadable: {e}"
            return
        self.trace_check = res.divergence
        self.say(f"trace: {res.records} records ({res.applies} applies, {res.fences} fences) "
                 + ("conform to the model" if res.divergence is None else "DIVERGE"))

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def over_budget(self, budget: float, took: float) -> str:
        """"" within the budget; else by how much and why (the module docstring)."""
        if took <= budget:
            return ""
        ready = self._gc.ready_at if self._gc is not None else None
        why = f"; Spark's session was ready at {ready - self.t0:.1f}s" if ready else ""
        return f" ({took - budget:.1f}s over the {budget:g}s budget{why})"

    # ---- top level -----------------------------------------------------------------------

    def run(self, keep: bool = False) -> DemoResult:
        interrupted = False
        # Until its clean-up says what it stopped and removed (newuser15 S3).
        signals.doing(f"the run had begun: its brokers and data under {self.tmp} may be left")
        try:
            signals.checkpoint("start")
            self.store = LocalStore(self.store_dir, create=True)
            self.lc.init(3, str(self.store_dir), PARTS + U_PARTS, MINT_INTERVAL,
                         extra=["--cache-ttl", "1.0", "--trace", str(self.trace)])
            self._gc = DemoGc(parse_store_url(str(self.store_dir)), self.store, GRACE_S,
                              self.engine, scratch_in=self.tmp)
            for n in self.lc.ids:
                self.lc.start(n)
                self.live.append(n)
            why = f" ({self.gc.fallback}; --gc-engine auto)" if self.gc.fallback else ""
            self.say(f"3 broker processes up under {self.tmp}; GC engine: {self.gc.engine}"
                     f"{why}")
            signals.run(self._main())
            return self.result
        except KeyboardInterrupt as e:  # SIGINT or SIGTERM (impl/signals.py)
            interrupted = True
            sig = e if isinstance(e, signals.Interrupted) else signals.interrupted()
            with signals.deferred():  # bounded, and never cut short by a signal
                said = self._clean_up(True, keep)
            # What the run stopped and left, on the one interrupted line (newuser15 S5).
            raise signals.Interrupted(sig.signum, said) from None
        finally:
            if not interrupted:
                with signals.deferred():
                    self.ended = self._clean_up(False, keep)
                    signals.doing(f"the run had ended: {self.ended}")

    def _clean_up(self, interrupted: bool, keep: bool) -> str:
        """Stop what the run started and remove its data; what an interrupt left, in
        words (said on the command's interrupted line)."""
        if interrupted and self._gc is not None:
            self._gc.interrupt(signals.interrupted().name)
        nodes = len(self.lc.meta.get("pids", {}))
        if self.lc.meta:
            self.lc.stop_all()
        if self._gc is not None:
            self._gc.close()
        if not interrupted:
            self._check_trace()
        if keep:
            self.say(f"data kept in {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)
        spark = ", the Spark session" if self.engine_used() == "spark" else ""
        return (f"stopped {nodes} broker process(es){spark} and the workload; "
                + (f"data kept in {self.tmp}" if keep else f"removed {self.tmp}"))

    async def _main(self) -> None:
        access = ProcClusterAccess(self.lc.client_addrs())
        try:
            await self._wait_ready(access)
            self._round_lock = asyncio.Lock()
            self.work_start = time.monotonic()
            work_end = self.work_end()  # the steps' schedule; the end itself may come sooner
            self.say(f"producing to {len(PARTS)} partitions for {work_end - time.monotonic():.1f}s")
            stop = asyncio.Event()
            producers = [
                asyncio.create_task(self._produce_loop(access, w, stop)) for w in range(PRODUCERS)
            ]
            producers.append(asyncio.create_task(self._produce_u(access, stop)))
            background = [
                asyncio.create_task(self._watch_loop(access, stop)),
                asyncio.create_task(self._gc_loop(access, stop)),
            ]
            chaos = asyncio.create_task(self._chaos(access, work_end))
            lifecycle = asyncio.create_task(self._lifecycle(access, work_end))
            barrier = asyncio.create_task(self._barrier(access, work_end))
            pause_window = asyncio.create_task(self._pause_window(access, work_end))
            # The end moves sooner as rounds prove longer (`work_end`).
            while time.monotonic() < self.work_end():
                await asyncio.sleep(0.1)
            stop.set()
            # the current batches finish; no cancel
            await asyncio.gather(*producers, chaos, lifecycle, barrier, pause_window)
            await asyncio.gather(*background)
            await self._drain(access)
            await self._gc_round(access, final=True)
            await self._barrier_outcome(access)
            await self._read_back(access)
        except asyncio.CancelledError:
            # Interrupted: a GC round running in a worker thread stops at its next delete
            # batch, before asyncio.run waits for that thread.
            self.gc.interrupt(signals.interrupted().name)
            await signals.cancel_all()  # the workload ends before its connections close
            raise
        finally:
            await access.close()
        r = self.result
        r.leader_changes = self.watch.changes
        r.objects_created = sum(p.stats.objects_created for p in self.producers)
        r.stale_rejections = sum(p.stats.stale_rejections for p in self.producers)
        r.objects_deleted = len(self.deleted)
        r.in_use_deleted = len(self.bad)
        r.acked = sum(run.count for run in self.runs)
        r.stranded_collected = len(self._stranded() & self.deleted)

    def round_s(self) -> float:
        """How long the next round is taken to be: as the last one, else a cold one."""
        if self.last_round_s is not None:
            return self.last_round_s
        return COLD_ROUND_S.get(self.engine_used(), COLD_ROUND_S["spark"])

    def work_end(self) -> float:
        return plan_work_end(self.deadline, self.work_start, self.round_s())

    def _stranded(self) -> set[str]:
        """Objects of the deleted incarnation of u: u's producer stamped them below the
        deletion's revision (a later object is stamped at least the re-creation's)."""
        if self.u_producer is None or self.u_deletion_rev is None:
            return set()
        from epochgc.model.keys import parse_key

        return {k for k in self.u_producer.stats.keys
                if parse_key(k).epoch < self.u_deletion_rev}

    async def _wait_ready(self, access: ProcClusterAccess, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            leaders = await self.watch.poll(access, self.live)
            if all(leaders.get(p) for p in PARTS):
                try:
                    if await access.cluster_epoch() > 0:
                        return
                except ConnectionError:
                    pass
            await asyncio.sleep(0.1)
        raise RuntimeError("the cluster did not elect partition leaders and mint an epoch")

    # ---- workload ------------------------------------------------------------------------

    async def _produce_loop(self, access: ProcClusterAccess, w: int, stop: asyncio.Event) -> None:
        prod = Producer(access, self.store, thread_io, random.Random(w), max_attempts=10,
                        not_leader_wait=8.0)
        prod.on_attempt = self.inflight.note
        self.producers.append(prod)
        name = f"demo{w}"
        seq = dict.fromkeys(PARTS, 0)
        while not stop.is_set():
            first = dict(seq)
            batch = {
                p: [make_record(name, p, seq[p] + i, RECORD_SIZE)
                    for i in range(RECORDS_PER_PARTITION)]
                for p in PARTS
            }
            for p in PARTS:  # seqs are never reused, even by a failed batch
                seq[p] += RECORDS_PER_PARTITION
            try:
                acks = await prod.produce(batch)
            except (ProduceError, ConnectionError) as e:
                self.failed_batches += 1
                self.say(f"batch not acknowledged (nothing counted): {str(e)[:100]}")
                await asyncio.sleep(0.2)
                continue
            for p, a in acks.items():
                self.runs.append(AckedRun(p, a.base, a.count, name, first[p], RECORD_SIZE,
                                          a.epoch, a.key))
            signals.checkpoint("work")  # the signal tests' point: mid-work
            await asyncio.sleep(PAUSE_S)  # leave CPU to the brokers and Spark (2 cores)

    async def _produce_u(self, access: ProcClusterAccess, stop: asyncio.Event) -> None:
        """u's producer: batches over u/0, u/1 (every other one also t/7); while u is
        deleted each batch's u part is refused with the partition's name (counted), and
        what t/7 acknowledged is kept."""
        prod = Producer(access, self.store, thread_io, random.Random(99), max_attempts=10,
                        not_leader_wait=8.0)
        self.producers.append(prod)
        self.u_producer = prod
        name = "demo-u"
        seq = dict.fromkeys([*U_PARTS, U_SHARED_WITH], 0)
        n = 0
        while not stop.is_set():
            parts = U_PARTS + ([U_SHARED_WITH] if n % 2 else [])
            n += 1
            batch = {p: [make_record(name, p, seq[p] + i, RECORD_SIZE)
                         for i in range(RECORDS_PER_PARTITION)] for p in parts}
            first = dict(seq)
            for p in parts:
                seq[p] += RECORDS_PER_PARTITION
            targets = frozenset(parts)

            def note(key: str, phase: str, targets: frozenset[str] = targets) -> None:
                self.targets.setdefault(key, targets)
                self.inflight.note(key, phase)

            prod.on_attempt = note
            try:
                acks = await prod.produce(batch)
            except PartitionDeletedError as e:
                self.result.deleted_refusals += 1
                acks = e.acks
            except (ProduceError, ConnectionError) as e:
                self.failed_batches += 1
                self.say(f"u batch not acknowledged (nothing counted): {str(e)[:100]}")
                await asyncio.sleep(0.2)
                continue
            for p, a in acks.items():
                self.runs.append(AckedRun(p, a.base, a.count, name, first[p], RECORD_SIZE,
                                          a.epoch, a.key))
            await asyncio.sleep(PAUSE_S)

    async def _lifecycle(self, access: ProcClusterAccess, work_end: float) -> None:
        """Delete topic u part-way through the run, re-create it later (new incarnation)."""
        span = work_end - time.monotonic()
        await asyncio.sleep(max(0.5, span * DELETE_AT))
        r = await access.controller_call(op="delete_topic", topic=TOPIC_U,
                                         within_s=ASK_S)
        if r.get("status") != "ok":
            raise RuntimeError(f"deleting topic {TOPIC_U!r} failed: {_why(r)}")
        self.u_deleted_at = time.time()
        self.u_deletion_rev = min(int(v) for v in r["partitions"].values())
        self.result.topics_deleted += 1
        self.say(f"deleted topic {TOPIC_U} ({', '.join(sorted(r['partitions']))}) at revision "
                 f"{self.u_deletion_rev}")
        await asyncio.sleep(max(0.5, span * (RECREATE_AT - DELETE_AT)))
        r = await access.controller_call(op="create_topic", topic=TOPIC_U,
                                         partitions=len(U_PARTS), within_s=ASK_S)
        if r.get("status") != "ok":
            raise RuntimeError(f"re-creating topic {TOPIC_U!r} failed: {_why(r)}")
        self.say(f"re-created topic {TOPIC_U} at revision {min(r['partitions'].values())}")

    async def _barrier(self, access: ProcClusterAccess, work_end: float) -> None:
        """Run the epoch barrier on demand part-way through, producers still running."""
        await asyncio.sleep(max(0.5, (work_end - time.monotonic()) * BARRIER_AT))
        r = await access.controller_call(op="barrier", within_s=ASK_S)
        if r.get("status") != "ok":
            raise RuntimeError(f"the epoch barrier failed: {_why(r)}")
        self.result.barrier_candidate = int(r["candidate"])
        self.say(f"epoch barrier: caches invalidated, advance_gc_epoch({r['candidate']}) "
                 "goes to every partition")

    async def _barrier_outcome(self, access: ProcClusterAccess) -> None:
        """How many partitions promoted the barrier's candidate (their leaders' view)."""
        cand = self.result.barrier_candidate
        if cand is None:
            return
        promoted: set[str] = set()
        for n in self.live:
            st = (await access.call(n, op="status")).get("data") or {}
            for p, s in st.get("partitions", {}).items():
                g = s.get("gc_safe_epoch")
                if g is not None and g >= cand:
                    promoted.add(p)
        self.result.barrier_promoted = len(promoted)
        self.say(f"epoch barrier: {len(promoted)} partition(s) promoted its candidate {cand}")

    async def _pause_window(self, access: ProcClusterAccess, work_end: float) -> None:
        """`gc-admin pause` part-way through the run, a GC round while paused (refused: it
        deletes nothing; one under way when the pause came stops at a batch boundary), then
        `gc-admin start`. The round waits for Spark's session, however long its start-up
        takes (newuser13 Q10: the window closed at the work's end, before Spark was ready,
        and showed "0 round(s) refused while paused"). Then the break-glass advance-epoch
        of t/0 (`_break_glass`)."""
        from epochgc.impl.gc.admin import write_admin_state

        await asyncio.sleep(max(0.5, (work_end - time.monotonic()) * PAUSE_AT))
        await asyncio.to_thread(write_admin_state, self.store, True, "demo: pause window",
                                time.time())
        self.say("GC paused (gc-admin pause)")
        if not self.gc.ready():  # said as the drain says it: the wait is Spark's
            self.say("waiting for Spark to finish starting (a round shows the pause)")
        await self._gc_round(access)
        await asyncio.to_thread(write_admin_state, self.store, False, "", time.time())
        self.say("GC resumed (gc-admin start)")
        await self._break_glass(access)

    async def _break_glass(self, access: ProcClusterAccess) -> None:
        """`gc-admin advance-epoch t/0` through its leader's RPC: advanced, or nothing to
        advance (t/0 already applies the leader's cached epoch: a healthy cluster). A
        refusal is the known race (impl/broker/breakglass.py: the leader's cached epoch
        lags the epochs t/0 applied, or a newer one is admitted and not applied): the step
        waits until the leader's status shows its cache at or above what t/0 applied and
        admitted, and asks again (newuser13 Q10: the demo printed the refusal's retry
        advice, in 2 runs of 4 on a loaded host)."""
        for _ in range(BREAK_GLASS_TRIES):
            leader = await self._caught_up_leader(access, "t/0")
            r = await access.call(leader, op="break_glass_advance", partition="t/0")
            status = str(r.get("status"))
            if status not in ("refused", "not_leader", "unreachable", "failed"):
                break
        self.result.gc_break_glass = status
        # "advanced to 17", or the status then its message after a colon (newuser23 F5:
        # "nothing t/0 already applies epoch 16", the status run into the sentence).
        if status != "ok":
            said = f"{status}: {r.get('message', '')}".rstrip(": ")
        elif r.get("advanced_to") is not None:
            said = f"advanced to epoch {r['advanced_to']}"
        else:  # breakglass.py: the fence turned it away (a newer window meanwhile)
            said = "not advanced: a newer window came meanwhile"
        self.say(f"break-glass advance-epoch t/0 on node {leader}: {said}")

    async def _caught_up_leader(self, access: ProcClusterAccess, part: str) -> int:
        """The leader of `part` once its cached cluster epoch is at or above the epochs
        `part` applied and admitted (the state in which break-glass is not refused);
        bounded by STATE_WAIT_S (the leader then, whatever its cache)."""
        end = time.monotonic() + STATE_WAIT_S
        leader = 0
        while True:
            leader = (await self.watch.poll(access, self.live)).get(part) or leader
            if leader:
                st = (await access.call(leader, op="status")).get("data") or {}
                cached = (st.get("controller") or {}).get("cached_epoch")
                p = (st.get("partitions") or {}).get(part) or {}
                applied = (p.get("applied_window") or [None, None])[1]
                seen = (p.get("seen_window") or [None, None, None])[2]
                if (p.get("leader") == leader and cached is not None
                        and all(e is None or cached >= e for e in (applied, seen))):
                    return leader
            if time.monotonic() >= end and leader:
                return leader
            await asyncio.sleep(0.1)

    async def _chaos(self, access: ProcClusterAccess, work_end: float) -> None:
        await asyncio.sleep(max(0.5, (work_end - time.monotonic()) * 0.3))
        leaders = await self.watch.poll(access, self.live)
        victim = leaders.get("t/0") or next(v for v in leaders.values() if v)
        led = [p for p, n in leaders.items() if n == victim]
        self.say(f"SIGKILL node {victim} (leader of {', '.join(led)})")
        self.lc.kill(victim, signal.SIGKILL)
        self.live.remove(victim)
        end = time.monotonic() + 8.0
        while time.monotonic() < end:
            cur = await self.watch.poll(access, self.live)
            if all(cur.get(p) not in (0, victim) for p in led):
                self.say(f"new leaders elected for {', '.join(led)}")
                break
            await asyncio.sleep(0.1)
        pid = await asyncio.to_thread(self.lc.start, victim)
        self.live.append(victim)
        self.say(f"node {victim} restarted (pid {pid})")

    async def _watch_loop(self, access: ProcClusterAccess, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.watch.poll(access, list(self.live))
            await asyncio.sleep(0.25)

    async def _gc_loop(self, access: ProcClusterAccess, stop: asyncio.Event) -> None:
        announced = False
        while not stop.is_set():
            await asyncio.sleep(GC_EVERY_S)
            if self.gc.ready() and not stop.is_set():
                if not announced:  # once the session is there: started, or why not
                    said = self.gc.settle()
                    if said is not None:
                        self.say(said)
                announced = True
                # No round that would end past the workload (Q10: one under way at its end
                # was waited for, past the budget): the final round collects the rest.
                if time.monotonic() + self.round_s() >= self.work_end():
                    return
                await self._gc_round(access)

    # ---- GC and the independent checks ---------------------------------------------------

    def _l0_keys(self) -> set[str]:
        return {i.key for i in self.store.list_all(DATA_PREFIX)}

    async def _gc_round(self, access: ProcClusterAccess, final: bool = False) -> None:
        assert self._round_lock is not None
        async with self._round_lock:  # the loop's, the pause step's, the final: one at a time
            await self._one_round(access, final)

    async def _one_round(self, access: ProcClusterAccess, final: bool) -> None:
        start = time.time()
        began = time.monotonic()
        r = await asyncio.to_thread(self.gc.run_round)
        took = time.monotonic() - began
        end = time.time()
        if not r.paused:  # a refused round is no measure of the final one
            self.last_round_s = took
        self.rounds += 1
        # Deleted = stored before this listing and absent from it (only GC deletes).
        stored = set(self.inflight.stored)
        listing = await asyncio.to_thread(self._l0_keys)
        gone = stored - listing - self.deleted
        self.deleted |= gone
        referenced: set[str] = set()
        for keys in (await in_use_keys(access, list(self.live))).values():
            referenced |= keys
        self.bad |= self.deleted & referenced
        self.bad |= {k for k in gone if self.inflight.overlaps(k, start, end)
                     and not self._orphaned_before(k, start)}
        if r.M is not None:
            self.result.cluster_M = r.M
        if r.paused:
            self.result.gc_paused_rounds += 1
            self.result.gc_paused_deleted += len(gone)
        self.result.gc_stopped_by_pause += r.stopped_by_pause
        self.result.gc_safety_blocked_rounds += r.safety_blocked
        # A paused store's round is refused, not blocked (newuser27 K1: "(blocked: GC is
        # paused ...)"): the two are apart in the exit-code table (3 and 2).
        why = (f" ({'refused' if r.paused else 'blocked'}: {r.blocked})" if r.blocked
               else "")
        # M is None when the round computed none (blocked, paused): said in words, as
        # gc's summary says it (newuser21 X6: "M=None").
        m = "not computed" if r.M is None else str(r.M)
        self.say(f"{'final ' if final else ''}GC round ({r.engine}): M={m}, "
                 f"deleted {len(gone)} object(s){why}")

    def _orphaned_before(self, key: str, start: float) -> bool:
        """Every partition the key's batch was for had been deleted before the round began:
        an in-flight write of it is orphaned (R33) and protects nothing."""
        targets = self.targets.get(key)
        return (targets is not None and self.u_deleted_at is not None
                and self.u_deleted_at < start and targets <= set(U_PARTS))

    async def _drain(self, access: ProcClusterAccess, timeout: float = 3.0) -> None:
        """Let the reconcilers catch up and the next health reports go out."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            pending = 0
            for n in list(self.live):
                st = await access.call(n, op="status")
                if st.get("status") != "ok":
                    continue
                pending += sum(s["unreconciled"] for s in st["data"]["partitions"].values()
                               if s["leader"] == n)
            if pending == 0:
                break
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.2)  # one health-report interval
        if not self.gc.ready():
            self.say("waiting for Spark to finish starting")

    async def _read_back(self, access: ProcClusterAccess) -> None:
        got: dict[str, dict[int, bytes]] = {}
        info = (await access.controller_call(op="meta", within_s=ASK_S))["partitions"]
        for p in sorted(info):
            got[p], unreadable = await access.read_checked(p)
            if unreadable:
                self.say(f"{p}: {len(unreadable)} record(s) unreadable (object gone)")
        # Every acked record of a partition that still exists, in its current incarnation
        # (an earlier one's records were deleted with it, R33: stamped below the creation
        # revision). A run of a partition that no longer exists is not expected anywhere.
        current = [run for run in self.runs if run.partition in info
                   and run.epoch >= int(info[run.partition]["revision"])]
        missing = sorted({run.partition for run in self.runs} - set(info))
        if missing:
            self.say(f"not read back (deleted): {', '.join(missing)}")
        bad = compare(current, got)
        for line in bad[:10]:
            self.say(f"LOST {line}")
        self.result.lost = len(bad)
        self.say(f"read back {sum(len(v) for v in got.values())} records; "
                 f"{sum(r.count for r in current)} acknowledged in partitions that exist, "
                 f"{len(bad)} lost")


@click.command()
@click.option("--seconds", type=FiniteFloat(5, 3600), default=20.0, show_default=True,
              help="budget for the whole run, start-up to clean-up; only Spark's start-up on "
                   f"a slow host, or a budget too short for start-up and {MIN_WORK_S:g}s of "
                   "work, takes it past (the run says by how much)")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
@click.option("--gc-engine", type=click.Choice(["auto", "spark", "model"]), default="auto",
              show_default=True,
              help="auto: Spark when PySpark imports and Java (and the workers' Python) can "
                   "run it, else the model's round, saying why; spark: refused (69) if not")
@click.option("--keep-data", is_flag=True, help="keep the temp data directory")
@click.option("--quiet", is_flag=True, help="no progress on stderr")
def demo(seconds: float, as_json: bool, gc_engine: str, keep_data: bool, quiet: bool) -> None:
    """The whole design in one command: cluster, produce, SIGKILL, reconcile, GC, read-back.
    Progress goes to stderr whatever --json says; stdout holds only the result."""
    if gc_engine == "spark":  # before the cluster starts (issue 41: a traceback after it)
        require_spark("demo --gc-engine spark")
    # The budget counts from the command's start: its imports are the user's wait too
    # (1-2 s of Q10's overrun on a loaded host).
    t0 = started_at() or time.monotonic()

    def say(msg: str) -> None:
        if not quiet:
            click.echo(f"[{time.monotonic() - t0:5.1f}s] {msg}", err=True)

    d = Demo(seconds, say, gc_engine, t0)
    try:
        res = d.run(keep_data)
    except GcFailed as e:  # one line, after the clean-up (newuser16 S11: a traceback)
        raise Refused(f"{e}; {d.ended}", e.exit_code) from None
    over = d.over_budget(seconds, time.monotonic() - t0)
    if over:  # on stderr too: with --json, or stdout sent elsewhere (newuser15 S2)
        say(f"past the budget{over}")
    # Its summary and verdict are its result: once written, a signal no longer changes the
    # exit code (newuser19 V2).
    code = 0 if res.ok() and d.trace_check is None else 1
    with signals.finishing(code):
        if as_json:
            click.echo(json.dumps(asdict(res)))
        else:
            click.echo(
                f"acked {res.acked} records in {res.objects_created} L0 objects; "
                f"lost {res.lost}; stale rejections {res.stale_rejections}; "
                f"leader changes {res.leader_changes}\n"
                f"GC ({d.gc.engine}, {d.rounds} round{'' if d.rounds == 1 else 's'}): deleted "
                f"{res.objects_deleted} objects, "
                f"in use deleted {res.in_use_deleted}; cluster M = {res.cluster_M}\n"
                f"topics deleted {res.topics_deleted} (and re-created), stranded objects "
                f"collected {res.stranded_collected}, refused writes to deleted partitions "
                f"{res.deleted_refusals}\n"
                f"epoch barrier: candidate {res.barrier_candidate}, promoted in "
                f"{res.barrier_promoted} partition(s)\n"
                f"GC operations: {res.gc_paused_rounds} round(s) refused while paused (deleted "
                f"{res.gc_paused_deleted}), {res.gc_stopped_by_pause} stopped by the pause, "
                f"{res.gc_safety_blocked_rounds} blocked by the safety monitor\n"
                f"{'OK' if res.ok() else 'FAILED'} in {time.monotonic() - t0:.1f}s"
                f"{d.over_budget(seconds, time.monotonic() - t0)}"
            )
        if d.trace_check is not None:
            click.echo(f"trace check against the model failed:\n{d.trace_check}", err=True)
    if code:
        sys.exit(code)
