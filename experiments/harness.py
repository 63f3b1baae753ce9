"""Shared harness: drives `impl.sim.cluster.SimCluster` with a seeded open workload.

Built only on SimCluster's public API (plus the `ClusterAccess` protocol the producer takes
and the `IoRunner` protocol): nothing in impl/ is modified.

- Producers stamp an object with the epoch cached by the partition's current leader (the
  broker that serves the produce request), upload it for an in-flight delay (the IoRunner
  sleeps on the logical clock), then fence and replicate its placeholder.
- Epoch-cache lag: selected brokers see the cluster epoch as it was `lag` seconds ago (their
  `EpochCache` is frozen with `SimCluster.lag_cache` at that value and re-frozen every
  10 ms); invalidating such a cache after a stale rejection does not help because the source
  it would refresh from is itself behind.
- Every apply and fence decision is timestamped (the cluster's observer lists are replaced
  by a list that records logical time on append).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import functools
import random
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from epochgc.impl.broker.broker import BrokerConfig
from epochgc.impl.broker.producer import Ack, ProduceError, Producer
from epochgc.impl.partition.commands import AdvanceReconciled, Placeholder
from epochgc.impl.partition.fence import NotLeaderError
from epochgc.impl.partition.statemachine import PlaceholderResult
from epochgc.impl.sim.cluster import SimCluster
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import DATA_PREFIX, parse_key
from epochgc.model.variants import Variant

T = TypeVar("T")


class TimedList(list):  # type: ignore[type-arg]
    """A list that also records the logical time of every append (in `times`)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        super().__init__()
        self.clock = clock
        self.times: list[float] = []

    def append(self, item: Any) -> None:
        self.times.append(self.clock())
        super().append(item)


class EpochHistory:
    """The cluster epochs minted so far, with their (logical) mint times."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.epochs: list[int] = []

    def add(self, t: float, epoch: int) -> None:
        self.times.append(t)
        self.epochs.append(epoch)

    def as_of(self, t: float) -> int:
        i = bisect.bisect_right(self.times, t) - 1
        return self.epochs[max(i, 0)]


class LeaderAccess:
    """ClusterAccess for one produce request on one partition: the stamp comes from the
    epoch cache of the broker that leads the partition when the request is stamped."""

    def __init__(self, w: Workload, partition: str) -> None:
        self.w = w
        self.partition = partition
        self.stamped_by: int | None = None

    def _stamping_broker(self) -> int:
        c = self.w.cluster
        nid = c.leader(self.partition)
        if nid is None:
            nid = self.w.last_leader.get(self.partition, min(c.brokers))
        return nid

    async def cluster_epoch(self) -> int:
        nid = self._stamping_broker()
        self.stamped_by = nid
        return self.w.cluster.brokers[nid].cluster_epoch()

    async def creation_revision(self, partition: str) -> int:
        b = self.w.cluster.brokers[min(self.w.cluster.brokers)]
        return b.creation_revision(partition)

    async def replicate(self, partition: str, ph: Placeholder) -> PlaceholderResult:
        c = self.w.cluster
        nid = c.leader(partition)
        if nid is None:
            raise NotLeaderError(0)
        return await c.brokers[nid].replicate(partition, ph)

    def invalidate_epoch(self) -> None:
        nid = self.stamped_by
        if nid is not None and nid in self.w.cluster.brokers and nid not in self.w.lagged:
            self.w.cluster.refresh_cache(nid)


@dataclass
class ObjectRecord:
    key: str
    partitions: tuple[str, ...]
    size: int
    epoch: int
    stamped: float  # when the epoch was read (= upload start)
    stored: float | None = None  # upload finished
    settled: float | None = None  # the produce attempt has an outcome
    acked: bool = False


@dataclass
class Outcome:
    partition: str
    started: float
    finished: float
    ack: Ack | None
    records: list[bytes]
    retries: int
    stale: int


@dataclass
class WorkloadConfig:
    seed: int
    variant: Variant
    partitions: tuple[str, ...] = ("t/0", "t/1")
    epoch_interval: float = 1.0  # T: a new cluster epoch is minted every T seconds
    upload_delay: float = 0.1  # D: mean in-flight delay between stamp and fence
    cache_lag: float = 0.0  # L: lagged brokers see the epoch as of L seconds ago
    lagged_nodes: tuple[int, ...] = (2, 3)
    producers_per_partition: int = 3
    think_time: float = 0.1  # mean pause between a producer's requests
    record_size: int = 64
    duration: float = 20.0
    warmup: float = 2.0
    leader_change_every: float | None = 4.0  # leadership moves fresh <-> lagged
    reconcile_interval: float | None = 0.5
    housekeep_interval: float | None = 1.0
    health_interval: float | None = 0.5
    publish_interval: float | None = 0.5
    gc_interval: float | None = 1.0
    max_attempts: int = 8
    shared_objects: bool = False  # one object per request spanning every partition
    sample_interval: float = 0.25
    # The epoch barrier experiment (issue 30): partitions nobody writes to, how long a
    # partition must be still before the housekeeper treats it as idle, and the automatic
    # barrier (None: none runs).
    idle_partitions: tuple[str, ...] = ()
    idle_after: float = 2.0
    barrier_after: float | None = None


@dataclass
class GcRoundLog:
    t: float
    M: int | None
    blocked: str | None
    deleted: list[str]


@dataclass
class Workload:
    cfg: WorkloadConfig
    cluster: SimCluster = field(init=False)
    tmp: str = field(init=False)
    history: EpochHistory = field(default_factory=EpochHistory)
    lagged: set[int] = field(default_factory=set)
    last_leader: dict[str, int] = field(default_factory=dict)
    objects: dict[str, ObjectRecord] = field(default_factory=dict)
    outcomes: list[Outcome] = field(default_factory=list)
    changes: list[tuple[str, float, int, int]] = field(default_factory=list)  # p, t, from, to
    gc_rounds: list[GcRoundLog] = field(default_factory=list)
    samples: list[tuple[float, set[str]]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    _bg: set[asyncio.Future[None]] = field(default_factory=set)
    t0: float = 0.0
    end: float = 0.0

    def __post_init__(self) -> None:
        cfg = self.cfg
        self.tmp = tempfile.mkdtemp(prefix="epochgc-exp-")
        self.rng = random.Random(cfg.seed)

        def broker_config(nid: int) -> BrokerConfig:
            return BrokerConfig(
                node_name=f"n{nid}",
                epoch_cache_ttl=0.05,
                mint_interval=None,  # the workload mints on its own exact schedule
                publish_interval=cfg.publish_interval,
                health_interval=cfg.health_interval,
                reconcile_interval=cfg.reconcile_interval,
                housekeep_interval=cfg.housekeep_interval,
                idle_after=cfg.idle_after,
                barrier_after=cfg.barrier_after,
                initial_partitions=cfg.partitions,
                variant=cfg.variant,
            )

        self.cluster = SimCluster(
            seed=cfg.seed,
            partitions=cfg.partitions,
            store=LocalStore(self.tmp, create=True),
            variant=cfg.variant,
            services=True,
            broker_config=broker_config,
        )
        self.cluster.apply_log = TimedList(self.cluster.loop.time)
        self.cluster.fence_log = TimedList(self.cluster.loop.time)
        self.lagged = set(cfg.lagged_nodes) if cfg.cache_lag > 0 else set()

    # ---- pieces run as tasks on the simulated loop ------------------------------------------

    def now(self) -> float:
        return self.cluster.loop.time()

    async def _io(self, fn: Callable[[], T]) -> T:
        """IoRunner with the in-flight delay: an L0 upload takes D (uniform in [0, 2D])."""
        if isinstance(fn, functools.partial) and fn.args and isinstance(fn.args[0], str):
            key = fn.args[0]
            if key.startswith(DATA_PREFIX) and self.cfg.upload_delay > 0:
                await asyncio.sleep(self.rng.uniform(0, 2 * self.cfg.upload_delay))
            r = fn()
            rec = self.objects.get(key)
            if rec is not None:
                rec.stored = self.now()
            return r  # type: ignore[no-any-return]
        return fn()

    def _new_producer(self, stamp_partition: str) -> tuple[Producer, LeaderAccess]:
        acc = LeaderAccess(self, stamp_partition)
        prod = Producer(acc, self.cluster.store, self._io,
                        random.Random(self.rng.getrandbits(64)),
                        max_attempts=self.cfg.max_attempts)
        orig_build = prod._build

        def build(epoch: int, pending: dict[str, list[bytes]]) -> Any:
            key, phs, data = orig_build(epoch, pending)
            self.objects[key] = ObjectRecord(key, tuple(sorted(phs)), len(data), epoch,
                                             self.now())
            return key, phs, data

        prod._build = build  # type: ignore[method-assign]
        return prod, acc

    async def _producer(self, partitions: tuple[str, ...], idx: int) -> None:
        """One client: a request writes one record to each of `partitions` (one L0 object
        shared by all of them), stamped by the first partition's leader."""
        rng = random.Random(self.rng.getrandbits(64))
        n = 0
        await asyncio.sleep(rng.uniform(0, self.cfg.think_time))
        while self.now() < self.end:
            batch = {p: [f"{p}|{idx}|{n}".encode().ljust(self.cfg.record_size, b".")]
                     for p in partitions}
            n += 1
            prod, _ = self._new_producer(partitions[0])
            start = self.now()
            acks: dict[str, Ack] = {}
            # On ProduceError the partitions acknowledged before the error are not reported:
            # they count as not acknowledged (conservative for the read-back check).
            with contextlib.suppress(ProduceError):
                acks = await prod.produce(batch)
            fin = self.now()
            for k in prod.stats.keys:
                self.objects[k].settled = fin
            for ack in acks.values():
                self.cluster.acked.append(ack)
                self.objects[ack.key].acked = True
            for p in partitions:
                self.outcomes.append(Outcome(p, start, fin, acks.get(p), batch[p],
                                             prod.stats.retries, prod.stats.stale_rejections))
            await asyncio.sleep(rng.expovariate(1 / self.cfg.think_time))

    async def _minter(self) -> None:
        c = self.cluster
        while self.now() < self.end:
            await asyncio.sleep(self.cfg.epoch_interval)
            nid = c.controller_leader()
            if nid is None or nid not in c.brokers:
                continue
            try:
                e = await c.brokers[nid].mint()
            except Exception:
                continue
            self.history.add(self.now(), e)

    async def _lagger(self) -> None:
        c = self.cluster
        while True:
            for nid in self.lagged:
                if nid in c.brokers:
                    c.lag_cache(nid, self.history.as_of(self.now() - self.cfg.cache_lag))
            await asyncio.sleep(0.01)

    async def _leader_mover(self) -> None:
        """Move every partition's leadership every `leader_change_every` seconds, alternating
        between the fresh node (1) and the lagged ones (2, 3): 1 -> 2 -> 1 -> 3 -> 1 ..."""
        c = self.cluster
        every = self.cfg.leader_change_every
        assert every is not None
        targets = [2, 1, 3, 1]
        i = 0
        while self.now() + every < self.end:
            await asyncio.sleep(every)
            tgt = targets[i % len(targets)]
            i += 1
            for p in self.cfg.partitions:
                cur = c.leader(p)
                if cur is None or cur == tgt:
                    continue
                try:
                    c.transfer_leadership(p, tgt)
                except Exception:
                    continue
                self._bg.add(asyncio.ensure_future(self._await_change(p, cur, tgt)))

    async def _await_change(self, p: str, frm: int, to: int) -> None:
        c = self.cluster
        for _ in range(300):
            if c.leader(p) == to:
                self.changes.append((p, self.now(), frm, to))
                self.last_leader[p] = to
                return
            await asyncio.sleep(0.01)

    async def _gc(self) -> None:
        c = self.cluster
        assert self.cfg.gc_interval is not None
        while True:
            await asyncio.sleep(self.cfg.gc_interval)
            try:
                r = c.gc(grace_s=0.0)
            except Exception as e:
                self.gc_rounds.append(GcRoundLog(self.now(), None, f"error: {e}", []))
                continue
            self.gc_rounds.append(GcRoundLog(self.now(), r.M, r.blocked, list(r.deleted)))
            self._check_deleted(set(r.deleted))

    async def _sampler(self) -> None:
        while True:
            live = {o.key for o in self.cluster.store.list_all(DATA_PREFIX)}
            self.samples.append((self.now(), live))
            await asyncio.sleep(self.cfg.sample_interval)

    # ---- independent safety checks -----------------------------------------------------------

    def _check_deleted(self, deleted: set[str]) -> None:
        """No object referenced by a committed, unreconciled placeholder may be gone: derived
        from the replica states (every applied placeholder is committed) and the store."""
        if not deleted:
            return
        c = self.cluster
        for p in self.cfg.partitions:
            for nid, b in sorted(c.brokers.items()):
                rep = b.replicas.get(p)
                if rep is None:
                    continue
                st = rep.sm.state
                for ph in rep.sm.placeholders:
                    reconciled = (ph.last <= st.last_reconciled_offset
                                  and ph.log_index <= st.last_reconciled_log_offset)
                    if not reconciled and ph.key in deleted:
                        self.violations.append(
                            f"t={self.now():.2f} n{nid} {p}: GC deleted {ph.key} "
                            f"(epoch {ph.epoch}) still referenced at log index {ph.log_index}")
                m = rep.sm.inactive_epoch()
                for ph in rep.sm.unreconciled():
                    if m is not None and m >= ph.epoch:
                        self.violations.append(
                            f"t={self.now():.2f} n{nid} {p}: M(p)={m} >= unreconciled "
                            f"placeholder epoch {ph.epoch}")

    def _check_reads(self) -> None:
        c = self.cluster
        for p in self.cfg.partitions:
            nid = c.leader(p)
            if nid is None:
                self.violations.append(f"{p}: no leader at the end, cannot read back")
                continue
            try:
                got = dict(c.read_all(p, via=nid))
            except Exception as e:
                self.violations.append(f"{p}: read failed: {e}")
                continue
            for o in self.outcomes:
                if o.partition != p or o.ack is None:
                    continue
                for i, rec in enumerate(o.records):
                    if got.get(o.ack.base + i) != rec:
                        self.violations.append(
                            f"{p}: acked record at offset {o.ack.base + i} reads back as "
                            f"{got.get(o.ack.base + i)!r}, expected {rec!r}")

    def _has_leader(self, p: str) -> bool:
        return self.cluster.leader(p) is not None

    def _led_by(self, p: str, nid: int) -> bool:
        return self.cluster.leader(p) == nid

    # ---- run ---------------------------------------------------------------------------------

    def run(self) -> Workload:
        c = self.cluster
        cfg = self.cfg
        c.bootstrap(mint=False)
        e = c.mint()
        self.history.add(c.loop.time(), e)
        for p in cfg.partitions:
            c.run_until(functools.partial(self._has_leader, p))
            if c.leader(p) != 1:
                c.transfer_leadership(p, 1)
                c.run_until(functools.partial(self._led_by, p, 1))
            self.last_leader[p] = 1
        self.t0 = c.loop.time()
        self.end = self.t0 + cfg.duration
        c.spawn(self._lagger())
        c.spawn(self._minter())
        written = tuple(p for p in cfg.partitions if p not in cfg.idle_partitions)
        groups = ([written] if cfg.shared_objects else [(p,) for p in written])
        tasks = [c.spawn(self._producer(g, i)) for g in groups
                 for i in range(cfg.producers_per_partition)]
        if cfg.leader_change_every:
            c.spawn(self._leader_mover())
        if cfg.gc_interval:
            c.spawn(self._gc())
        c.spawn(self._sampler())
        c.run_until(lambda: self.now() >= self.end and all(t.done() for t in tasks),
                    max_steps=10_000_000)
        for t in tasks:
            if t.done() and t.exception() is not None:
                raise t.exception()  # type: ignore[misc]
        c.run_for(0.5)
        self._check_reads()
        return self

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def run_workload(cfg: WorkloadConfig) -> Workload:
    w = Workload(cfg)
    try:
        return w.run()
    finally:
        w.close()


__all__ = ["AdvanceReconciled", "Workload", "WorkloadConfig", "parse_key", "run_workload"]
