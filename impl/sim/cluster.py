"""SimCluster: controller, brokers, producers, reconcilers, housekeepers and health reports
in one process on the Raft simulator, with an injected logical clock; deterministic for a
seed. Every operation a conformance harness needs is one method; every fence and apply
decision is recorded (`fence_log`, `apply_log`).

Time: one simulator unit is 1/100 s of loop time (a Raft tick is 10 units = 0.1 s), and
asyncio timers (sleeps, timeouts) fire on that logical clock between simulator events.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import random
import shutil
import tempfile
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from epochgc.impl.broker.broker import CONTROLLER_GROUP, Broker, BrokerConfig, Hooks
from epochgc.impl.broker.metrics import NodeMetrics
from epochgc.impl.broker.producer import Ack, Producer
from epochgc.impl.broker.raftport import inline_io
from epochgc.impl.cluster.gcround import GcRound, gc_round
from epochgc.impl.controller.statemachine import ControllerStateMachine
from epochgc.impl.partition.commands import Placeholder
from epochgc.impl.partition.fence import FenceDecision, NotLeaderError
from epochgc.impl.partition.statemachine import ApplyEvent, PlaceholderResult
from epochgc.impl.raft.host import MultiRaftHost
from epochgc.impl.raft.node import Config
from epochgc.impl.raft.simtypes import Faults
from epochgc.impl.sim.loop import SimLoop
from epochgc.impl.sim.network import BrokerSimulator
from epochgc.impl.sim.port import SimRaftPort
from epochgc.impl.store.base import ObjectStore
from epochgc.impl.store.local import LocalStore
from epochgc.model.fence import SeenWindow
from epochgc.model.partition import PartitionState
from epochgc.model.variants import REFERENCE, Variant

T = TypeVar("T")
UNITS_PER_SECOND = 100


@dataclass(frozen=True)
class FenceRecord:
    node: int
    partition: str
    decision: FenceDecision


@dataclass(frozen=True)
class ApplyRecord:
    node: int
    partition: str
    event: ApplyEvent


class SimClusterAccess:
    """The producer's view of the simulated cluster: epoch from one broker's cache, routing to
    whichever live broker leads the partition."""

    def __init__(self, cluster: SimCluster, via: int) -> None:
        self.cluster = cluster
        self.via = via

    def _broker(self) -> Broker:
        b = self.cluster.brokers.get(self.via)
        if b is None:
            b = next(iter(self.cluster.brokers.values()))
        return b

    async def cluster_epoch(self) -> int:
        return self._broker().cluster_epoch()

    async def creation_revision(self, partition: str) -> int:
        return self._broker().creation_revision(partition)

    async def replicate(self, partition: str, ph: Placeholder) -> PlaceholderResult:
        nid = self.cluster.leader(partition)
        if nid is None:
            raise NotLeaderError(0)
        return await self.cluster.brokers[nid].replicate(partition, ph)

    def invalidate_epoch(self) -> None:
        self._broker().cache.invalidate()


class SimCluster:
    def __init__(
        self,
        seed: int = 0,
        n_nodes: int = 3,
        partitions: tuple[str, ...] = ("t/0", "t/1"),
        store: ObjectStore | None = None,
        variant: Variant = REFERENCE,
        services: bool = False,
        faults: Faults | None = None,
        snapshot_interval: int = 0,
        epoch_cache_ttl: float = 2.0,
        broker_config: Callable[[int], BrokerConfig] | None = None,
        wall_start: float = 1_700_000_000.0,
        disk: bool = False,
        segment_bytes: int = 4096,
        group_commit: bool = False,
        raft_config: Config | None = None,
        release_at_enqueue: bool = True,
    ) -> None:
        """`raft_config`: the brokers' Raft configuration (default `Config()`).
        `disk`: every broker group on the real DiskStorage (a temporary directory per
        cluster, tmpfs where present); a crash then loses what was not fsynced.
        `group_commit`: a node's groups share one durability barrier per Ready batch.
        `release_at_enqueue`: the brokers' fence setting (`BrokerConfig`), unless
        `broker_config` is given."""
        self.seed = seed
        self.loop = SimLoop()  # type: ignore[abstract]  # only the subset asyncio needs
        self.rng = random.Random(seed ^ 0x5EED)
        self._remove_store: Callable[[], object] | None = None
        if store is None:
            # Its own store in a temporary directory, removed by close() or, for a cluster
            # nobody closes (most tests, the experiments), when the store is collected or
            # the interpreter exits: 341 of them had piled up in /tmp after one CI run.
            own = tempfile.mkdtemp(prefix="simcluster-")
            store = LocalStore(own, create=True)
            # Tied to the store, not the cluster: a caller may keep the store alone.
            self._remove_store = weakref.finalize(store, shutil.rmtree, own, True)
        self.store = store
        self.variant = variant
        self.partitions = partitions
        self.services = services
        self.wall_start = wall_start
        self.brokers: dict[int, Broker] = {}
        self.ports: dict[int, SimRaftPort] = {}
        self.metrics: dict[int, NodeMetrics] = {}
        self.fence_log: list[FenceRecord] = []
        self.apply_log: list[ApplyRecord] = []
        self.acked: list[Ack] = []
        self._config = broker_config or (
            lambda nid: BrokerConfig(
                node_name=f"n{nid}",
                epoch_cache_ttl=epoch_cache_ttl,
                initial_partitions=partitions,
                variant=variant,
                release_at_enqueue=release_at_enqueue,
            )
        )
        self.sim = BrokerSimulator(
            self._make_broker,
            n_nodes=n_nodes,
            seed=seed,
            config=raft_config or Config(),
            faults=faults,
            snapshot_interval=snapshot_interval,
            disk=disk,
            segment_bytes=segment_bytes,
            group_commit=group_commit,
        )

    # ---- nodes ---------------------------------------------------------------------------

    def _make_broker(self, sim: BrokerSimulator, nid: int, host: MultiRaftHost) -> None:
        self.sim = sim  # also called from the simulator's constructor, before assignment
        port = SimRaftPort(sim, nid, host, self.loop)
        metrics = self.metrics.setdefault(nid, NodeMetrics())
        hooks = Hooks(on_fence=self._on_fence, on_apply=self._on_apply,
                      on_admitted=self._on_admitted)
        b = Broker(port, self.store, self._config(nid), self.loop, self.wall, inline_io,
                   metrics, hooks)
        self.ports[nid] = port
        self.brokers[nid] = b
        if self.services:
            b.start()

    def _on_fence(self, nid: int, name: str, d: FenceDecision) -> None:
        self.fence_log.append(FenceRecord(nid, name, d))

    def _on_apply(self, nid: int, name: str, ev: ApplyEvent) -> None:
        self.apply_log.append(ApplyRecord(nid, name, ev))

    def _on_admitted(self, nid: int, name: str, ph: Placeholder, term: int) -> None:
        """A fence admitted `ph` in `term` (observers override: the harness checks it)."""

    def wall(self) -> float:
        return self.wall_start + self.loop.time()

    # ---- driving -------------------------------------------------------------------------

    def step(self) -> bool:
        """One simulator event or one due timer batch, then every runnable callback."""
        loop, sim = self.loop, self.sim
        loop.drain()
        tt = loop.next_timer()
        if tt is not None:
            te = sim.next_event_time()
            tu = max(sim.now, math.ceil(tt * UNITS_PER_SECOND - 1e-9))
            if te is None or tu <= te:
                sim.now = tu
                # At least the timer's own due time: tu is rounded to whole units, and a due
                # time like 16.020000000000003 s would otherwise never fire (a livelock).
                loop.set_time(max(tu / UNITS_PER_SECOND, tt))
                loop.fire_due()
                loop.drain()
                return True
        if not sim.step():
            return False
        loop.set_time(sim.now / UNITS_PER_SECOND)
        if loop._timers:
            loop.fire_due()
        loop.drain()
        return True

    def run(self, steps: int) -> None:
        for _ in range(steps):
            if not self.step():
                return

    def run_until(self, pred: Callable[[], bool], max_steps: int = 200_000) -> bool:
        for _ in range(max_steps):
            if pred():
                return True
            if not self.step():
                break
        return pred()

    def run_for(self, seconds: float) -> None:
        end = self.loop.time() + seconds
        while self.loop.time() < end and self.step():
            pass

    def spawn(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        t = self.loop.create_task(coro)
        self.loop.drain()
        return t

    def wait(self, aw: Coroutine[Any, Any, T] | asyncio.Task[T], max_steps: int = 200_000) -> T:
        """Run the simulation until the coroutine/task finishes; return or raise its result."""
        task = aw if isinstance(aw, asyncio.Task) else self.spawn(aw)
        if not self.run_until(task.done, max_steps):
            raise TimeoutError(f"not done after {max_steps} steps")
        return task.result()

    # ---- topology ------------------------------------------------------------------------

    def controller_leader(self) -> int | None:
        return self.sim.leader(CONTROLLER_GROUP)

    def most_advanced_controller(self) -> ControllerStateMachine | None:
        """The live controller replica with the highest revision (the first of the highest;
        None with no live broker). A loop, not max() with a key lambda: the harness asks
        several times a step and the generator was ~1% of it (issue 14)."""
        best: ControllerStateMachine | None = None
        for b in self.brokers.values():
            if best is None or b.controller.revision > best.revision:
                best = b.controller
        return best

    def group_of(self, partition: str) -> int:
        """The group of the partition's current incarnation, by the most advanced controller
        replica (a lagging one may still know a deleted incarnation)."""
        ctl = self.most_advanced_controller()
        if ctl is not None and partition in ctl.partitions:
            return ctl.partitions[partition].group
        raise KeyError(partition)

    def leader(self, partition: str) -> int | None:
        """The live broker whose fence may serve the partition now (highest-term leader)."""
        try:
            g = self.group_of(partition)
        except KeyError:
            return None
        if g not in self.sim.group_ids:
            return None
        nid = self.sim.leader(g)
        return nid if nid in self.brokers else None

    def bootstrap(self, mint: bool = True) -> None:
        """Elect a controller, create the configured partitions, mint one epoch and wait for
        every partition to have a leader."""
        if not self.run_until(lambda: self.controller_leader() is not None):
            raise TimeoutError("no controller leader")
        for name in self.partitions:
            self.create_partition(name)
        if mint:
            self.mint()
        for name in self.partitions:
            if not self.run_until(lambda n=name: self.leader(n) is not None):  # type: ignore[misc]
                raise TimeoutError(f"no leader for {name}")

    def _controller(self) -> Broker:
        if not self.run_until(lambda: self.controller_leader() is not None):
            raise TimeoutError("no controller leader")
        nid = self.controller_leader()
        assert nid is not None
        return self.brokers[nid]

    def mint(self) -> int:
        return self.wait(self._controller().mint())

    def create_partition(self, name: str) -> int:
        rev = self.wait(self._controller().create_partition(name))
        self.run_until(lambda: all(
            name in b.replicas and b.replicas[name].info.creation_revision == rev
            for b in self.brokers.values()))
        return rev

    def delete_partition(self, name: str) -> int:
        """Delete a partition (R32); returns the deletion's revision once every live broker
        has dropped its replica."""
        rev = self.wait(self._controller().delete_partition(name))
        self.run_until(lambda: all(name not in b.replicas for b in self.brokers.values()))
        return rev

    # ---- produce -------------------------------------------------------------------------

    def producer(self, via: int = 1, max_attempts: int = 8) -> Producer:
        return Producer(SimClusterAccess(self, via), self.store, inline_io,
                        random.Random(self.rng.getrandbits(64)), max_attempts=max_attempts)

    def produce(
        self, batch: dict[str, list[bytes]], epoch: int | None = None, via: int = 1
    ) -> dict[str, Ack]:
        acks = self.wait(self.producer(via).produce(batch, epoch))
        self.acked.extend(acks.values())
        return acks

    def produce_async(
        self, batch: dict[str, list[bytes]], epoch: int | None = None, via: int = 1
    ) -> asyncio.Task[dict[str, Ack]]:
        async def run() -> dict[str, Ack]:
            acks = await self.producer(via).produce(batch, epoch)
            self.acked.extend(acks.values())
            return acks

        return self.spawn(run())

    def replicate_async(
        self, partition: str, epoch: int, node: int | None = None
    ) -> asyncio.Task[PlaceholderResult]:
        """Fence + replicate a bare placeholder (no object) at the partition's leader: the
        fence scenarios drive this directly."""
        nid = node if node is not None else self.leader(partition)
        if nid is None:
            raise NotLeaderError(0)
        ph = Placeholder(epoch, f"synthetic/{partition}/{epoch}", 0, 0, 0)
        return self.spawn(self.brokers[nid].replicate(partition, ph))

    # ---- faults --------------------------------------------------------------------------

    def lag_cache(self, nid: int, value: int | None = None) -> None:
        self.brokers[nid].cache.lag(value)

    def refresh_cache(self, nid: int) -> None:
        self.brokers[nid].cache.invalidate()

    def crash(self, nid: int, mid_write: bool | None = None) -> None:
        b = self.brokers.pop(nid, None)
        if b is not None:
            b.stop()
        port = self.ports.pop(nid, None)
        self.sim.crash(nid, mid_write)
        if port is not None:
            port.fail_all()
        self.loop.drain()

    def close(self) -> None:
        """Remove the simulated disks (DiskStorage runs) and the store this cluster made
        (one it was given is the caller's)."""
        self.sim.close()
        if self._remove_store is not None:
            self._remove_store()

    def restart(self, nid: int) -> None:
        """Recover the node from its simulated disk: a fresh broker, seen windows empty."""
        self.sim.restart(nid)
        self.loop.drain()

    def cut(self, a: int, b: int) -> None:
        self.sim.cut(a, b)

    def heal(self, a: int | None = None, b: int | None = None) -> None:
        self.sim.heal(a, b)

    def isolate(self, nid: int) -> None:
        self.sim.isolate(nid)

    def transfer_leadership(self, partition: str, target: int) -> None:
        nid = self.leader(partition)
        if nid is None:
            raise NotLeaderError(0)
        self.ports[nid].transfer_leadership(self.group_of(partition), target)

    def fail_next_replicate(self, partition: str, nid: int | None = None) -> None:
        """The next replicate at this partition's leader fails right after its fence."""
        nid = nid if nid is not None else self.leader(partition)
        assert nid is not None
        fence = self.brokers[nid].replicas[partition].fence

        def once(epoch: int) -> bool:
            fence.fail_replicate = None
            return True

        fence.fail_replicate = once

    # ---- services, on demand -------------------------------------------------------------

    def _at_leader(self, partition: str, fn: Callable[[Broker], Awaitable[T]]) -> T:
        if not self.run_until(lambda: self.leader(partition) is not None):
            raise TimeoutError(f"no leader for {partition}")
        nid = self.leader(partition)
        assert nid is not None
        return self.wait(fn(self.brokers[nid]))  # type: ignore[arg-type]

    def reconcile(self, partition: str) -> Any:
        return self._at_leader(partition, lambda b: b.reconcile(partition))

    def housekeep(self, partition: str) -> Any:
        return self._at_leader(partition, lambda b: b.housekeep(partition))

    def publish_health(self) -> None:
        for nid in sorted(self.brokers):
            self.wait(self.brokers[nid].publish_health())

    def publish_partitions(self) -> int:
        return self.wait(self._controller().publish_partitions())

    def gc(self, grace_s: float = 0.0) -> GcRound:
        return gc_round(self.store, self.wall(), grace_s)

    def compact(self, nid: int, partition: str | None = None) -> None:
        """Snapshot a group (a partition, or the controller) at its applied index."""
        b = self.brokers[nid]
        if partition is None:
            g, sm_bytes = CONTROLLER_GROUP, b.controller.snapshot()
        else:
            rep = b.replicas[partition]
            g, sm_bytes = rep.info.group, rep.sm.snapshot()
        self.ports[nid].compact(g, self.ports[nid].host.applied_index(g), sm_bytes)

    # ---- observation ---------------------------------------------------------------------

    def replica_states(self, partition: str) -> dict[int, PartitionState]:
        return {n: b.replicas[partition].sm.state for n, b in sorted(self.brokers.items())
                if partition in b.replicas}

    def seen_windows(self, partition: str) -> dict[int, SeenWindow | None]:
        return {n: b.replicas[partition].fence.seen for n, b in sorted(self.brokers.items())
                if partition in b.replicas}

    def committed_log(self, nid: int, group: int) -> list[tuple[int, int, int, bytes]]:
        log = self.ports[nid].host.groups[group].node.log
        return [(e.index, e.term, e.type, e.data)
                for e in log.slice(log.first_index, log.committed + 1)]

    def log_digest(self, nid: int, group: int) -> str:
        h = hashlib.sha256()
        for idx, term, typ, data in self.committed_log(nid, group):
            h.update(idx.to_bytes(8, "big") + term.to_bytes(8, "big") + typ.to_bytes(4, "big"))
            h.update(len(data).to_bytes(4, "big") + data)
        return h.hexdigest()

    def read_all(self, partition: str, via: int | None = None) -> list[tuple[int, bytes]]:
        nid = via if via is not None else self.leader(partition)
        assert nid is not None
        b = self.brokers[nid]
        out: list[tuple[int, bytes]] = []
        while True:
            got = b.read(partition, len(out))
            if not got:
                return out
            out.extend(got)
