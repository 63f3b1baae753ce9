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
- the proven invariants `model.invariants.INVARIANTS` on the abstraction of the cluster
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

The harness is split by responsibility; `Harness` (here) composes the parts, builds the
cluster and runs the checks after every step (`check_step`):
- `deployment`: nodes, partition names, Raft timing, bounds, `STATS`;
- `instrumented`: the store with injectable faults and the instrumented SimCluster;
- `storeview`: the harness's own view of the store, by path;
- `state`: the shared state and the reads of the cluster every part makes;
- `operations`, `compound`: the operations it drives (single and held-write/lifecycle ones);
- `incarnations`: identity across a partition's lifecycle and the R32/R34 checks;
- `gcchecks`: GC rounds against the model;
- `refinement`: the implementation against the model's replay, step by step;
- `abstraction`: the abstraction function and the model's invariants on it.
This module keeps every public name other modules import from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from typing import Any

from epochgc.impl.controller.statemachine import ControllerStateMachine
from epochgc.impl.gc.reports import HEALTH_PREFIX
from epochgc.impl.raft.simtypes import Faults
from epochgc.impl.sim.network import BrokerSimulator
from epochgc.impl.store.local import LocalStore
from epochgc.model import system as ms
from tests.conformance.abstraction import Abstraction
from tests.conformance.compound import CompoundOperations
from tests.conformance.coverage import Observer
from tests.conformance.deployment import (
    ALL_PARTITIONS,
    DISK_SNAPSHOT_INTERVAL,
    HOLD_WAIT_EARLY_EXIT,
    INITIAL_PARTITIONS,
    MAX_REPORT_AGE_S,
    NODES,
    RAFT_CHECK,
    RAFT_CONFIG,
    STATS,
    TMP_BASE,
    WAIT_STEPS,
)
from tests.conformance.gcchecks import GcChecks
from tests.conformance.implchecks import LandedChecks
from tests.conformance.incarnations import Incarnations, incarnation_at
from tests.conformance.instrumented import (
    FaultyStore,
    HarnessCluster,
    _count_network,
    _flush_network_counts,
)
from tests.conformance.operations import Operations
from tests.conformance.refinement import Refinement
from tests.conformance.shadow import Divergence, Shadow
from tests.conformance.storeview import _prefixes, _regular_file, stored_files

__all__ = [
    "ALL_PARTITIONS", "DISK_SNAPSHOT_INTERVAL", "HEALTH_PREFIX", "HOLD_WAIT_EARLY_EXIT",
    "INITIAL_PARTITIONS", "MAX_REPORT_AGE_S", "NODES", "RAFT_CHECK", "RAFT_CONFIG", "STATS",
    "TMP_BASE", "WAIT_STEPS", "FaultyStore", "Harness", "HarnessCluster", "_prefixes",
    "_regular_file", "incarnation_at", "stored_files",
]


class Harness(Operations, CompoundOperations, Incarnations, GcChecks, Refinement,
              Abstraction):
    """One simulated cluster driven step by step, with every check (see the module's
    docstring for the parts)."""

    def __init__(
        self, seed: int = 0, spark: Callable[[], Any] | None = None, disk: bool = False,
        release_at_enqueue: bool = True,
    ) -> None:
        """`disk`: every broker group on the real DiskStorage with small segments; crashes
        are power losses (unsynced bytes torn or zero-filled, unsynced file creations and
        deletions undone) half of them between a batch's write and its fsync; even seeds
        share one group commit per node (as the server does), odd ones sync each group.
        `release_at_enqueue`: the fences' release point (`BrokerConfig`; False: the lock is
        held through the replicate)."""
        self.tmp = tempfile.mkdtemp(prefix="conformance-", dir=TMP_BASE)
        # Pruning on the calling thread, as every other call the harness makes (inline pools).
        self.local = LocalStore(os.path.join(self.tmp, "store"), create=True,
                                prune_concurrency=1)
        self.store = FaultyStore(self.local)
        self.disk = disk
        self.c = HarnessCluster(
            seed=seed, n_nodes=len(NODES), partitions=INITIAL_PARTITIONS, store=self.store,
            faults=Faults(), disk=disk, segment_bytes=512, group_commit=seed % 2 == 0,
            # Disk programs also compact on their own every few entries: the disk log's
            # recovery after compactions behind the log end is what they are for.
            snapshot_interval=DISK_SNAPSHOT_INTERVAL if disk else 0,
            raft_config=RAFT_CONFIG, release_at_enqueue=release_at_enqueue,
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
