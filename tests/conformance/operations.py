"""The operations the conformance harness drives, one step each: produce (with the
bookkeeping of what was written and acknowledged), mint, create and delete, faults (crash,
restart, partitions, network and store faults), leadership transfer, the brokers'
services (reconcile, housekeep, publish) and compaction."""

from __future__ import annotations

import contextlib
import json
import random
from typing import Any

from epochgc.impl.broker.producer import Ack, PartitionDeletedError, ProduceError, Producer
from epochgc.impl.broker.raftport import inline_io
from epochgc.impl.raft.simtypes import Faults
from epochgc.impl.sim.cluster import SimClusterAccess
from epochgc.impl.store.base import StoreError
from epochgc.model.keys import parse_key
from tests.conformance.deployment import ALL_PARTITIONS, MAX_REPORT_AGE_S, STATS, WAIT_STEPS
from tests.conformance.implchecks import check_controller_roundtrip, check_restore_roundtrip
from tests.conformance.shadow import Divergence
from tests.conformance.state import HarnessState


class Operations(HarnessState):
    # ---- producing -------------------------------------------------------------------------

    def _producer(self, via: int, max_attempts: int) -> Producer:
        access = SimClusterAccess(self.c, via)
        prod = Producer(access, self.store, inline_io, random.Random(self.c.rng.getrandbits(64)),
                        max_attempts=max_attempts, not_leader_wait=2.0)
        build = prod._build
        firsts: dict[str, int] = {}

        def tracked(epoch: int, pending: dict[str, list[bytes]]) -> Any:
            key, placeholders, data = build(epoch, pending)
            self._targets[key] = tuple(sorted(placeholders))
            for p in placeholders:
                self._first_stamp[(key, p)] = firsts.setdefault(p, epoch)
            return key, placeholders, data

        prod._build = tracked  # type: ignore[method-assign]
        return prod

    def _records(self, parts: list[str], n: int) -> dict[str, list[bytes]]:
        out = {}
        for p in parts:
            recs = []
            for _ in range(n):
                self.record_seq += 1
                recs.append(f"{p}#{self.record_seq}".encode())
            out[p] = recs
        return out

    async def _produce(self, prod: Producer, batch: dict[str, list[bytes]],
                       epoch: int | None) -> dict[str, Ack]:
        try:
            acks = await prod.produce(batch, epoch)
        except PartitionDeletedError as e:  # refused parts named; the rest acknowledged
            STATS["produce.refused_deleted_partition"] += 1
            acks = e.acks
        except ProduceError:
            STATS["produce.failed"] += 1
            return {}
        except KeyError:
            # Found by the harness (reported): a producer whose broker has not learnt of a
            # partition yet gets a bare KeyError from creation_revision, not a ProduceError.
            STATS["produce.unknown_partition_at_broker"] += 1
            return {}
        for a in acks.values():
            self.c.acked.append(a)
            g, gone = self._incarnation(a.partition, a.epoch)
            if gone or g != self._current_group(a.partition):
                # Acked by an incarnation deleted since (R33): its data went with it.
                STATS["produce.acked_then_deleted"] += 1
                continue
            want = self._expected_for(a.partition)
            for i, rec in enumerate(batch[a.partition]):
                want[a.base + i] = rec
        STATS["produce.acked_partitions"] += len(acks)
        return acks

    def _register_objects(self) -> None:
        for key in self.store.written:
            if key not in self.objects:
                self.objects[key] = (parse_key(key).epoch, self._targets.get(key, ()))
        self.store.written.clear()

    def produce(self, parts: list[str], n: int = 2, via: int = 1, epoch: int | None = None,
                wait: bool = True) -> None:
        parts = [p for p in parts if self._creation(p) is not None]
        if not parts or not self.c.brokers:
            return
        via = via if via in self.c.brokers else self.live()[0]
        if epoch is not None:
            epoch = max([epoch, *(self._creation(p) or 0 for p in parts)])
        prod = self._producer(via, max_attempts=1 if epoch is not None else 4)
        coro = self._produce(prod, self._records(parts, n), epoch)
        if wait:
            self.wait(coro)
        else:
            self.tasks.append(self.c.spawn(coro))
        self._register_objects()

    def produce_below(self, parts: list[str], back: int, wait: bool = True) -> None:
        """Produce with an explicit epoch `back` below the cluster epoch (in-flight and
        late writes, below-window rejections)."""
        self.produce(parts, 1, 1, max(0, self.cluster_epoch() - back), wait)

    def phantom(self, p: str, epoch_ahead: bool) -> None:
        """F1's first half: the next replicate at p's leader fails right after its fence slid
        the window."""
        nid = self.c.leader(p)
        if nid is None:
            return
        self.c.fail_next_replicate(p, nid)
        STATS["fault.replicate_failed_after_fence"] += 1
        e = self.cluster_epoch() if epoch_ahead else max(0, self.cluster_epoch() - 1)
        self.produce([p], 1, nid, e, wait=True)
        rep = self.c.brokers.get(nid)
        if rep is not None and p in rep.replicas:
            self.coverage.phantom_done(self, nid, p, rep.replicas[p].fence.fail_replicate is None)
            rep.replicas[p].fence.fail_replicate = None

    # ---- the controller, faults and the brokers' services ----------------------------------

    def delete_partition(self, p: str) -> None:
        """Delete p at the controller leader (its own revision)."""
        nid = self._leader_of(self.c.controller_leader)
        if nid is None or self._creation(p) is None:
            return
        try:
            self.wait(self.c.brokers[nid].delete_partition(p))
        except Exception:
            STATS["lifecycle.delete_failed"] += 1
            return
        STATS["lifecycle.deleted"] += 1
        self.c.run(50)

    def mint(self) -> None:
        nid = self._leader_of(self.c.controller_leader)
        if nid is not None:
            with contextlib.suppress(Exception):
                self.wait(self.c.brokers[nid].mint())

    def create_partition(self) -> None:
        todo = [p for p in ALL_PARTITIONS if self._creation(p) is None]
        nid = self._leader_of(self.c.controller_leader)
        if not todo or nid is None:
            return
        with contextlib.suppress(Exception):
            self.wait(self.c.brokers[nid].create_partition(todo[0]))
        self.c.run(50)

    def lag_cache(self, nid: int, back: int) -> None:
        if nid in self.c.brokers:
            self.c.lag_cache(nid, max(0, self.cluster_epoch() - back))
            STATS["fault.cache_lag"] += 1

    def refresh_cache(self, nid: int) -> None:
        if nid in self.c.brokers:
            self.c.refresh_cache(nid)

    def crash(self, nid: int, mid_write: bool | None = None) -> None:
        if nid in self.c.brokers:
            if mid_write is None and self.disk:
                mid_write = self.rng.random() < 0.5
            self.c.crash(nid, mid_write)
            STATS["fault.crash"] += 1
            if self.disk:
                STATS["fault.disk_crash" + ("_mid_write" if mid_write else "")] += 1
            self.readback_dirty = True

    def restart(self, nid: int) -> None:
        if nid not in self.c.brokers:
            self.c.restart(nid)
            STATS["fault.restart"] += 1
            if self.disk:
                STATS["fault.disk_restart"] += 1
            self.readback_dirty = True

    def cut(self, a: int, b: int) -> None:
        if a != b:
            self.c.cut(a, b)
            STATS["fault.cut"] += 1

    def isolate(self, nid: int) -> None:
        self.c.isolate(nid)
        STATS["fault.isolate"] += 1

    def heal(self) -> None:
        self.c.heal()

    def net_faults(self, drop: float, duplicate: float, reorder: float, delay: int) -> None:
        self.c.sim.faults = Faults(drop=drop, duplicate=duplicate, reorder=reorder,
                                   max_latency=3 + delay, reorder_window=30)
        STATS["fault.net_fault_windows"] += 1

    def calm(self) -> None:
        self.c.sim.faults = Faults()

    def transfer(self, p: str, target: int) -> None:
        nid = self.c.leader(p)
        if nid is None or nid == target or target not in self.c.brokers:
            return
        with contextlib.suppress(Exception):
            self.c.transfer_leadership(p, target)
            STATS["fault.leadership_transfer"] += 1
        self.c.run(50)

    def run(self, n: int) -> None:
        self.c.run(n)

    def settle(self) -> None:
        """Let in-flight operations finish (bounded)."""
        self.c.run_until(lambda: all(t.done() for t in self.tasks), WAIT_STEPS)
        self.tasks = [t for t in self.tasks if not t.done()]

    def reconcile(self, p: str) -> None:
        nid = self.c.leader(p)
        if nid is None or p not in self.c.brokers[nid].replicas:
            return
        with contextlib.suppress(Exception):
            self.wait(self.c.brokers[nid].reconcile(p))
        self.readback_dirty = True

    def housekeep(self, p: str) -> None:
        nid = self.c.leader(p)
        if nid is None or p not in self.c.brokers[nid].replicas:
            return
        with contextlib.suppress(Exception):
            self.wait(self.c.brokers[nid].housekeep(p))

    def store_fault(self, prefix: str) -> None:
        self.store.fail_next_put = prefix

    def publish_health(self, nodes: list[int], stale: bool = False) -> None:
        """Each node publishes its health report; `stale`: written with a clock older than
        the GC's maximum report age (a lagging node), so the GC must treat it as absent."""
        for nid in nodes:
            b = self.c.brokers.get(nid)
            if b is None:
                continue
            if stale:
                b.wall = lambda: self.c.wall() - MAX_REPORT_AGE_S - 1.0  # type: ignore[method-assign]
                STATS["fault.stale_health_report"] += 1
            try:
                self.wait(b.publish_health())
            except StoreError:
                continue
            finally:
                b.wall = self.c.wall  # type: ignore[method-assign]
            self.health[nid] = {r.partition: r.inactive_epoch for r in b.health_replicas()}
            self.health_group[nid] = {p: b.replicas[p].info.group for p in self.health[nid]}

    def publish_partitions(self) -> None:
        nid = self._leader_of(self.c.controller_leader)
        if nid is None:
            return
        try:
            self.wait(self.c.brokers[nid].publish_partitions())
        except Exception:
            return
        self._read_snapshot()

    def _read_snapshot(self) -> None:
        with contextlib.suppress(StoreError):
            doc = json.loads(self.local.get("_cluster/partitions.json"))
            rev = int(doc["revision"])
            if self.snapshot is not None and rev < self.snapshot[0]:
                # Issue 31: a new controller leader publishing before its own-term commit.
                raise Divergence(f"the published partition table went back from revision"
                                 f" {self.snapshot[0]} to {rev} (a stale leader's table)")
            self.snapshot = (rev, tuple(doc["partitions"]))

    def compact(self, nid: int, p: str | None) -> None:
        b = self.c.brokers.get(nid)
        if b is None or (p is not None and p not in b.replicas):
            return
        self.c.compact(nid, p)
        STATS["op.compact"] += 1
        # restore(snapshot()) == state at the compaction itself (a crash may follow at once).
        check_controller_roundtrip(f"node {nid}", b.controller)
        for name, rep in sorted(b.replicas.items()):
            if p is None or name == p:
                check_restore_roundtrip(f"node {nid} {name} (compacted)", rep.sm)
        self.readback_dirty = True

    def service_round(self, publish_table: bool = True, collect: bool = True) -> None:
        """One pass of what the brokers' periodic services do: mint, reconcile and
        housekeep every partition, publish the partition table and every node's health,
        then one model-level GC round. Epoch caches that are not lagging (a fault) expire,
        as they would over the services' seconds."""
        self.mint()
        for b in self.c.brokers.values():
            if not b.cache._frozen:
                b.cache.invalidate()
        for p in self.created():
            self.reconcile(p)
            self.housekeep(p)
        if publish_table:  # else GC runs on an older snapshot (M capped at its revision)
            self.publish_partitions()
        self.publish_health(self.live())
        if collect:
            self.gc()
