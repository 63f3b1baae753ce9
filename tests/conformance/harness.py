"""The conformance harness: the real implementation (SimCluster: the project's Raft core on
its simulator, real brokers, fence, producer, reconciler, housekeeper, controller, health
reports) driven step by step, with the model alongside.

`Harness` owns one simulated cluster and every check; `ConformanceMachine` (below) is the
Hypothesis `RuleBasedStateMachine` whose rules are the operations and faults and whose
invariants are `Harness.check_step()`. Regression tests and the benchmark drive `Harness`
directly with the same operations.

Checks after every step:
- refinement: every live replica's window state == the model's replay of the committed log
  (`Shadow`), every new fence decision == `model.fence.fence` on its logged inputs, every new
  apply decision == `model.partition` at the same index, the seen window obeys R8 (forgotten
  on loss of leadership, scoped to the leader's term), every health value == the model's
  M(p) of that replica's state;
- the proven invariants `model.system.INVARIANTS` on the abstraction of the cluster
  (`abstract()`), and `TRANSITION_INVARIANTS` between consecutive abstractions (M(p), M never
  go backwards on fresh reports);
- acknowledged records read back (after steps that can lose them);
- the Raft core's own invariants run inside the simulator after every event, with the
  state-machine safety hook enabled for the broker groups.
- the implementation's own state (`implchecks`): restore(snapshot()) == state, every
  caught-up replica == a never-restored replay, landed term == fence term, A2/A3/A4, every
  ack an accepted placement, no unexplained apply-time rejection in the fence's term.
GC rounds (the PySpark job's task functions in process on every GC step, the simulator's
round and, rarely, the real PySpark job) are checked against `model.cluster.gc_epoch` over
the published documents and `model.keys.gc_eligible` over the listing before the round.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import random
import shutil
import stat
import tempfile
from collections import Counter
from collections.abc import Callable, Coroutine, Iterable, Iterator
from dataclasses import replace
from typing import Any

from epochgc.impl.broker.broker import CONTROLLER_GROUP
from epochgc.impl.broker.producer import Ack, PartitionDeletedError, ProduceError, Producer
from epochgc.impl.broker.raftport import inline_io
from epochgc.impl.cluster.gcround import gc_round
from epochgc.impl.controller.statemachine import PARTITION_GROUP_BASE, ControllerStateMachine
from epochgc.impl.gc.reports import HEALTH_PREFIX, PARTITIONS_KEY
from epochgc.impl.partition.commands import AdvanceEpoch, Placeholder
from epochgc.impl.partition.commands import encode as encode_command
from epochgc.impl.partition.fence import FenceDecision
from epochgc.impl.partition.statemachine import ApplyEvent
from epochgc.impl.raft.messages import Entry, MsgType
from epochgc.impl.raft.node import Config
from epochgc.impl.raft.sim import Faults
from epochgc.impl.sim.cluster import SimCluster, SimClusterAccess
from epochgc.impl.sim.network import BrokerSimulator
from epochgc.impl.store.base import DeleteResult, ListPage, ObjectInfo, ObjectStore, StoreError
from epochgc.impl.store.local import _TMP_PREFIX as TMP_FILE_PREFIX
from epochgc.impl.store.local import LocalStore
from epochgc.model import partition as mp
from epochgc.model import system as ms
from epochgc.model.keys import DATA_PREFIX, PREFIXES, format_key, parse_key
from epochgc.model.partition import PartitionState

from tests.conformance.coverage import Observer
from tests.conformance.gcinproc import inprocess_gc_round
from tests.conformance.implchecks import (
    LandedChecks,
    check_a3,
    check_a4,
    check_controller_roundtrip,
    check_matches_reference,
    check_restore_roundtrip,
)
from tests.conformance.shadow import (
    Divergence,
    GcExpectation,
    Shadow,
    check_apply,
    check_fence,
    model_gc,
)

NODES = (1, 2, 3)
INITIAL_PARTITIONS = ("t/0", "t/1")
# Issue 31: topics whose names share a prefix with `t` (t2, t-2), so deleting or matching
# topic `t` by a bare prefix shows (t2/0 and t-2/0 are created after t/0..t/3).
ALL_PARTITIONS = ("t/0", "t/1", "t/2", "t/3", "t2/0", "t-2/0")
MAX_REPORT_AGE_S = 60.0
RAFT_CHECK = os.environ.get("EPOCHGC_CONFORMANCE_RAFT_CHECK", "step")  # or "event"
DISK_SNAPSHOT_INTERVAL = 4
# The simulated deployment's Raft timing (a tick is 0.1 s): election timeout 10-20 ticks, a
# heartbeat every tick, or every 3rd in the deep profile (EPOCHGC_CONFORMANCE_HEARTBEAT_TICK
# overrides either). At one beat per tick heartbeats and their answers were 57% of all
# simulator events (issue 14); every 3rd tick cuts a third of the events (~1.08x). Its
# 943,032-step deep run failed 5 chunks, all the harness comparing with the most advanced
# live replica's APPLIED controller state, which moves backwards when a leader crashes before
# its followers learn the commit index (fixed: `committed_controller`; the five seeds pass).
# CI and the mutants keep a beat per tick (the timing their pinned programs were found under).
_HEARTBEAT_TICK = "3" if os.environ.get("EPOCHGC_CONFORMANCE_PROFILE") == "deep" else "1"
RAFT_CONFIG = Config(
    election_tick=10,
    heartbeat_tick=int(os.environ.get("EPOCHGC_CONFORMANCE_HEARTBEAT_TICK", _HEARTBEAT_TICK)),
)
# Each program's object store on tmpfs where present, like the Raft simulator's disks: the
# store never fsyncs, so a real disk only adds metadata I/O waits (mkdir, rmtree).
TMP_BASE = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
# A held-write rule stops waiting once its write finished unheld (False: the old full wait,
# the bench's baseline).
HOLD_WAIT_EARLY_EXIT = True
WAIT_STEPS = 30_000  # bound on one operation's simulated events (a stuck op is left running)

# Counters of everything the harness ran, for the summary (process-wide).
STATS: Counter[str] = Counter()


class FaultyStore(ObjectStore):
    """The local store with one injectable fault: the next `put` (of a key with a given
    prefix) fails. Records every L0 key that was durably written."""

    def __init__(self, inner: LocalStore) -> None:
        self.inner = inner
        self.fail_next_put: str | None = None  # key prefix, or None
        # Every read (get, head, list) under this prefix fails while set (issue 31: a GC
        # task's re-read of the reports that fails must not let its deletes go ahead).
        self.fail_reads: str | None = None
        self.written: list[str] = []

    def _read(self, key: str) -> None:
        if self.fail_reads is not None and key.startswith(self.fail_reads):
            STATS["fault.store_read_failed"] += 1
            raise StoreError(f"injected read failure for {key!r}")

    def describe(self) -> str:
        return self.inner.describe()

    def put(self, key: str, data: bytes) -> None:
        if self.fail_next_put is not None and key.startswith(self.fail_next_put):
            self.fail_next_put = None
            STATS["fault.store_put_failed"] += 1
            raise StoreError(f"injected put failure for {key!r}")
        self.inner.put(key, data)
        if key.startswith(DATA_PREFIX):
            self.written.append(key)

    def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        self._read(key)
        return self.inner.get(key, start, end)

    def head(self, key: str) -> ObjectInfo | None:
        self._read(key)
        return self.inner.head(key)

    def list_page(
        self, prefix: str, start_after: str | None = None, max_keys: int = 1000,
        until: str | None = None,
    ) -> ListPage:
        self._read(prefix)
        return self.inner.list_page(prefix, start_after, max_keys, until)

    def delete_batch(self, keys: list[str]) -> DeleteResult:
        return self.inner.delete_batch(keys)


class HarnessCluster(SimCluster):
    """SimCluster plus one observer: the applied state each fence decided on (read at the
    moment of the decision). (The Raft checker's state-machine-safety hook on the broker
    groups comes with the simulator.)"""

    def __init__(self, **kw: Any) -> None:
        self.fence_inputs: list[tuple[int, str, FenceDecision, PartitionState]] = []
        self.admitted: dict[tuple[str, str], set[int]] = {}
        self.last_admitted: dict[tuple[int, str], str] = {}
        self.admissions: list[tuple[int, str, Placeholder, int]] = []
        self.apply_groups: list[int] = []  # the group (incarnation) of each apply_log record
        # Placeholders whose apply-time rejection an injected fault explains (LandedChecks).
        self.explained: set[tuple[str, str]] = set()
        # (node, group, term) where a fence slid the seen window and the injected replicate
        # failure then kept its placeholder out of the log (F1's phantom): for the rest of
        # that term (R8) the seen window holds bounds the log never saw, so in-window writes
        # it admits can land out of window order and be rejected at apply (REFERENCE F1; the
        # fence is liveness only, spec section 3).
        self.phantom_terms: set[tuple[int, int, int]] = set()
        self._decided: dict[tuple[int, str], FenceDecision] = {}
        super().__init__(**kw)

    def _on_apply(self, nid: int, name: str, ev: ApplyEvent) -> None:
        # The replica applying is the one in the broker's table: a deleted incarnation's is
        # removed before a re-created one is added (and a deleted one reports nothing).
        super()._on_apply(nid, name, ev)
        self.apply_groups.append(self.brokers[nid].replicas[name].info.group)

    def _on_admitted(self, nid: int, name: str, ph: Placeholder, term: int) -> None:
        self.admitted.setdefault((name, ph.key), set()).add(term)
        self.last_admitted[(nid, name)] = ph.key
        b = self.brokers.get(nid)
        rep = b.replicas.get(name) if b is not None else None
        if rep is not None:
            self.admissions.append((nid, name, ph, rep.info.creation_revision))
            # The fence reports its decision just before it returns to this hook.
            d = self._decided.get((nid, name))
            if (d is not None and d.kind == "in_window"
                    and (nid, rep.info.group, term) in self.phantom_terms):
                self.explained.add((name, ph.key))
                STATS["fault.admitted_under_phantom_slide"] += 1

    def fail_next_replicate(self, partition: str, nid: int | None = None) -> None:
        """As SimCluster's, and when the failure hits a write whose fence slid the seen
        window, that node's term of the group is marked as holding a phantom slide."""
        super().fail_next_replicate(partition, nid)
        nid = nid if nid is not None else self.leader(partition)
        assert nid is not None
        rep = self.brokers[nid].replicas[partition]
        fence, fail = rep.fence, rep.fence.fail_replicate
        assert fail is not None

        def once(epoch: int) -> bool:
            d = self._decided.get((nid, partition))
            if d is not None and d.slid and d.epoch == epoch:
                self.phantom_terms.add((nid, rep.info.group, d.term))
            return fail(epoch)

        fence.fail_replicate = once

    def _on_fence(self, nid: int, name: str, d: FenceDecision) -> None:
        super()._on_fence(nid, name, d)
        self._decided[(nid, name)] = d
        b = self.brokers.get(nid)
        state = b.replicas[name].sm.state if b is not None else mp.INITIAL
        self.fence_inputs.append((nid, name, d, state))


# The simulator's own counts of what its network faults did (`count_net`), as STATS names.
_NET_STATS = {
    "net_scheduled": "net.delivered_or_queued", "net_reordered": "fault.net_reordered",
    "net_delayed": "fault.net_delayed", "net_duplicated": "fault.net_duplicated",
    "net_dropped": "fault.net_dropped", "net_lost": "fault.net_lost_at_delivery",
    # The simulator's events by kind (issue 14's profile: where a harness step's time goes).
    "ev_tick": "sim.event.tick", "ev_flush": "sim.event.batched_ready",
    **{f"ev_{t.name.lower()}": f"sim.event.{t.name.lower()}" for t in MsgType},
}


def _count_network(sim: BrokerSimulator) -> None:
    """Count what the simulator's seeded network faults did (instrumentation only): the
    simulator counts them itself (a wrapper around every event was ~5% of the CPU)."""
    sim.count_net = True


def _flush_network_counts(sim: BrokerSimulator, seen: Counter[str]) -> None:
    for k, name in _NET_STATS.items():
        n = sim.stats[k]
        if n != seen[k]:
            STATS[name] += n - seen[k]
            seen[k] = n


def incarnation_at(deleted: Iterable[tuple[int, int]], ctl: Any, p: str,
                   epoch: int) -> tuple[int, bool]:
    """(group, deleted) of p's latest incarnation created at or below `epoch`, from the
    (creation revision, group) of p's deleted incarnations and `ctl`'s live table;
    (-1, False) if none was."""
    cands = [(c, g, True) for c, g in deleted if c <= epoch]
    info = ctl.partitions.get(p)
    if info is not None and info.creation_revision <= epoch:
        cands.append((info.creation_revision, info.group, False))
    if not cands:
        return (-1, False)
    _, g, gone = max(cands)
    return g, gone


class Harness:
    def __init__(
        self, seed: int = 0, spark: Callable[[], Any] | None = None, disk: bool = False
    ) -> None:
        """`disk`: every broker group on the real DiskStorage with small segments; crashes
        are power losses (unsynced bytes torn or zero-filled, unsynced file creations and
        deletions undone) half of them between a batch's write and its fsync; even seeds
        share one group commit per node (as the server does), odd ones sync each group."""
        self.tmp = tempfile.mkdtemp(prefix="conformance-", dir=TMP_BASE)
        self.local = LocalStore(os.path.join(self.tmp, "store"), create=True)
        self.store = FaultyStore(self.local)
        self.disk = disk
        self.c = HarnessCluster(
            seed=seed, n_nodes=len(NODES), partitions=INITIAL_PARTITIONS, store=self.store,
            faults=Faults(), disk=disk, segment_bytes=512, group_commit=seed % 2 == 0,
            # Disk programs also compact on their own every few entries: the disk log's
            # recovery after compactions behind the log end is what they are for.
            snapshot_interval=DISK_SNAPSHOT_INTERVAL if disk else 0,
            raft_config=RAFT_CONFIG,
        )
        if disk:
            STATS["disk.programs"] += 1
        _count_network(self.c.sim)
        # Nothing here reads the simulator's trace digest (a finding replays from its seed).
        self.c.sim.disable_trace()
        self._deleted_index: dict[int, tuple[Any, int, dict[str, list[tuple[int, int]]]]] = {}
        self._net_seen: Counter[str] = Counter()
        # The Raft core's invariants: after every simulator event (the deep run's choice: a
        # step costs ~3% more, as each check compares only the replicas given an input and
        # verifies only new entries) or once per harness step over every group (the CI
        # default; apply-time state-machine safety and acknowledged-entry checks still run
        # on every apply).
        self.raft_check_per_event = RAFT_CHECK == "event"
        if not self.raft_check_per_event:
            self.c.sim.check = lambda touched=None: None  # type: ignore[method-assign]
        self.spark = spark
        self.rng = random.Random(seed)
        self.shadows: dict[str, Shadow] = {}  # the current incarnation's, by name
        self.all_shadows: dict[int, Shadow] = {}  # every incarnation's, by group (issue 13)
        self.deletions_seen: set[int] = set()  # groups of deleted incarnations handled
        self.health_group: dict[int, dict[str, int]] = {}  # incarnation each report was of
        self.fence_seen = 0
        self.apply_seen = 0
        self.objects: dict[str, tuple[int, tuple[str, ...]]] = {}  # key -> (epoch, targets)
        self._targets: dict[str, tuple[str, ...]] = {}
        # (object key, partition) -> the epoch the producer's FIRST attempt stamped for that
        # partition: every retry must stay with that attempt's incarnation (R35).
        self._first_stamp: dict[tuple[str, str], int] = {}
        self.deleted: set[str] = set()
        self.expected: dict[str, dict[int, bytes]] = {p: {} for p in ALL_PARTITIONS}
        self.record_seq = 0
        self.snapshot: tuple[int, tuple[str, ...]] | None = None
        self.health: dict[int, dict[str, int | None]] = {}
        self.max_revision = 0
        self._ctl_committed = ControllerStateMachine()  # the committed controller log, replayed
        self.prev_system: ms.System | None = None
        # The abstraction's small value objects, interned by their fields (issue 14: building
        # them was ~2% of a step; equal values, so the checks see the same System).
        self._interned: dict[tuple[Any, ...], Any] = {}
        self._repeat_checked = False  # the transition from prev_system to itself was checked
        self.readback_dirty = False
        self.tasks: list[asyncio.Task[Any]] = []
        self.steps = 0
        self.landed = LandedChecks(self.c.admitted, self.c.explained, set())
        self.acks_seen = 0
        self._expected_group: dict[str, int | None] = {}  # incarnation `expected[p]` is of
        self.admitted_seen = 0
        self._impl_checked: dict[tuple[int, str], tuple[Any, ...]] = {}
        self.coverage = Observer(STATS)  # event counters for the coverage table
        # name -> creation revision in the committed controller state, and its revision
        # (issue 31: an incarnation is replaced only through its deletion).
        self._incarnations: dict[str, int] = {}
        self._incarnations_rev = 0
        self.c.bootstrap()
        self.check_step()

    def close(self) -> None:
        _flush_network_counts(self.c.sim, self._net_seen)
        for t in self.tasks:
            t.cancel()
        with contextlib.suppress(Exception):
            self.c.loop.drain()
        self.c.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- driving helpers -------------------------------------------------------------------

    def live(self) -> list[int]:
        return sorted(self.c.brokers)

    def created(self) -> list[str]:
        # One controller read for all (a precondition calls this at every rule draw).
        parts = self._controller_sm().partitions
        return [p for p in ALL_PARTITIONS if p in parts]

    def _controller_sm(self) -> Any:
        """The most advanced live controller replica (`SimCluster.most_advanced_controller`)."""
        best = self.c.most_advanced_controller()
        if best is None:
            raise ValueError("no live broker: no controller replica")  # as max() did
        return best

    def committed_controller(self) -> Any:
        """The controller state of the committed log: the most advanced live replica, or a
        replay of every entry any replica applied up to the highest commit index known (the
        same bound as the partition shadows), whichever is further. A live replica's applied
        state can lag the commit: the leader commits, applies (and perhaps publishes the
        partition snapshot or serves the epoch a cache was set from), then crashes before
        its followers learn the commit index (a beat every 3rd tick widens that window).
        A3 and the abstraction compare against this, never against the live maximum alone."""
        live = self._controller_sm()
        hist = self.c.sim.checker.history(CONTROLLER_GROUP)
        upto = min(self._highest_commit(CONTROLLER_GROUP), max(hist.applied, default=0))
        ref = self._ctl_committed
        for i in range(ref.last_index + 1, upto + 1):
            got = hist.applied.get(i)  # a missing index is a Raft no-op
            if got is not None:
                ref.apply(Entry(i, got[0], data=got[1]))
        return ref if ref.revision > live.revision else live

    def _highest_commit(self, g: int) -> int:
        """The highest commit index known for group `g`: a leader's as the Raft checker saw
        it, or any live replica's (a restart recovers its synced commit)."""
        return max([self.c.sim.checker.history(g).max_committed,
                    *(b.port.host.groups[g].node.log.committed for b in self.c.brokers.values()
                      if g in b.port.host.groups)])

    def _creation(self, p: str) -> int | None:
        info = self._controller_sm().partitions.get(p)
        return None if info is None else info.creation_revision

    def cluster_epoch(self) -> int:
        return int(self._controller_sm().epoch)

    def wait(self, coro: Coroutine[Any, Any, Any], steps: int = WAIT_STEPS) -> Any:
        """Run `coro` to completion (bounded); None plus a count if it timed out."""
        task = self.c.spawn(coro)
        if not self.c.run_until(task.done, steps):
            self.tasks.append(task)
            STATS["op.timed_out"] += 1
            return None
        return task.result()

    def _leader_of(self, group_leader: Callable[[], int | None]) -> int | None:
        if not self.c.run_until(lambda: group_leader() is not None, 5_000):
            return None
        return group_leader()

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

    # ---- operations (the rules) ----------------------------------------------------------

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

    def slow_write_overtaken(self, p: str, back: int) -> None:
        """F3's shape: a write fenced inside the window is held between its fence and its
        propose while a write above the window is fenced and replicated; then the held write
        proposes. With the shared lock held through the replicate (as specified) the slide
        waits for it; if it were not, the held write would land below the slid window and
        only the apply-time check would keep it out."""
        nid = self.c.leader(p)
        if nid is None or p not in self.c.brokers[nid].replicas:
            return
        fence = self.c.brokers[nid].replicas[p].fence
        low = max(0, self.cluster_epoch() - back)
        with self._held_at_propose(fence, low) as held:
            self._run_until_held(held, lambda: self.produce([p], 1, nid, low, wait=False),
                                 2_000)
            if held:
                STATS["fault.write_held_after_fence"] += 1
            self.produce([p], 1, nid, self.cluster_epoch(), wait=False)
            self.c.run(400)  # the other write goes as far as the lock lets it
        self.settle()

    @contextlib.contextmanager
    def _held_at_propose(self, fence: Any, epoch: int | None = None,
                         on_hold: Callable[[], None] | None = None) -> Iterator[list[int]]:
        """Holds the first write through `fence` (of `epoch`, if given) between its fence
        and its propose until the block ends; yields the held epochs (empty: none held).
        `on_hold` runs as the write is held, right after its admission was reported (the
        fence reports it and calls this hook with no await between)."""
        gate: asyncio.Future[None] = self.c.loop.create_future()
        held: list[int] = []

        async def hold(e: int) -> None:
            if (epoch is None or e == epoch) and not held:
                held.append(e)
                if on_hold is not None:
                    on_hold()
                await gate

        fence.before_propose = hold
        try:
            yield held
        finally:
            if not gate.done():
                gate.set_result(None)
            fence.before_propose = None

    def _run_until_held(self, held: list[int], start: Callable[[], None], steps: int) -> None:
        """Start a write and run until it is held before its propose; stop early when the
        write is done without being held (refused at the fence: nothing will ever be held,
        and the remaining simulated events would only be idle heartbeats)."""
        n = len(self.tasks)
        start()
        mine = self.tasks[n:]
        if HOLD_WAIT_EARLY_EXIT:
            self.c.run_until(lambda: bool(held) or all(t.done() for t in mine), steps)
        else:
            self.c.run_until(lambda: bool(held), steps)

    # ---- rules that reach the states issue 16's checks are for ---------------------------

    def restart_mid_window(self, p: str, nid: int) -> None:
        """Slide p's window twice without reconciling (floor below previous_applied, the
        slides' placeholders unreconciled), snapshot node nid's replica there, then crash
        and restart it: recovery restores from that snapshot mid-window."""
        if self._creation(p) is None or nid not in self.c.brokers:
            return
        for _ in range(3):  # the first slide may only set the window: two more lift it
            self.mint()
            self.produce([p], 1, nid, self.cluster_epoch())
        b = self.c.brokers.get(nid)
        if b is None or p not in b.replicas:
            return
        s = b.replicas[p].sm.state
        if s.min_epoch_lower_bound is not None and s.min_epoch_lower_bound < (
                s.previous_applied_epoch or 0) and b.replicas[p].sm.unreconciled():
            STATS["op.snapshot_mid_window"] += 1
        self.compact(nid, p)
        self.crash(nid)
        self.restart(nid)

    def apply_rejects_held_write(self, p: str) -> None:
        """An injected apply-time rejection: a write admitted in window is held between its
        fence and its propose while the harness slides p's window twice with advance_epoch
        entries proposed straight to Raft, around the fence's lock (a fault). The held write
        is then rejected at apply, in its fence's term; the producer must see a failure."""
        nid = self.c.leader(p)
        if nid is None or p not in self.c.brokers[nid].replicas:
            return
        b = self.c.brokers[nid]
        rep = b.replicas[p]
        fence, g = rep.fence, rep.info.group
        for _ in range(2):
            self.mint()
        low = rep.sm.state.previous_applied_epoch
        top = self.cluster_epoch()
        if low is None or rep.sm.state.max_applied_epoch is None:
            return
        mx = rep.sm.state.max_applied_epoch
        if top < mx + 2 or self.c.leader(p) != nid:
            return
        # The held write's own key, taken as it is held: the first write through the fence
        # may be an earlier step's still in flight, and this step's write then passes
        # unheld and is admitted after it (deep run seed 170: the last admitted key, read
        # after the run, explained the write that landed, not the one rejected).
        held_keys: list[str] = []

        def note_held() -> None:
            key = self.c.last_admitted.get((nid, p))
            if key is not None:
                held_keys.append(key)

        with self._held_at_propose(fence, on_hold=note_held) as held:
            self._run_until_held(held, lambda: self.produce([p], 1, nid, low, wait=False),
                                 2_000)
            if held:
                for key in held_keys:
                    self.landed.explained.add((p, key))
                for e in (mx + 1, mx + 2):
                    with contextlib.suppress(Exception):
                        self.wait(_awaited(b.port.propose(
                            g, encode_command(AdvanceEpoch(e)), expected_term=b.port.term(g))))
                STATS["fault.window_slid_around_the_lock"] += 1
        self.settle()

    def create_and_produce(self) -> None:
        """Create a partition and produce to it at once (no mint in between): the stamp
        must still be at least its creation revision (A2)."""
        todo = [p for p in ALL_PARTITIONS if self._creation(p) is None]
        if not todo:
            return
        self.create_partition()
        if self._creation(todo[0]) is not None:
            self.produce([todo[0]], 1, self.live()[0] if self.c.brokers else 1)

    def reelected_between_fence_and_propose(self, p: str) -> None:
        """A write admitted by p's leader is held between its fence and its propose while
        leadership goes to another node and back (a new term); then it proposes. It must
        fail (its fence's term is gone), not land in the new term."""
        nid = self.c.leader(p)
        if nid is None or p not in self.c.brokers[nid].replicas or len(self.c.brokers) < 2:
            return
        fence = self.c.brokers[nid].replicas[p].fence
        g = self.c.group_of(p)
        term0 = self.c.brokers[nid].port.term(g)
        with self._held_at_propose(fence) as held:
            self._run_until_held(held, lambda: self.produce([p], 1, nid, None, wait=False),
                                 500)
            other = next(n for n in self.live() if n != nid)
            # Bounded: under faults a transfer may not finish.
            for target in (other, nid) if held else ():
                self.transfer(p, target)
                if not self.c.run_until(lambda t=target: self.c.leader(p) == t, 800):  # type: ignore[misc]
                    break
            if held and self.c.leader(p) == nid and self.c.brokers[nid].port.term(g) > term0:
                STATS["fault.reelected_between_fence_and_propose"] += 1
        self.settle()

    # ---- partition deletion and re-creation (issue 13, SPEC R32-R35) ------------------------

    def _current_group(self, p: str) -> int | None:
        info = self._controller_sm().partitions.get(p)
        return None if info is None else info.group

    def _incarnation(self, p: str, epoch: int, ctl: Any = None) -> tuple[int, bool]:
        """(group, deleted) of the incarnation of p a write stamped `epoch` was for: the
        latest created at or below the epoch (a producer stamps at least its target's
        creation revision, and below any later deletion's revision: R35's revision line).
        `ctl`: the controller state machine to read (default: the most advanced)."""
        if ctl is None:
            ctl = self._controller_sm()
        return incarnation_at(self._deleted_of(ctl).get(p, ()), ctl, p, epoch)

    def _deleted_of(self, ctl: Any) -> dict[str, list[tuple[int, int]]]:
        """name -> (creation revision, group) of each deleted incarnation in `ctl.deleted`,
        built once per version of that dict: `_incarnation` runs ~17 times a step and
        scanning every deleted incarnation each time was ~2% of a step. A controller state
        machine only adds to its `deleted` (keyed by creation revision, whose name and
        group never change) or replaces the whole dict on restore, so the same dict object
        with the same length has the same entries; the cache holds the dict, so its id is
        not reused while cached."""
        d = ctl.deleted
        hit = self._deleted_index.get(id(d))
        if hit is not None and hit[0] is d and hit[1] == len(d):
            return hit[2]
        index: dict[str, list[tuple[int, int]]] = {}
        for x in d.values():
            index.setdefault(x.name, []).append((x.creation_revision, x.group))
        if len(self._deleted_index) >= 64:
            self._deleted_index.clear()
        self._deleted_index[id(d)] = (d, len(d), index)
        return index

    def _expected_for(self, p: str) -> dict[int, bytes]:
        """The acknowledged records of p's current incarnation (reset when it changes)."""
        cur = self._current_group(p)
        if self._expected_group.get(p, "unset") != cur:
            self.expected[p] = {}
            self._expected_group[p] = cur
        return self.expected[p]

    def _check_lifecycle(self) -> None:
        """R32/R34 on every live broker: a replica of an incarnation its own controller
        deleted refuses writes at once; once the broker's deferred sync ran, the group is
        gone from its Raft host and its replica table; health reports name only partitions
        that exist. Read-back expectations follow the current incarnations."""
        for p in ALL_PARTITIONS:
            self._expected_for(p)
        for nid, b in sorted(self.c.brokers.items()):
            ctl = b.controller
            for name, rep in b.replicas.items():
                cur = ctl.partitions.get(name)
                if (cur is None or cur.group != rep.info.group) and not rep.sm.deleted:
                    raise Divergence(f"R34: node {nid}'s controller deleted {name} (group"
                                     f" {rep.info.group}) but its replica still takes writes")
            if not b._sync_scheduled:
                for d in ctl.deleted.values():
                    held = b.replicas.get(d.name)
                    if d.group in b.port.host.groups or (held and held.info.group == d.group):
                        raise Divergence(f"R32: node {nid} still runs deleted {d.name}'s"
                                         f" group {d.group}")
            for r in b.health_replicas():
                if r.partition not in ctl.partitions:
                    raise Divergence(f"R32: node {nid} reports deleted {r.partition}")
        ctl = self._controller_sm()
        if self.snapshot is not None:  # R32: a snapshot never lists a partition deleted by it
            srev, names = self.snapshot
            for d in ctl.deleted.values():
                again = ctl.partitions.get(d.name)
                back = again is not None and again.creation_revision <= srev
                later = [e for e in ctl.deleted.values() if e.name == d.name
                         and d.deletion_revision < e.creation_revision <= srev]
                if d.name in names and d.deletion_revision <= srev and not back and not later:
                    raise Divergence(f"R32: the snapshot at revision {srev} lists {d.name},"
                                     f" deleted at revision {d.deletion_revision}")
        self._check_incarnations()
        for g in ctl.deleted:
            if g + PARTITION_GROUP_BASE not in self.deletions_seen:
                self.deletions_seen.add(g + PARTITION_GROUP_BASE)
                STATS["lifecycle.deletions_applied"] += 1
                self.readback_dirty = True

    def _check_incarnations(self) -> None:
        """A live partition's incarnation changes only through its deletion: a create of an
        existing name (duplicate, retried) is a no-op, never a replacement."""
        ctl = self.committed_controller() if self.c.brokers else None
        if ctl is None or ctl.revision < self._incarnations_rev:
            return
        for name, crev in self._incarnations.items():
            info = ctl.partitions.get(name)
            if info is not None and info.creation_revision != crev and crev not in ctl.deleted:
                raise Divergence(
                    f"{name}'s incarnation created at revision {crev} was replaced by one"
                    f" created at {info.creation_revision} without being deleted (a"
                    f" duplicate or retried create applied as a new partition)")
        self._incarnations = {n: i.creation_revision for n, i in ctl.partitions.items()}
        self._incarnations_rev = ctl.revision

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

    def delete_while_writing(self, p: str, other: str) -> None:
        """Writes to p (one also feeding `other`) in flight while p is deleted: each is
        refused or was acknowledged before; a shared object stays protected by `other`."""
        if self._creation(p) is None:
            return
        self.produce([p, other] if other != p else [p], 1, 1, wait=False)
        self.produce([p], 1, 2, wait=False)
        self.c.run(self.rng.choice([0, 20, 60]))
        self.delete_partition(p)
        STATS["lifecycle.delete_while_writing"] += 1
        self.settle()

    def delete_on_stale_reports(self, p: str) -> None:
        """Reports and a snapshot published while p existed, then p deleted, then GC rounds
        over those stale documents (which still count p) before and after a new snapshot."""
        if self._creation(p) is None:
            return
        self.publish_partitions()
        self.publish_health(self.live())
        self.delete_partition(p)
        self.gc()
        STATS["lifecycle.gc_on_stale_reports"] += 1
        self.publish_partitions()
        self.gc()

    def recreate_on_stale_reports(self, p: str) -> None:
        """Every node reports p, then p is deleted and created again and a snapshot listing
        the new incarnation is published, but no health yet: the reports naming p are fresh
        and of the old incarnation, so they must not count (R35): the round blocks on p
        (the shadow drops them by `created`), until the new replicas report."""
        if self._creation(p) is None:
            return
        self.publish_partitions()
        self.publish_health(self.live())
        self.delete_partition(p)
        nid = self._leader_of(self.c.controller_leader)
        if nid is None or self._creation(p) is not None:
            return
        with contextlib.suppress(Exception):
            self.wait(self.c.brokers[nid].create_partition(p))
        self.c.run(50)
        if self._creation(p) is None:
            return
        self.publish_partitions()
        self.gc()
        STATS["lifecycle.gc_on_old_incarnation_reports"] += 1
        self.publish_health(self.live())
        self.gc()

    def delete_across_leader_change(self, p: str, to: int) -> None:
        """p's leadership and the controller's move while p is deleted."""
        if self._creation(p) is None or to not in self.c.brokers:
            return
        with contextlib.suppress(Exception):
            self.transfer(p, to)
        ctl = self.c.controller_leader()
        if ctl is not None and ctl != to:
            with contextlib.suppress(Exception):
                self.c.ports[ctl].transfer_leadership(1, to)
        nid = self.c.controller_leader()
        if nid is not None:
            b = self.c.brokers[nid]

            async def delete() -> None:  # refused or lost with the leadership: a retry's job
                with contextlib.suppress(Exception):
                    await b.delete_partition(p)

            self.tasks.append(self.c.spawn(delete()))
            STATS["lifecycle.delete_across_leader_change"] += 1
        self.settle()

    def recreate_with_old_write(self, p: str) -> None:
        """A write to p held between its fence and its propose while p is deleted and
        created again: released, it must not land in the new incarnation (R35)."""
        if self._creation(p) is None:
            return
        nid = self._leader_of(lambda: self.c.leader(p))
        if nid is None or p not in self.c.brokers[nid].replicas:
            return
        fence = self.c.brokers[nid].replicas[p].fence
        with self._held_at_propose(fence) as held:
            self.produce([p], 1, nid, None, wait=False)
            self.c.run_until(lambda: bool(held), 500)
            self.delete_partition(p)
            ctl = self._leader_of(self.c.controller_leader)
            if ctl is not None and self._creation(p) is None:
                with contextlib.suppress(Exception):
                    self.wait(self.c.brokers[ctl].create_partition(p))
                if held and self._creation(p) is not None:
                    STATS["lifecycle.old_write_across_recreation"] += 1
                    # ... and the old producer's late retry, stamped for the old incarnation,
                    # reaches the new one's leader: refused at its fence (A2, R35).
                    self.c.run_until(lambda: self.c.leader(p) is not None, 2_000)
                    new = self.c.leader(p)
                    if new is not None and held[0] < (self._creation(p) or 0):
                        ph = Placeholder(held[0], f"old/{p}/{held[0]}", 0, 0, 0)

                        async def late() -> None:
                            with contextlib.suppress(Exception):
                                await self.c.brokers[new].replicate(p, ph)

                        self.wait(late())
                        STATS["lifecycle.old_write_at_new_incarnation"] += 1
        self.settle()

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

    # ---- GC rounds -------------------------------------------------------------------------

    def _docs_and_listing(
        self, data: bool = True
    ) -> tuple[dict[str, object], list[tuple[str, float]], float]:
        """The `_cluster/` documents and, if `data` (not when the caller drops it), the
        listing of the data prefix."""
        now = self.c.wall()
        docs: dict[str, object] = {}
        for key, _ in stored_files(self.local.root, "_cluster/"):
            with contextlib.suppress(ValueError, StoreError):
                docs[key] = json.loads(self.local.get(key))
        listing = ([(key, max(0.0, now - mtime))
                    for key, mtime in stored_files(self.local.root, DATA_PREFIX, True)]
                   if data else [])
        return docs, listing, now

    def gc(self, grace_s: float = 0.0, lower_between: bool = False,
           create_between: bool = False, fail_reread: bool = False) -> None:
        """One GC round with the PySpark job's own task and driver functions, in process
        (`gcinproc`): listing with the early stop, eligibility, the re-check of M, the
        deletes. `lower_between`: every fresh health report is republished lower after the
        driver computed M and before the tasks' re-read (then put back), so the delete
        phase must refuse. `create_between`: a partition appears in the partitions table
        there instead (created, no report yet; then removed), so the round must come out
        blocked. Either way the tasks' stop must say which (blocked or refused) as the
        model's re-check does. `fail_reread`: every read of `_cluster/` fails there instead
        (until the round ends), so a task's re-read fails: nothing may be deleted (the round
        may stop or fail, never go ahead on the driver's M)."""
        docs, listing, now = self._docs_and_listing()
        want = model_gc(docs, listing, now, MAX_REPORT_AGE_S, grace_s)
        saved: dict[str, bytes] = {}
        again: list[GcExpectation] = []

        def lower() -> None:
            m = want.decision.M if want.decision is not None else None
            if m is not None and m >= 0:
                for key, _ in stored_files(self.local.root, HEALTH_PREFIX):
                    raw = self.local.get(key)
                    doc = json.loads(raw)
                    for r in doc["replicas"]:
                        if r["inactive_epoch"] is not None:
                            r["inactive_epoch"] = min(r["inactive_epoch"], m - 1)
                    saved[key] = raw
                    self.local.put(key, json.dumps(doc, sort_keys=True).encode())
                STATS["fault.reports_lowered_before_delete"] += 1
            reread()

        def create() -> None:
            if want.decision is not None and want.decision.M is not None:
                raw = self.local.get(PARTITIONS_KEY)
                doc = json.loads(raw)
                name = next(f"t/{n}" for n in range(1000, 2000)
                            if f"t/{n}" not in doc["partitions"])
                doc["revision"] += 1
                doc["partitions"] = [*doc["partitions"], name]
                doc["created"] = {**doc.get("created", {}), name: doc["revision"]}
                saved[PARTITIONS_KEY] = raw
                self.local.put(PARTITIONS_KEY, json.dumps(doc, sort_keys=True).encode())
                STATS["fault.partition_created_before_delete"] += 1
            reread()

        def reread() -> None:
            d2, _, n2 = self._docs_and_listing(data=False)
            again.append(model_gc(d2, [], n2, MAX_REPORT_AGE_S, grace_s))

        failed: list[bool] = []

        def fail() -> None:
            if want.decision is not None and want.decision.M is not None:
                self.store.fail_reads = "_cluster/"
                failed.append(True)
                STATS["fault.gc_reread_fails"] += 1

        try:
            got = inprocess_gc_round(self.store, self.c.wall, grace_s, MAX_REPORT_AGE_S,
                                     between=(lower if lower_between else
                                              create if create_between else
                                              fail if fail_reread else None),
                                     populated=_prefixes(listing))
        except Exception as e:
            if want.error is None and not failed:
                raise Divergence(f"GC round failed ({e!r}); the model expected {want}") from e
            if failed:
                STATS["gc.round_failed_on_failed_reread"] += 1
            self._after_gc(set(want.listing), set(), want, "gc")  # nothing deleted
            return
        finally:
            self.store.fail_reads = None
            for key, raw in saved.items():
                self.local.put(key, raw)
        if want.error is not None:
            raise Divergence(f"GC round ran ({got}) but the model says: {want.error}")
        assert want.decision is not None
        if got.M != want.decision.M or (got.blocked is None) != (want.decision.blocked is None):
            raise Divergence(
                f"GC decision: implementation M={got.M} blocked={got.blocked!r}, model"
                f" M={want.decision.M} blocked={want.decision.blocked!r} (snapshot revision"
                f" {want.revision} partitions {want.partitions} reports {want.reports})"
            )
        if want.decision.M is not None and got.eligible != want.deletable:
            raise Divergence(
                f"GC listing at M={got.M} grace {grace_s}s: eligible extra"
                f" {sorted(got.eligible - want.deletable)}, missing"
                f" {sorted(want.deletable - got.eligible)} (an early stop or an eligibility"
                f" bug in impl/gc/scan.py)"
            )
        expect = set(want.deletable)
        # (blocked, refused) at the tasks' re-read, as the model says; None: its re-read
        # failed, nothing to compare.
        stop: tuple[bool, bool] | None = (False, False)
        if expect and failed:  # the re-read failed: no delete may follow it
            expect, stop = set(), None
            STATS["gc.reread_failed_no_delete"] += 1
        if expect and again:
            d2 = again[0].decision
            if d2 is None or d2.blocked is not None or d2.M is None or d2.M < want.decision.M:
                expect = set()  # M moved backwards (or the round is blocked): delete nothing
                stop = None if d2 is None else (d2.blocked is not None, d2.blocked is None)
                blocked = stop is not None and stop[0]
                STATS["gc.blocked_on_recheck" if blocked else "gc.refused_on_recheck"] += 1
        # Every task re-reads the same store (nothing changes between them), and only a
        # task with something to delete waits for its re-read's verdict.
        got_stop = (got.blocked_on_recheck is not None, got.refused_on_recheck is not None)
        if stop is not None and got_stop != stop:
            raise Divergence(
                f"GC stop at the re-read: implementation blocked={got.blocked_on_recheck!r}"
                f" refused={got.refused_on_recheck!r}, model (blocked, refused)={stop}"
                f" (re-check: {again[:1]})"
            )
        if got.deleted != expect:
            raise Divergence(
                f"GC deleted set differs at M={got.M} (re-check: {again[:1]}): extra"
                f" {sorted(got.deleted - expect)}, missing {sorted(expect - got.deleted)}"
            )
        self._after_gc(set(want.listing), expect, want, "gc")

    def sim_gc(self) -> None:
        """The simulator's GC round (impl/cluster/gcround.py, used by the demo)."""
        docs, listing, now = self._docs_and_listing()
        want = model_gc(docs, listing, now, MAX_REPORT_AGE_S, 0.0)
        try:
            got = gc_round(self.local, now, 0.0, MAX_REPORT_AGE_S)
        except Exception as e:
            if want.error is None:
                raise Divergence(f"sim GC round failed ({e!r}); the model expected {want}") from e
            self._after_gc(set(want.listing), set(), want, "sim")
            return
        if want.error is not None:
            raise Divergence(f"sim GC round ran ({got}) but the model says: {want.error}")
        assert want.decision is not None
        if (got.M, got.blocked) != (want.decision.M, want.decision.blocked):
            raise Divergence(
                f"sim GC decision: implementation M={got.M} blocked={got.blocked!r}, model"
                f" M={want.decision.M} blocked={want.decision.blocked!r}"
            )
        if set(got.deleted) != want.deletable:
            raise Divergence(
                f"sim GC deleted set differs at M={got.M}: extra"
                f" {sorted(set(got.deleted) - want.deletable)}, missing"
                f" {sorted(want.deletable - set(got.deleted))}"
            )
        self._after_gc(set(want.listing), set(want.deletable), want, "sim")

    def young_and_old_at_m(self, grace_s: float = 30.0) -> None:
        """Orphan objects (written, never placed: a producer that died) at exactly epoch M
        in one prefix, a young one sorting first and old ones after it, plus an old one at
        M + 1; then a GC round with that grace. The old ones at M must go, the rest stay."""
        docs, _, now = self._docs_and_listing(data=False)
        want = model_gc(docs, [], now, MAX_REPORT_AGE_S, grace_s)
        m = want.decision.M if want.decision is not None else None
        if m is None or m < 0:
            return
        prefix = self.rng.randrange(PREFIXES)
        self.record_seq += 1
        tag = self.record_seq
        for name, epoch, old in (("a-young", m, False), ("b-old", m, True),
                                 ("c-old", m, True), ("d-old-next", m + 1, True)):
            key = format_key(prefix, epoch, f"{name}-{tag}")
            self.local.put(key, b"orphan")
            if old:
                os.utime(os.path.join(self.local.root, key), (now - 2 * grace_s,) * 2)
        STATS["op.orphans_at_m"] += 1
        self.gc(grace_s)

    def spark_gc(self) -> None:
        """The real PySpark GC job (impl/gc) on the shared session."""
        if self.spark is None:
            return
        from epochgc.impl.gc.job import GcOptions, run_gc
        from epochgc.impl.store.url import parse_store_url

        docs, listing, now = self._docs_and_listing()
        want = model_gc(docs, listing, now, MAX_REPORT_AGE_S, 0.0)
        opts = GcOptions(grace_s=0.0, allow_short_grace=True, max_report_age_s=MAX_REPORT_AGE_S,
                         tasks=2)
        try:
            # Simulated time stands still while Spark runs (the event loop is not driven),
            # so the executors' clock is the round's `now`, as a picklable callable.
            summary = run_gc(self.spark, parse_store_url(str(self.local.root)), opts,
                             clock=functools.partial(float, now))
        except Exception as e:
            if want.error is None:
                raise Divergence(f"Spark GC failed ({e!r}); the model expected {want}") from e
            self._after_gc(set(want.listing), set(), want, "spark")
            return
        if want.error is not None:
            raise Divergence(f"Spark GC ran but the model says: {want.error}")
        assert want.decision is not None
        expect_m, expect_blocked = want.decision.M, want.decision.blocked
        deletable = set(want.deletable)
        if expect_m is not None:
            # Issue 30: the job's safety monitor also blocks a round the model would run
            # (a node that reported before is stale), judged on the same reports at the
            # same `now` (simulated time stands still while Spark runs).
            from epochgc.impl.gc.monitor import check_health

            verdict = check_health(self.local, now, MAX_REPORT_AGE_S)
            if not verdict.healthy:
                expect_m, expect_blocked, deletable = None, verdict.why(), set()
        if (summary.M, summary.blocked) != (expect_m, expect_blocked):
            raise Divergence(
                f"Spark GC decision: M={summary.M} blocked={summary.blocked!r}, expected"
                f" M={expect_m} blocked={expect_blocked!r} (model: {want.decision})"
            )
        self._after_gc(set(want.listing), deletable, want, "spark")

    def _after_gc(self, listed: set[str], expect: set[str], want: Any, kind: str) -> None:
        # What the round removed of what it listed: an lstat per listed key (the harness's
        # store holds no links), not a walk of the whole data prefix.
        root = self.local.root
        gone = {key for key in listed if not _regular_file(os.path.join(root, key))}
        if gone != expect:
            raise Divergence(
                f"{kind} GC: objects gone {sorted(gone)} != expected {sorted(expect)}"
            )
        self.deleted |= gone
        STATS[f"gc.{kind}_rounds"] += 1
        if want.decision is not None and want.decision.blocked is not None:
            STATS[f"gc.{kind}_blocked"] += 1
        STATS[f"gc.{kind}_deleted"] += len(gone)
        self.readback_dirty = True

    # ---- checks ----------------------------------------------------------------------------

    def check_step(self) -> None:
        self.steps += 1
        STATS["steps"] += 1
        _flush_network_counts(self.c.sim, self._net_seen)
        self._register_objects()
        self._check_lifecycle()
        # The Raft core's invariants over every group (after every event too, if per event:
        # those compare only the groups given an input; this one also sees any other change).
        BrokerSimulator.check(self.c.sim)
        self._advance_shadows()
        self._check_replicas()
        self._check_decisions()
        self._check_impl_state()
        self._check_acks()
        self._check_model_invariants()
        if self.readback_dirty:
            self.check_readback()
        self.coverage.observe(self)
        errs = self.c.loop.errors
        if errs:
            raise Divergence(f"unhandled error in the simulated loop: {errs[0]}")

    def _advance_shadows(self) -> None:
        checker = self.c.sim.checker
        assert checker is not None
        for p in self.created():
            g = self.c.group_of(p)
            if p not in self.shadows or self.shadows[p].group != g:  # created or re-created
                if p in self.shadows:  # a new incarnation's indices start again
                    self.landed.done = {d for d in self.landed.done if d[0] != p}
                self.shadows[p] = self.all_shadows[g] = Shadow(p, g)
        for sh in self.all_shadows.values():
            g, hist = sh.group, checker.history(sh.group)
            hosts = [b.port.host for b in self.c.brokers.values() if g in b.port.host.groups]
            applied = [h.applied_index(g) for h in hosts]
            if self.shadows.get(sh.name) is not sh or self._current_group(sh.name) != g:
                # A deleted incarnation: what any replica applied before removing it (a
                # lagging host may still hold the group behind the others).
                upto = max([sh.done, *applied, *hist.applied])
            else:
                # Every entry any replica applied (one that crashed and restarted since has
                # its applied index back at its snapshot: issue 14), as far as the highest
                # commit index known: a leader's as the Raft checker saw it, or any live
                # replica's (a restart recovers its synced commit). An entry applied past
                # that was applied uncommitted: left out, so its apply is a divergence.
                committed = self._highest_commit(g)
                upto = sh.done
                if committed > upto:
                    upto = max(upto, min(max([*applied, *hist.applied], default=0), committed))
                    if upto > max([sh.done, *applied]):  # the shape issue 14 was about
                        STATS["check.shadow_past_live_replicas"] += 1
            if upto > sh.done:
                sh.advance(hist.applied, upto)

    def _check_replicas(self) -> None:
        for nid, b in sorted(self.c.brokers.items()):
            for p, rep in b.replicas.items():
                g = rep.info.group
                sh = self.all_shadows.get(g)
                if sh is None or g not in b.port.host.groups or rep.sm.deleted:
                    continue
                idx = b.port.host.applied_index(g)
                if idx > sh.done:
                    raise Divergence(f"node {nid} for {p} applied up to index {idx}, past the"
                                     f" committed log the model replayed (to {sh.done})")
                want = sh.state_at(idx)
                if rep.sm.state != want:
                    raise Divergence(
                        f"replica state on node {nid} for {p} at applied index {idx}:"
                        f" implementation {rep.sm.state}, model replay {want}"
                    )
                got_m = rep.sm.inactive_epoch()
                want_m = mp.inactive_epoch(want)
                if got_m != want_m:
                    raise Divergence(
                        f"M(p) on node {nid} for {p}: implementation reports {got_m}, model"
                        f" M(p) of the same state is {want_m} ({want})"
                    )
                # R8: the seen window is forgotten on loss of leadership, scoped to a term.
                seen = rep.fence.seen
                if seen is not None:
                    leads = b.port.is_leader(g)
                    if not leads or seen.term != b.port.term(g):
                        raise Divergence(
                            f"R8: node {nid} keeps seen window {seen} for {p} while"
                            f" {'leading term ' + str(b.port.term(g)) if leads else 'not leader'}"
                        )
                    if seen.previous > seen.max:
                        raise Divergence(f"seen window {seen} on node {nid} for {p} is inverted")

    def _check_decisions(self) -> None:
        checker = self.c.sim.checker
        assert checker is not None
        log = self.c.fence_inputs
        while self.fence_seen < len(log):
            nid, name, d, applied = log[self.fence_seen]
            self.fence_seen += 1
            STATS[f"fence.{d.kind}"] += 1
            check_fence(nid, name, d, applied)
        adm = self.c.admissions
        while self.admitted_seen < len(adm):
            nid, name, ph, creation = adm[self.admitted_seen]
            self.admitted_seen += 1
            if ph.epoch < creation:
                raise Divergence(
                    f"A2 on {name}: node {nid}'s fence admitted placeholder {ph.key} with"
                    f" epoch {ph.epoch} below the partition's creation revision {creation}"
                )
        alog = self.c.apply_log
        while self.apply_seen < len(alog):
            rec = alog[self.apply_seen]
            self.apply_seen += 1
            ev: ApplyEvent = rec.event
            sh = self.all_shadows.get(self.c.apply_groups[self.apply_seen - 1])
            if sh is None or ev.index > sh.done:
                raise Divergence(f"apply on node {rec.node} for {rec.partition} at index"
                                 f" {ev.index} is not in the committed log the model replayed")
            STATS["apply.events"] += 1
            if ev.result is not None and not ev.result.accepted:
                STATS["apply.rejected_stale"] += 1
            check_apply(rec.node, rec.partition, sh, ev)
            if isinstance(ev.command, Placeholder) and ev.result is not None:
                term = checker.history(sh.group).applied[ev.index][0]
                creation = sh.group - PARTITION_GROUP_BASE  # the incarnation that applied it
                done = self.landed.check(rec.node, rec.partition, creation, ev.index, term,
                                         ev.command, ev.result.accepted)
                if done:
                    STATS[done] += 1

    def _check_acks(self) -> None:
        """Every acknowledged placeholder was applied and accepted (an apply-time rejection
        must reach the producer as a failure, never as an ack)."""
        acked = self.c.acked
        while self.acks_seen < len(acked):
            a = acked[self.acks_seen]
            self.acks_seen += 1
            sh = self.all_shadows.get(self._incarnation(a.partition, a.epoch)[0])
            pl = sh.placements.get(a.key) if sh is not None else None
            if pl is None or not pl.accepted:
                raise Divergence(
                    f"acknowledged {a.partition} key {a.key} (base {a.base}) but its"
                    f" placeholder was {'rejected at apply' if pl else 'never applied'}"
                )
            first = self._first_stamp.get((a.key, a.partition))
            if first is not None and sh is not None:
                meant, _ = self._incarnation(a.partition, first)
                if meant != sh.group:
                    raise Divergence(
                        f"R35: acknowledged {a.partition} key {a.key} into incarnation group"
                        f" {sh.group}, but the producer's first attempt (epoch {first}) was"
                        f" for group {meant}: a retry moved to a re-created partition")

    def _check_impl_state(self) -> None:
        """restore == state, the reference replay, A3 and A4 on every live node (cheap:
        a few small JSON documents per step)."""
        # The committed epoch, not the live replicas' applied maximum (deep run, seeds 912,
        # 929, 953: a cache lagged at the leader's applied epoch, then the leader crashed).
        ctl_epoch = self.committed_controller().epoch if self.c.brokers else 0
        memo = self._impl_checked
        for nid, b in sorted(self.c.brokers.items()):
            check_a3(nid, b.cache.cached, ctl_epoch)
            ctl = b.controller
            if memo.get((nid, "")) != (ctl, ctl.last_index):
                check_controller_roundtrip(f"node {nid}", ctl)
                memo[(nid, "")] = (ctl, ctl.last_index)
            for p, rep in sorted(b.replicas.items()):
                g = rep.info.group
                sh = self.all_shadows.get(g)
                if rep.sm.deleted:
                    continue
                applied = b.port.host.applied_index(g) if g in b.port.host.groups else -1
                # Only a state machine that changed since its last check (a new object after
                # a restart, or one that applied or restored entries) is checked again.
                key = (rep.sm, rep.sm.last_index, rep.sm.state, applied,
                       sh.done if sh is not None else -1)
                old = memo.get((nid, p))
                if old is not None and old[0] is rep.sm and old[1:] == key[1:]:
                    continue
                memo[(nid, p)] = key
                where = f"node {nid} {p}"
                check_restore_roundtrip(where, rep.sm)
                check_a4(where, rep.sm)
                STATS["check.restore_roundtrip"] += 1
                if sh is not None and applied == sh.done:
                    check_matches_reference(where, rep.sm, sh.ref)
                    STATS["check.reference_state"] += 1

    def abstract(self) -> ms.System:
        """The abstraction function: the cluster as a `model.system.System`."""
        # The committed controller state (deep run, seeds 353, 357: a snapshot published by a
        # leader that crashed before its followers learnt the commit of its delete).
        ctl = self.committed_controller()
        self.max_revision = max(self.max_revision, ctl.revision)
        snap_rev, snap_parts = self.snapshot if self.snapshot is not None else (0, ())
        parts = []
        index = {p: i for i, p in enumerate(ALL_PARTITIONS)}
        for p in ALL_PARTITIONS:
            info = ctl.partitions.get(p)
            sh = self.shadows.get(p)
            if info is None or sh is None or sh.group != info.group:
                parts.append(ms.Partition(replicas=tuple(ms.Replica() for _ in NODES)))
                continue
            truth = mp.inactive_epoch(sh.state)
            reps = []
            for nid in NODES:
                b = self.c.brokers.get(nid)
                seen = b.replicas[p].fence.seen if b is not None and p in b.replicas else None
                # A report of an earlier incarnation is not this one's (the model drops a
                # deleted partition's reports; see `_check_lifecycle` for the impl's side).
                mine = self.health_group.get(nid, {}).get(p) == info.group
                reps.append(self._intern(ms.Replica, seen, truth,
                                         self.health.get(nid, {}).get(p) if mine else None))
            parts.append(ms.Partition(
                created=True, creation_revision=info.creation_revision, state=sh.state,
                log_end=sh.done + 1, replicas=tuple(reps),
                # a snapshot lists the incarnation created by its revision, not a later one
                in_snapshot=p in snap_parts and info.creation_revision <= snap_rev,
            ))
        objects, writes = [], []
        # Many objects share (partition, epoch): resolve each pair once per abstraction.
        incs: dict[tuple[str, int], tuple[int, bool]] = {}
        memo, deleted, shadows = self._interned, self.deleted, self.all_shadows
        Obj, Write = ms.Obj, ms.Write  # the model's classes, interned inline
        for key, (epoch, targets) in self.objects.items():
            o = len(objects)
            k: tuple[Any, ...] = (Obj, ms.DELETED if key in deleted else ms.STORED, epoch)
            v = memo.get(k)
            if v is None:
                v = memo[k] = Obj(*k[1:])
            objects.append(v)
            for p in targets:
                inc = incs.get((p, epoch))
                if inc is None:
                    inc = incs[(p, epoch)] = self._incarnation(p, epoch, ctl)
                g, gone = inc
                if gone:  # R33: every write to a deleted incarnation is orphaned
                    k = (Write, o, index[p], ms.ORPHANED)
                else:
                    sh = shadows.get(g)
                    pl = sh.placements.get(key) if sh is not None else None
                    if pl is None:
                        k = (Write, o, index[p], ms.FENCED)
                    else:
                        # R27's ghost: the reconciler copies a placeholder to L1 before LRLO
                        # passes it, so what LRLO passed is what the harness knows is in L1.
                        lrlo = shadows[g].state.last_reconciled_log_offset
                        k = (Write, o, index[p], ms.ACCEPTED if pl.accepted else ms.REJECTED,
                             pl.index, pl.accepted and pl.index <= lrlo)
                v = memo.get(k)
                if v is None:
                    v = memo[k] = Write(*k[1:])
                writes.append(v)
        return ms.System(
            revision=self.max_revision, cluster_epoch=ctl.epoch, snapshot_revision=snap_rev,
            partitions=tuple(parts), objects=tuple(objects), writes=tuple(writes),
        )

    def _intern(self, cls: Callable[..., Any], *fields: Any) -> Any:
        """`cls(*fields)`, one object per distinct value (the model's frozen dataclasses)."""
        k = (cls, *fields)
        v = self._interned.get(k)
        if v is None:
            v = self._interned[k] = cls(*fields)
        return v

    def _check_model_invariants(self) -> None:
        s = self.abstract()
        # Most steps leave the abstraction as it was (~3 in 4): the invariants, pure
        # functions of it, held on the equal previous one; the transition from it to itself
        # is checked once per run of equal abstractions.
        if self.prev_system is not None and s == self.prev_system:
            if not self._repeat_checked:
                self._check_transitions(self.prev_system, s)
                self._repeat_checked = True
            self.prev_system = s
            return
        self._repeat_checked = False
        for name, inv in ms.INVARIANTS.items():
            if not inv(s, ms.REFERENCE):
                raise Divergence(f"model invariant {name} fails on the cluster's abstraction:"
                                 f" {_explain(name, s)}")
        if self.prev_system is not None:
            self._check_transitions(self.prev_system, s)
        self.prev_system = s

    def _check_transitions(self, prev: ms.System, s: ms.System) -> None:
        # A partition deleted and created again within one harness step: the model's
        # steps between are delete (no state) then create; compare from the former.
        prev = replace(prev, partitions=tuple(
            ms.Partition(replicas=tuple(ms.Replica() for _ in NODES))
            if a.created and b.created and a.creation_revision != b.creation_revision
            else a for a, b in zip(prev.partitions, s.partitions, strict=True)))
        for name, tinv in ms.TRANSITION_INVARIANTS.items():
            if not tinv(prev, s, ms.REFERENCE):
                raise Divergence(
                    f"transition invariant {name} fails: before"
                    f" {[q.state for q in prev.partitions]} M={ms.fresh_m(prev)}, after"
                    f" {[q.state for q in s.partitions]} M={ms.fresh_m(s)}"
                )

    def check_readback(self) -> None:
        """Every acknowledged record reads back, from every live replica that applied it."""
        self.readback_dirty = False
        STATS["check.readback"] += 1
        for p, want in self.expected.items():
            if not want:
                continue
            top = max(want)
            sh = self.shadows.get(p)
            for nid, b in sorted(self.c.brokers.items()):
                rep = b.replicas.get(p)
                if rep is None or rep.sm.next_offset <= top or sh is None:
                    continue
                if rep.info.group != sh.group:
                    # A node that has not applied p's deletion yet still holds the earlier
                    # incarnation: not the records expected of the current one.
                    STATS["check.readback_skipped_earlier_incarnation"] += 1
                    continue
                # Only a replica that has applied the whole committed log: a lagging one
                # still points below LRO at L0 objects GC may already have collected (found
                # by the harness; reads must be served by an up-to-date replica).
                if b.port.host.applied_index(rep.info.group) < sh.done:
                    STATS["check.readback_skipped_lagging_replica"] += 1
                    continue
                try:
                    got = dict(b.read(p, 0, max_records=10**6))
                except StoreError as e:
                    raise Divergence(f"acknowledged records of {p} unreadable on node {nid}:"
                                     f" {e}") from e
                for off, rec in want.items():
                    if got.get(off) != rec:
                        raise Divergence(
                            f"acknowledged record {p}@{off} ({rec!r}) reads back as"
                            f" {got.get(off)!r} on node {nid}"
                        )


def stored_files(root: str | os.PathLike[str], prefix: str,
                 mtimes: bool = False) -> list[tuple[str, float]]:
    """(key, mtime if `mtimes` else 0.0) of every regular file under `prefix` (a directory
    path ending in "/") of the store directory `root`, in key order: the harness's own view
    of what the store holds, read by path with `os.scandir` rather than through the
    LocalStore under test (and without its per-directory descriptors, which cost ~2% of a
    step here). Like LocalStore, it skips in-progress temp files and lists no link."""
    out: list[tuple[str, float]] = []
    todo = [prefix]
    while todo:
        rel = todo.pop()
        try:
            it = os.scandir(os.path.join(root, rel))
        except FileNotFoundError:
            continue
        with it:
            for e in it:
                if e.name.startswith(TMP_FILE_PREFIX):
                    continue
                if e.is_dir(follow_symlinks=False):
                    todo.append(f"{rel}{e.name}/")
                elif e.is_file(follow_symlinks=False):
                    out.append((rel + e.name,
                                e.stat(follow_symlinks=False).st_mtime if mtimes else 0.0))
    out.sort()
    return out


def _regular_file(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False


def _prefixes(listing: list[tuple[str, float]]) -> set[int]:
    """The prefixes of the data keys listed (any entry under `level_zero/data/NNN/`)."""
    out = set()
    for key, _ in listing:
        head = key[len(DATA_PREFIX):].split("/", 1)[0]
        if head.isdigit() and len(head) == 3:
            out.add(int(head))
    return out


async def _awaited(fut: asyncio.Future[Any]) -> Any:
    return await fut


def _explain(name: str, s: ms.System) -> str:
    if name == "safety":
        bad = [
            (w, s.objects[w.obj]) for w in s.writes
            if ms.live(s, w) and s.objects[w.obj].status == ms.DELETED
        ]
        return f"live placeholders whose object was deleted: {bad[:3]}"
    if name == "reports":
        return str([(q.state.min_epoch_lower_bound, [r.reported for r in q.replicas])
                    for q in s.partitions])
    return str(replace(s, objects=s.objects[:5], writes=s.writes[:5]))
