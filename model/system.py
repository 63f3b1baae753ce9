"""The whole design's state (spec section S): partitions, replicas, objects and writes.

A cluster epoch service on the controller's revision line, partitions that are created
over time, brokers whose epoch caches lag, producers that upload an L0 object and then
fence and replicate one placeholder per partition, replicates that land in any order or
fail with an unknown outcome (and may still commit), leadership changes and restarts, the
reconciler (with a ghost record of which placeholders are durable in L1), the
idle-partition housekeeper, replicas whose view of M(p) lags, health reports that may be
stale, and GC rounds that compute M once and delete objects any time later.

This module holds that state (`System` and its parts), the initial state and the small
helpers every action uses. The actions are in `model.actions`, the invariants over a
state and a step in `model.invariants`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from epochgc.model.cluster import GcEpoch
from epochgc.model.errors import ModelError, require_int
from epochgc.model.fence import SeenWindow
from epochgc.model.logic import Cond, all_of
from epochgc.model.partition import INITIAL, PartitionState, above_barrier, accepts
from epochgc.model.variants import REFERENCE, Variant

# Write (one placeholder of one object for one partition) life cycle. UNKNOWN: the
# producer saw its replicate fail, but Raft may still commit it (it stays in flight).
# ORPHANED: its partition was deleted (R33, R34): refused if still in flight, its data
# deleted with the partition if it landed; final, whatever incarnation comes next (R35).
IDLE, UPLOADED, FENCED, ACCEPTED, REJECTED, FAILED, UNKNOWN, ORPHANED = range(8)
WRITE_STATUS = ("idle", "uploaded", "fenced", "accepted", "rejected", "failed", "unknown",
                "orphaned")
IN_FLIGHT = (UPLOADED, FENCED, UNKNOWN)
# Object life cycle in the store.
ABSENT, STORED, DELETED = range(3)
OBJECT_STATUS = ("absent", "stored", "deleted")


class NotEnabled(ModelError):
    """The action's precondition does not hold in this state."""


@dataclass(frozen=True)
class Replica:
    """Its report in the store is a partial map entry: absent (`reported` None and not
    `reported_null`: never published, or too old to count), null (published with no
    M(p): `reported_null`), or a value (`reported`)."""

    seen: SeenWindow | None = None  # this node's in-memory seen window (lost on restart)
    inactive: int | None = None  # M(p) of this replica's applied state (may lag)
    reported: int | None = None  # the value in its report in the store, if it has one
    reported_null: bool = False  # its report in the store says "no value"


@dataclass(frozen=True)
class Partition:
    created: bool = False
    creation_revision: int = 0
    state: PartitionState = INITIAL  # the committed window state (every replica's, in time)
    log_end: int = 0  # next log offset
    term: int = 0
    leader: int = 0  # index into replicas
    in_snapshot: bool = False  # listed in the published partition snapshot
    replicas: tuple[Replica, ...] = (Replica(), Replica(), Replica())


@dataclass(frozen=True)
class Obj:
    status: int = ABSENT
    epoch: int = 0
    written_at: int = 0  # the clock when it was uploaded (its age: clock - written_at)


@dataclass(frozen=True)
class Write:
    obj: int  # index into System.objects
    partition: int  # index into System.partitions
    status: int = IDLE
    offset: int = -1  # log offset once landed
    durable: bool = False  # ghost (R27): its data is durable in L1 (the reconciler copied it)
    # ghost: its fence admitted it, so its placeholder went to the log and may commit even
    # after the producer was told the write failed (give_up): the answer invariant (I9)
    replicated: bool = False


@dataclass(frozen=True)
class System:
    revision: int = 0  # controller log position: epochs and revisions share it
    cluster_epoch: int = 0
    snapshot_revision: int = 0
    partitions: tuple[Partition, ...] = ()
    objects: tuple[Obj, ...] = ()
    writes: tuple[Write, ...] = ()
    gc_m: int | None = None  # M of the GC round in progress (its deletes check against it)
    last_gc: GcEpoch | None = field(default=None, compare=False)
    clock: int = 0  # the store's clock (an object's age is measured on it)
    grace: int = 0  # GC's grace period: an object younger than this is never deleted
    # The epoch barrier's cache invalidation (R36): every broker's cached epoch is at least
    # this (the cluster epoch when the caches were last invalidated).
    cache_floor: int = 0


def initial(
    n_partitions: int, n_replicas: int, writes: Sequence[tuple[int, int]], n_objects: int,
    grace: int = 0,
) -> System:
    """An empty cluster with `writes` = (object, partition) placeholder slots and GC's
    grace period `grace` (>= 0)."""
    require_int("initial", "grace", grace)
    for i, (o, p) in enumerate(writes):
        if not (0 <= o < n_objects and 0 <= p < n_partitions):
            raise ModelError("initial", f"writes[{i}]", f"({o}, {p}) is out of range")
    part = Partition(replicas=tuple(Replica() for _ in range(n_replicas)))
    return System(
        partitions=tuple(part for _ in range(n_partitions)),
        objects=tuple(Obj() for _ in range(n_objects)),
        writes=tuple(Write(o, p) for o, p in writes),
        grace=grace,
    )


# -- helpers ------------------------------------------------------------------------------


def _set(tup: tuple[Any, ...], i: int, value: Any) -> tuple[Any, ...]:
    return (*tup[:i], value, *tup[i + 1 :])


def _part(s: System, p: int) -> Partition:
    if not 0 <= p < len(s.partitions):
        raise NotEnabled("system", "partition", f"no partition {p}")
    return s.partitions[p]


def _with_part(s: System, p: int, part: Partition) -> System:
    return replace(s, partitions=_set(s.partitions, p, part))


def _require(cond: Cond, where: str, what: str) -> None:
    if not cond:
        raise NotEnabled(where, "precondition", what)


def write_epoch(s: System, w: Write) -> int:
    return s.objects[w.obj].epoch


def acceptable(st: PartitionState, epoch: int, v: Variant = REFERENCE) -> Cond:
    """Would a placeholder with this epoch be accepted if it landed now: the window (R3)
    and the barrier (R37). Monotone: both only move up."""
    return all_of((accepts(st, epoch, v), above_barrier(st, epoch, v)))


def _cache(s: System, where: str, cache: int) -> int:
    """A broker's cached cluster epoch: any value it once saw, so never above the current
    one (assumption A3); caches lag, they do not lead."""
    require_int(where, "cache", cache)
    _require(cache <= s.cluster_epoch, where, "a cached epoch is never above the cluster epoch")
    return cache
