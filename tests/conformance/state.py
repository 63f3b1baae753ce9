"""The conformance harness's shared state and its reads of the cluster (the live nodes, the
partitions created, the controller state, committed or most advanced, a bounded wait)."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any

from epochgc.impl.broker.broker import CONTROLLER_GROUP
from epochgc.impl.controller.statemachine import ControllerStateMachine
from epochgc.impl.raft.messages import Entry
from epochgc.impl.store.local import LocalStore
from epochgc.model import system as ms
from tests.conformance.coverage import Observer
from tests.conformance.deployment import ALL_PARTITIONS, STATS, WAIT_STEPS
from tests.conformance.implchecks import LandedChecks
from tests.conformance.instrumented import FaultyStore, HarnessCluster
from tests.conformance.shadow import Shadow


class HarnessState:
    """The state `Harness.__init__` sets up, shared by every part of the harness (each part
    is a mixin over it), and the reads of the cluster every part makes."""

    tmp: str
    local: LocalStore  # the store's directory, read by the checks directly
    store: FaultyStore  # the store the implementation uses (faults injectable)
    disk: bool
    c: HarnessCluster
    spark: Callable[[], Any] | None
    rng: random.Random
    raft_check_per_event: bool
    tasks: list[asyncio.Task[Any]]  # operations left running
    steps: int
    coverage: Observer
    # the model side: shadows of the committed logs, objects written, acknowledged records
    shadows: dict[str, Shadow]
    all_shadows: dict[int, Shadow]
    deletions_seen: set[int]
    objects: dict[str, tuple[int, tuple[str, ...]]]
    _targets: dict[str, tuple[str, ...]]
    _first_stamp: dict[tuple[str, str], int]
    deleted: set[str]
    expected: dict[str, dict[int, bytes]]
    _expected_group: dict[str, int | None]
    record_seq: int
    readback_dirty: bool
    # published documents as the harness read them
    snapshot: tuple[int, tuple[str, ...]] | None
    health: dict[int, dict[str, int | None]]
    health_group: dict[int, dict[str, int]]
    # incremental positions in the cluster's observer logs
    fence_seen: int
    apply_seen: int
    acks_seen: int
    admitted_seen: int
    landed: LandedChecks
    _impl_checked: dict[tuple[int, str], tuple[Any, ...]]
    _net_seen: Counter[str]
    # the committed controller log and the incarnations it holds
    _ctl_committed: ControllerStateMachine
    _deleted_index: dict[int, tuple[Any, int, dict[str, list[tuple[int, int]]]]]
    _incarnations: dict[str, int]
    _incarnations_rev: int
    # the abstraction
    max_revision: int
    prev_system: ms.System | None
    _interned: dict[tuple[Any, ...], Any]
    _repeat_checked: bool

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
