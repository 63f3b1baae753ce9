"""One broker: a Raft host (RaftServer over TCP, or the simulator's host) carrying the
controller replica and every partition replica, all groups on one loop and one tick timer,
plus the services that run on it: epoch service and partition-table publisher (controller
leader), reconciler and housekeeper (per partition leader), health reporter (every broker).

The same class runs in both worlds; only the RaftPort, the IoRunner, the loop and the wall
clock differ.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from epochgc.impl.broker.barrier import (
    BarrierStep,
    advance_gc_epoch_once,
    needs_barrier,
    promotable,
)
from epochgc.impl.broker.health import ReplicaReport, health_document, health_key
from epochgc.impl.broker.housekeeper import HousekeepResult, housekeep_once
from epochgc.impl.broker.metrics import NodeMetrics
from epochgc.impl.broker.raftport import GroupHandle, IoRunner, RaftPort
from epochgc.impl.broker.reconciler import ReconcileResult, reconcile_once
from epochgc.impl.broker.records import read_records
from epochgc.impl.broker.storefailing import StoreFailing
from epochgc.impl.controller.epochcache import EpochCache
from epochgc.impl.controller.publisher import publish_partitions
from epochgc.impl.controller.statemachine import (
    ControllerStateMachine,
    PartitionInfo,
    encode_create,
    encode_delete,
    encode_mint,
    encode_mint_barrier,
)
from epochgc.impl.controller.topics import check_create, check_delete
from epochgc.impl.partition.commands import Placeholder
from epochgc.impl.partition.commands import encode as encode_command
from epochgc.impl.partition.fence import (
    FenceDecision,
    NotLeaderError,
    PartitionDeleted,
    PartitionFence,
    StaleEpoch,
)
from epochgc.impl.partition.statemachine import ApplyEvent, PartitionStateMachine, PlaceholderResult
from epochgc.impl.store.base import ObjectStore, StoreError
from epochgc.model.partition import window
from epochgc.model.variants import REFERENCE, Variant

CONTROLLER_GROUP = 1
log = logging.getLogger("epochgc.broker")


@dataclass
class BrokerConfig:
    node_name: str
    epoch_cache_ttl: float = 2.0
    mint_interval: float | None = 3.0  # None: epochs are minted only on request
    publish_interval: float | None = 1.0
    health_interval: float | None = 1.0
    reconcile_interval: float | None = 0.5
    housekeep_interval: float | None = 1.0
    idle_after: float = 2.0  # a partition whose state did not move this long is idle
    initial_partitions: tuple[str, ...] = ()  # the controller leader creates missing ones
    variant: Variant = REFERENCE
    bench_ops: bool = False  # serve `propose_unfenced` (benchmarks only; off by default)
    # The fence releases a placeholder's shared lock once it is queued into Raft (True) or
    # holds it through the replicate (False): `impl/partition/fence.py`.
    release_at_enqueue: bool = True
    # The epoch barrier (R36-R38): how often a partition leader catches its partitions up
    # with the controller's barrier candidate (None: never), and, on the controller leader,
    # how long the minimum M(p) of its replicas may stay still before it runs a barrier by
    # itself (None: only on demand, `epochgc cluster barrier`).
    barrier_interval: float | None = 1.0
    barrier_after: float | None = None


@dataclass
class Replica:
    info: PartitionInfo
    sm: PartitionStateMachine
    fence: PartitionFence
    last_change: float = 0.0


@dataclass
class Hooks:
    """Observers for the conformance harness: every fence and apply decision."""

    on_fence: Callable[[int, str, FenceDecision], None] | None = None
    on_apply: Callable[[int, str, ApplyEvent], None] | None = None
    on_admitted: Callable[[int, str, Placeholder, int], None] | None = None
    # An observer that stopped (the trace: a write failed, impl/trace.py), for the node's
    # status answer: None while it observes.
    status: Callable[[], dict[str, object] | None] | None = None


class Broker:
    def __init__(
        self,
        port: RaftPort,
        store: ObjectStore,
        config: BrokerConfig,
        loop: asyncio.AbstractEventLoop,
        wall: Callable[[], float],
        io: IoRunner,
        metrics: NodeMetrics | None = None,
        hooks: Hooks | None = None,
    ) -> None:
        self.port = port
        self.node_id = port.node_id
        self.store = store
        self.config = config
        self.loop = loop
        self.wall = wall
        self.io = io
        self.metrics = metrics or NodeMetrics()
        self.hooks = hooks or Hooks()
        self.replicas: dict[str, Replica] = {}
        self.by_group: dict[int, Replica] = {}
        self.leader_changes = 0
        self._tasks: list[asyncio.Task[None]] = []
        self.store_failing = StoreFailing(wall)
        self._sync_scheduled = False
        self.controller = ControllerStateMachine()
        self.controller.on_change = self._controller_changed
        self.controller.on_barrier = self._on_barrier
        self.barrier_steps: list[BarrierStep] = []  # what this broker's barrier rounds wrote
        self._stalled_since: tuple[int | None, float] | None = None  # (min M(p), since)
        self.cache = EpochCache(lambda: self.controller.epoch, loop.time, config.epoch_cache_ttl)
        port.add_group(CONTROLLER_GROUP, self.controller)
        port.host.on_leader_change = self._on_leader_change
        self.sync_partitions()

    # ---- groups --------------------------------------------------------------------------

    def _controller_changed(self) -> None:
        # A deleted partition refuses writes at once (R34): the controller group applies
        # before the partition groups of the same Ready batch, so not even an entry of this
        # batch is accepted after the deletion is applied here.
        for rep in self.replicas.values():
            if not self._current(rep.info):
                rep.sm.deleted = True
        # Called from inside the Ready loop: add groups afterwards, not in the middle of it.
        if not self._sync_scheduled:
            self._sync_scheduled = True
            self.loop.call_soon(self.sync_partitions)

    def _on_barrier(self, candidate: int) -> None:
        """A barrier mint was applied here: no cached epoch may stay at or below the
        candidate (R36), so the cache is dropped; this broker's partition leaders then
        write advance_gc_epoch(candidate) on their next barrier round."""
        self.cache.invalidate()
        log.info("epoch barrier", extra={"candidate": candidate, "node": self.node_id})

    def _current(self, info: PartitionInfo) -> bool:
        """Is this incarnation still in the partition table?"""
        now = self.controller.partitions.get(info.name)
        return now is not None and now.creation_revision == info.creation_revision

    def sync_partitions(self) -> None:
        self._sync_scheduled = False
        # Deleted incarnations first (R32): stop the group, drop the replica's state in
        # memory and on disk; also a group left on disk by a crash mid-removal.
        for name, rep in sorted(self.replicas.items()):
            if not self._current(rep.info):
                rep.sm.deleted = True
                del self.replicas[name]
                self.by_group.pop(rep.info.group, None)
                self.port.remove_group(rep.info.group)
                log.info("partition removed", extra={"partition": name,
                                                      "group": rep.info.group})
        for d in self.controller.deleted.values():
            if not self.port.removed(d.group):
                self.port.remove_group(d.group)
        for name, info in sorted(self.controller.partitions.items()):
            if name in self.replicas or self.port.removed(info.group):
                continue
            sm = PartitionStateMachine(self.config.variant,
                                       creation_revision=info.creation_revision)
            fence = PartitionFence(
                GroupHandle(self.port, info.group), sm, self.config.variant,
                on_decision=functools.partial(self._on_fence, name),
                on_admitted=functools.partial(self._on_admitted, name),
                name=name, release_at_enqueue=self.config.release_at_enqueue,
            )
            rep = Replica(info, sm, fence, self.loop.time())
            sm.on_apply = functools.partial(self._on_apply, rep)
            self.replicas[name] = rep
            self.by_group[info.group] = rep
            self.port.add_group(info.group, sm)

    def _on_fence(self, name: str, d: FenceDecision) -> None:
        self.metrics.on_fence(name, d)
        if self.hooks.on_fence is not None:
            self.hooks.on_fence(self.node_id, name, d)

    def _on_admitted(self, name: str, ph: Placeholder, term: int) -> None:
        if self.hooks.on_admitted is not None:
            self.hooks.on_admitted(self.node_id, name, ph, term)

    def _on_apply(self, rep: Replica, ev: ApplyEvent) -> None:
        if rep.sm.deleted:
            return  # refused, nothing changed: the partition is gone (no model step either)
        rep.last_change = self.loop.time()
        self.metrics.on_apply(rep.info.name, ev, rep.sm.next_offset)
        if self.hooks.on_apply is not None:
            self.hooks.on_apply(self.node_id, rep.info.name, ev)

    def _on_leader_change(self, group: int, term: int, leader: int, i_lead: bool) -> None:
        rep = self.by_group.get(group)
        if rep is not None:
            rep.fence.on_leadership(term, i_lead)
        if i_lead:
            self.leader_changes += 1
            self.metrics.leader_changes.labels(str(group)).inc()
            log.info("leadership", extra={"group": group, "term": term, "node": self.node_id})

    # ---- queries -------------------------------------------------------------------------

    def cluster_epoch(self) -> int:
        return self.cache.get()

    def creation_revision(self, name: str) -> int:
        info = self.controller.partitions.get(name)
        if info is None:
            if self.controller.ever_deleted(name):
                raise PartitionDeleted(name, "upload: no such partition")
            raise KeyError(f"unknown partition {name!r}")
        return info.creation_revision

    def replica(self, name: str) -> Replica:
        rep = self.replicas.get(name)
        if rep is None:
            if name not in self.controller.partitions and self.controller.ever_deleted(name):
                raise PartitionDeleted(name, "fence")
            raise NotLeaderError(0)  # not known here yet: the caller retries elsewhere
        return rep

    def leads(self, name: str) -> bool:
        rep = self.replicas.get(name)
        return rep is not None and self.port.is_leader(rep.info.group)

    def read(self, name: str, offset: int, max_records: int = 1000,
             max_bytes: int | None = None) -> list[tuple[int, bytes]]:
        return read_records(self.replica(name).sm, self.store, offset, max_records, max_bytes)

    def status(self) -> dict[str, Any]:
        parts: dict[str, Any] = {}
        for name, rep in sorted(self.replicas.items()):
            if rep.sm.deleted:
                continue
            g = rep.info.group
            s, seen = rep.sm.state, rep.fence.seen
            parts[name] = {
                "group": g,
                "creation_revision": rep.info.creation_revision,
                "leader": self.port.leader(g),
                "term": self.port.term(g),
                "applied_window": window(s),
                "seen_window": None if seen is None else [seen.term, seen.previous, seen.max],
                "min_epoch_lower_bound": s.min_epoch_lower_bound,
                # pending (R36) until promoted (R38); null: none
                "barrier_epoch": s.barrier_epoch if s.barrier_epoch >= 0 else None,
                "gc_safe_epoch": s.gc_safe_epoch if s.gc_safe_epoch >= 0 else None,
                "lro": s.last_reconciled_offset,
                "lrlo": s.last_reconciled_log_offset,
                "next_offset": rep.sm.next_offset,
                "inactive_epoch": rep.sm.inactive_epoch(),
                "unreconciled": len(rep.sm.unreconciled()),
            }
        return {
            "node": self.node_id,
            "name": self.config.node_name,
            "controller": {
                "leader": self.port.leader(CONTROLLER_GROUP),
                "term": self.port.term(CONTROLLER_GROUP),
                "revision": self.controller.revision,
                "epoch": self.controller.epoch,
                "deleted": [[d.name, d.creation_revision, d.deletion_revision]
                            for _, d in sorted(self.controller.deleted.items())],
                "cached_epoch": self.cache.cached,
                "barrier_candidate": self.controller.barrier_candidate,
            },
            "partitions": parts,
            "storage_failing": self.store_failing.failing(),
            "trace_stopped": None if self.hooks.status is None else self.hooks.status(),
        }

    # ---- operations ----------------------------------------------------------------------

    async def replicate(self, name: str, ph: Placeholder) -> PlaceholderResult:
        rep = self.replica(name)
        try:
            return await rep.fence.replicate_placeholder(ph)
        except StaleEpoch as e:
            # Below the creation revision of a re-created partition: the write was stamped
            # for an earlier incarnation, which is deleted (R35): say so.
            if ph.epoch < rep.info.creation_revision and self.controller.ever_deleted(name):
                raise PartitionDeleted(name, f"{e.at}: epoch {ph.epoch} was stamped for an "
                                       "earlier, deleted incarnation") from e
            raise

    async def propose_unfenced(self, name: str, ph: Placeholder) -> PlaceholderResult:
        """The benchmark's baseline: the same placeholder bytes proposed straight to the
        Raft core (expected-term, no sync, no lock, no fence decision). Apply still checks
        the window, so even this cannot land a stale write."""
        if not self.config.bench_ops:
            raise ValueError("propose_unfenced is disabled (start the node with --bench-ops)")
        g = self.replica(name).info.group
        if not self.port.is_leader(g):
            raise NotLeaderError(self.port.leader(g))
        res = await self.port.propose(g, encode_command(ph), expected_term=self.port.term(g))
        assert isinstance(res, PlaceholderResult)
        return res

    async def _controller_propose(self, data: bytes) -> int:
        if not self.port.is_leader(CONTROLLER_GROUP):
            raise NotLeaderError(self.port.leader(CONTROLLER_GROUP))
        term = self.port.term(CONTROLLER_GROUP)
        result = await self.port.propose(CONTROLLER_GROUP, data, expected_term=term)
        return int(result)

    async def mint(self) -> int:
        """Mint a new cluster epoch (controller leader only); returns it."""
        return await self._controller_propose(encode_mint())

    async def barrier(self) -> int:
        """Start an epoch barrier (controller leader only): mint a new epoch with the
        barrier mint, whose apply invalidates every broker's epoch cache; returns the
        candidate (the revision before it). Each partition leader then drains and writes
        advance_gc_epoch(candidate) on its barrier round (`impl.broker.barrier`)."""
        rev = await self._controller_propose(encode_mint_barrier())
        return rev - 1

    async def barrier_round(self) -> list[BarrierStep]:
        """Catch every partition this broker leads up with the controller's barrier
        candidate (drain, write, LRLO over commands); returns what it did."""
        cand = self.controller.barrier_candidate
        out: list[BarrierStep] = []
        for name, rep in sorted(self.replicas.items()):
            if rep.sm.deleted or not self.leads(name) or not (
                    needs_barrier(rep.sm, cand) or promotable(rep.sm)):
                continue
            step: list[BarrierStep] = []

            async def one(name: str = name, rep: Replica = rep,
                          step: list[BarrierStep] = step) -> None:
                step.append(await advance_gc_epoch_once(name, rep.sm, rep.fence, cand))

            await self._unless_deleted(rep, one())
            out += step
        self.barrier_steps += out
        return out

    async def create_partition(self, name: str) -> int:
        """Create a partition (controller leader only); returns its creation revision."""
        if name in self.controller.partitions:
            return self.controller.partitions[name].creation_revision
        await self._controller_propose(encode_create(name))
        return self.controller.partitions[name].creation_revision

    async def delete_partition(self, name: str) -> int:
        """Delete a partition (controller leader only); returns the deletion's revision.
        KeyError if no such partition exists (nothing is proposed then)."""
        if name not in self.controller.partitions:
            raise KeyError(f"no partition {name!r} to delete")
        await self._controller_propose(encode_delete(name))
        d = self.controller.last_deletion(name)
        assert d is not None
        return d.deletion_revision

    async def create_topic(self, topic: str, partitions: int) -> dict[str, int]:
        """Create TOPIC/0..N-1 (controller leader only): name -> creation revision.
        TopicError (nothing proposed) if the name is bad or the topic exists."""
        self._require_controller_leader()
        out: dict[str, int] = {}
        for name in check_create(self.controller, topic, partitions):
            out[name] = await self.create_partition(name)
        return out

    async def delete_topic(self, topic: str) -> dict[str, int]:
        """Delete every partition of TOPIC (controller leader only): name -> deletion
        revision. TopicError (nothing proposed) if the name is bad or the topic unknown."""
        self._require_controller_leader()
        out: dict[str, int] = {}
        for name in check_delete(self.controller, topic):
            out[name] = await self.delete_partition(name)
        return out

    def _require_controller_leader(self) -> None:
        if not self.port.is_leader(CONTROLLER_GROUP):
            raise NotLeaderError(self.port.leader(CONTROLLER_GROUP))

    async def reconcile(self, name: str) -> ReconcileResult:
        rep = self.replica(name)
        return await reconcile_once(name, rep.sm, rep.fence, self.store, self.io)

    async def housekeep(self, name: str) -> HousekeepResult:
        rep = self.replica(name)
        return await housekeep_once(
            rep.sm, rep.fence, self.cluster_epoch(), rep.info.creation_revision
        )

    def health_replicas(self) -> list[ReplicaReport]:
        return [
            ReplicaReport(
                name,
                self.port.term(rep.info.group),
                rep.sm.inactive_epoch(),
                rep.info.creation_revision,
            )
            for name, rep in sorted(self.replicas.items())
            if not rep.sm.deleted  # a deleted partition is no longer reported (R32)
        ]

    async def publish_health(self) -> None:
        doc = health_document(self.config.node_name, self.wall(), self.health_replicas())
        await self.io(functools.partial(self.store.put, health_key(self.config.node_name), doc))

    async def publish_partitions(self) -> int:
        # A leader that has not yet committed an entry of its term may hold a stale table
        # and would publish a revision below one already published (M going backwards).
        if not (self.port.is_leader(CONTROLLER_GROUP)
                and self.port.host.reads_current(CONTROLLER_GROUP)):
            raise NotLeaderError(self.port.leader(CONTROLLER_GROUP))
        rev: int = await self.io(functools.partial(publish_partitions, self.store, self.controller))
        return rev

    # ---- periodic services ---------------------------------------------------------------

    def start(self) -> None:
        c = self.config
        plan: list[tuple[float | None, Callable[[], Awaitable[Any]]]] = [
            (c.mint_interval, self._mint_tick),
            (c.publish_interval, self._publish_tick),
            (c.health_interval, self.publish_health),
            (c.reconcile_interval, self._reconcile_tick),
            (c.housekeep_interval, self._housekeep_tick),
            (c.barrier_interval, self._barrier_tick),
        ]
        for interval, fn in plan:
            if interval is not None:
                self._tasks.append(self.loop.create_task(self._every(interval, fn)))

    def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        self._tasks.clear()

    async def _every(self, interval: float, fn: Callable[[], Awaitable[Any]]) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except StoreError as e:  # said at warning if it keeps failing (newuser16 S8)
                self.store_failing.failed(fn.__name__, str(e))
            except Exception as e:  # a service round failing is retried next interval
                log.info("service round failed", extra={"service": fn.__name__, "error": str(e)})
            else:
                self.store_failing.ok(fn.__name__)

    async def _mint_tick(self) -> None:
        if self.port.is_leader(CONTROLLER_GROUP):
            for name in self.config.initial_partitions:
                # A deleted partition stays deleted: only never-seen names are created.
                if name not in self.controller.partitions and not self.controller.ever_deleted(
                    name
                ):
                    await self.create_partition(name)
            await self.mint()

    async def _publish_tick(self) -> None:
        if self.port.is_leader(CONTROLLER_GROUP):
            await self.publish_partitions()

    async def _reconcile_tick(self) -> None:
        for name, rep in sorted(self.replicas.items()):
            if not rep.sm.deleted and self.leads(name) and rep.sm.unreconciled():
                await self._unless_deleted(rep, self.reconcile(name))

    async def _housekeep_tick(self) -> None:
        now = self.loop.time()
        for name, rep in sorted(self.replicas.items()):
            if (not rep.sm.deleted and self.leads(name)
                    and now - rep.last_change >= self.config.idle_after):
                await self._unless_deleted(rep, self.housekeep(name))
                rep.last_change = now

    async def _barrier_tick(self) -> None:
        if self.config.barrier_after is not None and self.port.is_leader(CONTROLLER_GROUP):
            await self._maybe_auto_barrier(self.config.barrier_after)
        await self.barrier_round()

    def min_inactive(self) -> int | None:
        """The lowest M(p) over this broker's replicas (a lagging replica is lower: only
        an earlier barrier follows from that); None if some partition has none."""
        vals = [rep.sm.inactive_epoch() for rep in self.replicas.values() if not rep.sm.deleted]
        if not vals or any(v is None for v in vals):
            return None
        return min(v for v in vals if v is not None)

    async def _maybe_auto_barrier(self, after: float) -> None:
        """Run a barrier when the minimum M(p) has not moved for `after` seconds."""
        now, m = self.loop.time(), self.min_inactive()
        if self._stalled_since is None or self._stalled_since[0] != m:
            self._stalled_since = (m, now)
            return
        if now - self._stalled_since[1] >= after and self.replicas:
            await self.barrier()
            self._stalled_since = (m, now)

    @staticmethod
    async def _unless_deleted(rep: Replica, work: Awaitable[Any]) -> None:
        """A service round of a partition deleted under it stops quietly (its group is
        gone); any other failure is the caller's."""
        try:
            await work
        except Exception:
            if not rep.sm.deleted:
                raise
            log.info("service round stopped: partition deleted",
                     extra={"partition": rep.info.name})
