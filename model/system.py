"""The whole design as one transition system (spec section S).

A cluster epoch service on the controller's revision line, partitions that are created
over time, brokers whose epoch caches lag, producers that upload an L0 object and then
fence and replicate one placeholder per partition, replicates that land in any order or
fail with an unknown outcome (and may still commit), leadership changes and restarts, the
reconciler (with a ghost record of which placeholders are durable in L1), the
idle-partition housekeeper, replicas whose view of M(p) lags, health reports that may be
stale, and GC rounds that compute M once and delete objects any time later.

Every action is a pure function `(System, Variant, params) -> System` that raises
`NotEnabled` when its precondition does not hold. The Z3 proofs run these very functions
on symbolic values; the conformance harness steps them beside the implementation.

Invariants are written with `model.logic` connectives so that they evaluate to one formula.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from epochgc.model.cluster import GcEpoch, Report, gc_epoch_of_valid
from epochgc.model.errors import ModelError, require_int
from epochgc.model.fence import SeenWindow, fence
from epochgc.model.keys import deletable
from epochgc.model.logic import Cond, all_of, any_of, iff, implies, le_opt, merge_point, neg
from epochgc.model.partition import (
    INITIAL,
    PartitionState,
    above_barrier,
    accepts,
    apply_advance_epoch,
    apply_advance_gc_epoch,
    apply_placeholder,
    apply_reconciled,
    inactive_epoch,
)
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


# -- controller actions -------------------------------------------------------------------


def tick(s: System, v: Variant = REFERENCE) -> System:
    """Time passes: the clock advances (objects age)."""
    return replace(s, clock=s.clock + 1)


def mint(s: System, v: Variant = REFERENCE) -> System:
    """The epoch service mints a new epoch: the revision of its own command (R13)."""
    return replace(s, revision=s.revision + 1, cluster_epoch=s.revision + 1)


def create_partition(s: System, v: Variant, p: int) -> System:
    """A partition's creation revision is the revision of its create command (R14). On a
    deleted partition this is re-creation: a new incarnation, with no state, whose
    creation revision is above the deletion's (R35)."""
    part = _part(s, p)
    _require(not part.created, "create_partition", "partition already exists")
    rev = s.revision + 1
    new = replace(part, created=True, creation_revision=rev)
    return _with_part(replace(s, revision=rev), p, new)


def delete_partition(s: System, v: Variant, p: int) -> System:
    """Delete a partition: a controller command with its own revision (R32). It leaves the
    partition table, and with it the published snapshot: a round ignores its reports (the
    most permissive choice: counting stale ones could only lower M or block). Its replicas
    drop their state; every write to it that left idle is orphaned: an in-flight one is
    refused (its producer told), a landed one's data goes with the partition (R33, R34)."""
    part = _part(s, p)
    _require(part.created, "delete_partition", "partition does not exist")
    gone = replace(part, created=False, in_snapshot=False, state=INITIAL, log_end=0,
                   leader=0, replicas=tuple(Replica() for _ in part.replicas))
    writes = tuple(replace(w, status=ORPHANED, offset=-1, durable=False)
                   if w.partition == p and w.status != IDLE else w for w in s.writes)
    return _with_part(replace(s, revision=s.revision + 1, writes=writes), p, gone)


def publish_snapshot(s: System, v: Variant = REFERENCE) -> System:
    """The controller publishes the partition table with the revision it was read at."""
    parts = tuple(replace(q, in_snapshot=q.created) for q in s.partitions)
    return replace(s, snapshot_revision=s.revision, partitions=parts)


# -- produce path ---------------------------------------------------------------------------


def upload(s: System, v: Variant, o: int, cache: int) -> System:
    """A producer stamps an object with max(cached epoch, each target's creation revision)
    (A2) and uploads it; its placeholders become in-flight writes."""
    _require(0 <= o < len(s.objects), "upload", f"no object {o}")
    _require(s.objects[o].status == ABSENT, "upload", "object already uploaded")
    epoch = _cache(s, "upload", cache)
    _require(cache >= s.cache_floor, "upload", "caches were invalidated: none is below the "
             "cluster epoch of the invalidation (R36)")
    writes = s.writes
    for i, w in enumerate(s.writes):
        if w.obj != o:
            continue
        part = _part(s, w.partition)
        _require(part.created, "upload", f"partition {w.partition} does not exist yet")
        epoch = max(epoch, part.creation_revision)
        writes = _set(writes, i, replace(w, status=UPLOADED))
    return replace(s, objects=_set(s.objects, o, Obj(STORED, epoch, s.clock)), writes=writes)


def _fence_at_leader(
    s: System, v: Variant, p: int, epoch: int
) -> tuple[bool, System]:
    part = _part(s, p)
    leader = part.replicas[part.leader]
    r = fence(leader.seen, part.state, part.term, epoch, v)
    reps = _set(part.replicas, part.leader, replace(leader, seen=r.seen))
    return r.admitted, _with_part(s, p, replace(part, replicas=reps))


def _land(s: System, v: Variant, p: int, epoch: int) -> tuple[bool, int, System]:
    part = _part(s, p)
    require_int("apply", "epoch", epoch)
    if epoch < part.creation_revision:
        # A2 enforced at apply (as impl's PartitionStateMachine does): every placeholder of
        # this incarnation is stamped at least its creation revision, so one below it is of
        # an earlier incarnation (R35): refused, a no-op at its offset, whatever the window.
        return False, part.log_end, _with_part(s, p, replace(part, log_end=part.log_end + 1))
    res = apply_placeholder(part.state, epoch, part.log_end, v)
    new = replace(part, state=res.state, log_end=part.log_end + 1)
    if v.followers_slide:  # production's January and July rules (issue 30)
        from epochgc.model.prodrules import follower_slide

        new = replace(new, replicas=tuple(replace(r, seen=follower_slide(r.seen, epoch))
                                          for r in part.replicas))
    return res.accepted, part.log_end, _with_part(s, p, new)


def _write(s: System, w: int, status: int) -> Write:
    _require(0 <= w < len(s.writes), "write", f"no write {w}")
    wr = s.writes[w]
    _require(wr.status == status, "write", f"write {w} is not {WRITE_STATUS[status]}")
    return wr


def fence_write(s: System, v: Variant, w: int) -> System:
    """The partition leader fences an uploaded write (R10-R12)."""
    wr = _write(s, w, UPLOADED)
    admitted, s2 = _fence_at_leader(s, v, wr.partition, write_epoch(s, wr))
    new = replace(wr, status=FENCED if admitted else FAILED, replicated=admitted)
    return replace(s2, writes=_set(s2.writes, w, new))


def fail_replicate(s: System, v: Variant, w: int) -> System:
    """The producer sees the replicate after a fence fail; the seen window keeps its slide
    (F1). In Raft the entry may still commit, so the outcome is unknown: still in flight."""
    wr = _write(s, w, FENCED)
    return replace(s, writes=_set(s.writes, w, replace(wr, status=UNKNOWN)))


def give_up(s: System, v: Variant, w: int) -> System:
    """A write of unknown outcome is final once the log shows it can never be accepted (the
    window has passed its epoch; acceptance is monotone)."""
    wr = _write(s, w, UNKNOWN)
    st = s.partitions[wr.partition].state
    _require(neg(accepts(st, write_epoch(s, wr), v)), "give_up", "the write may still land")
    return replace(s, writes=_set(s.writes, w, replace(wr, status=FAILED)))


def land_write(s: System, v: Variant, w: int) -> System:
    """A fenced write's placeholder is committed and applied; fenced writes land in any
    order and may land after the term that fenced them (F3), or after their producer saw
    the replicate fail (unknown outcome)."""
    _require(0 <= w < len(s.writes), "land_write", f"no write {w}")
    wr = s.writes[w]
    _require((wr.status == FENCED) | (wr.status == UNKNOWN), "land_write",
             f"write {w} is not fenced or of unknown outcome")
    accepted, offset, s2 = _land(s, v, wr.partition, write_epoch(s, wr))
    new = replace(wr, status=ACCEPTED if accepted else REJECTED, offset=offset)
    return replace(s2, writes=_set(s2.writes, w, new))


def other_write(s: System, v: Variant, p: int, epoch: int) -> System:
    """Any other producer's placeholder (not tracked as an object here): fenced and, if
    admitted, applied. Its epoch is at least the partition's creation revision (A2)."""
    part = _part(s, p)
    require_int("other_write", "epoch", epoch)
    _require(epoch <= s.cluster_epoch, "other_write", "no epoch above the cluster epoch (A3)")
    _require(part.created, "other_write", "partition does not exist")
    _require(epoch >= part.creation_revision, "other_write", "epoch below creation revision")
    admitted, s2 = _fence_at_leader(s, v, p, epoch)
    _require(admitted, "other_write", "fence rejected it")
    return _land(s2, v, p, epoch)[2]


def late_land(s: System, v: Variant, p: int, epoch: int) -> System:
    """Another producer's placeholder, fenced at some earlier time by some leader, lands
    now. The fence that admitted it is gone, so any epoch may arrive (A3: never above the
    cluster epoch), a placeholder of an earlier incarnation of the partition included (its
    epoch is below this one's creation revision, R35): safety must come from the
    apply-time checks alone, the window (R3) and the incarnation (A2, enforced by `_land`).
    (The implementation also runs each incarnation as its own Raft group, so an earlier
    incarnation's entry never reaches this log: tests/impl/test_lifecycle_sim.py.)"""
    part = _part(s, p)
    require_int("late_land", "epoch", epoch)
    _require(epoch <= s.cluster_epoch, "late_land", "no epoch above the cluster epoch (A3)")
    _require(part.created, "late_land", "partition does not exist")
    return _land(s, v, p, epoch)[2]


def phantom_fence(s: System, v: Variant, p: int, epoch: int) -> System:
    """A fence whose replicate then fails: only the seen window moves (F1's first half)."""
    part = _part(s, p)
    require_int("phantom_fence", "epoch", epoch)
    _require(epoch <= s.cluster_epoch, "phantom_fence", "no epoch above the cluster epoch (A3)")
    _require(part.created, "phantom_fence", "partition does not exist")
    _require(epoch >= part.creation_revision, "phantom_fence", "epoch below creation revision")
    return _fence_at_leader(s, v, p, epoch)[1]


# -- partition upkeep ------------------------------------------------------------------------


def housekeep_epoch(part: Partition, cache: int) -> int:
    """The epoch the housekeeper advances to: never below the creation revision, so an
    idle new partition's floor cannot pull M below an earlier snapshot (mono_fresh_M)."""
    return max(cache, part.creation_revision)


def _in_l1_up_to(s: System, p: int, lrlo: int) -> Cond:
    """R27: every tracked placeholder of partition p at or below `lrlo` that was accepted
    is durable in L1 (untracked placeholders' objects are not modelled)."""
    return all_of(implies((w.status == ACCEPTED) & (w.offset <= lrlo), w.durable)
                  for w in s.writes if w.partition == p)


def housekeep(s: System, v: Variant, p: int, cache: int, lrlo: int) -> System:
    """The idle-partition housekeeper replicates advance_epoch(max(cached epoch, creation
    revision)) so an idle partition's floor can rise (R4), and moves LRLO over command
    entries up to `lrlo` (at most its own entry), never past an unreconciled placeholder
    (R28)."""
    part = _part(s, p)
    _require(part.created, "housekeep", "partition does not exist")
    epoch = housekeep_epoch(part, _cache(s, "housekeep", cache))
    require_int("housekeep", "lrlo", lrlo, minimum=-1)
    _require(lrlo <= part.log_end, "housekeep", "LRLO never passes its own entry")
    _require(_in_l1_up_to(s, p, lrlo), "housekeep", "never past an unreconciled placeholder")
    state = apply_advance_epoch(part.state, epoch, part.log_end, v)
    state = apply_reconciled(state, lrlo)
    return _with_part(s, p, replace(part, state=state, log_end=part.log_end + 1))


def copy_to_l1(s: System, v: Variant, w: int) -> System:
    """The reconciler makes an accepted placeholder's data durable in L1 (the ghost set)."""
    wr = _write(s, w, ACCEPTED)
    return replace(s, writes=_set(s.writes, w, replace(wr, durable=True)))


def reconcile(s: System, v: Variant, p: int, lrlo: int) -> System:
    """The reconciler records LRLO = `lrlo` (R5) once every placeholder up to it is durable
    in L1 (R27). It never passes the log end (A4)."""
    part = _part(s, p)
    require_int("reconcile", "lrlo", lrlo)
    _require(lrlo < part.log_end, "reconcile", "LRLO never passes the log end")
    _require(_in_l1_up_to(s, p, lrlo), "reconcile", "LRLO passes only placeholders in L1")
    return _with_part(s, p, replace(part, state=apply_reconciled(part.state, lrlo)))


def change_leader(s: System, v: Variant, p: int, r: int) -> System:
    """Leadership moves to replica r in a new term; r keeps whatever seen window it had
    from an earlier term (which only the term scoping makes harmless: F2)."""
    part = _part(s, p)
    _require(0 <= r < len(part.replicas), "change_leader", f"no replica {r}")
    return _with_part(s, p, replace(part, term=part.term + 1, leader=r))


def restart(s: System, v: Variant, p: int, r: int) -> System:
    """A node restarts: its in-memory seen window is gone."""
    part = _part(s, p)
    _require(0 <= r < len(part.replicas), "restart", f"no replica {r}")
    reps = _set(part.replicas, r, replace(part.replicas[r], seen=None))
    return _with_part(s, p, replace(part, replicas=reps))


def sync_replica(s: System, v: Variant, p: int, r: int) -> System:
    """A replica applies the committed log up to now (its M(p) catches up)."""
    part = _part(s, p)
    _require(0 <= r < len(part.replicas), "sync_replica", f"no replica {r}")
    rep = replace(part.replicas[r], inactive=inactive_epoch(part.state, v))
    return _with_part(s, p, replace(part, replicas=_set(part.replicas, r, rep)))


def report(s: System, v: Variant, p: int, r: int) -> System:
    """A replica publishes its current M(p) in a health report (which may then go stale):
    a value, or null when it has none."""
    part = _part(s, p)
    _require(0 <= r < len(part.replicas), "report", f"no replica {r}")
    inactive = part.replicas[r].inactive
    rep = replace(part.replicas[r], reported=inactive, reported_null=inactive is None)
    return _with_part(s, p, replace(part, replicas=_set(part.replicas, r, rep)))


def expire_report(s: System, v: Variant, p: int, r: int) -> System:
    """A replica's report leaves the store, or grows older than the maximum report age
    (which the reader treats alike: `impl/gc/reports.py`): absent from the round's
    reports, not null."""
    part = _part(s, p)
    _require(0 <= r < len(part.replicas), "expire_report", f"no replica {r}")
    rep = replace(part.replicas[r], reported=None, reported_null=False)
    return _with_part(s, p, replace(part, replicas=_set(part.replicas, r, rep)))


# -- the epoch barrier (R36-R38) ---------------------------------------------------------------


def invalidate_caches(s: System, v: Variant = REFERENCE) -> System:
    """The barrier's first step: every broker's epoch cache is invalidated, so every
    epoch a producer stamps from now on is at least the current cluster epoch (the token
    of a write is taken before its cache is read: a write that read the old cache is in
    flight, and the drain waits for it)."""
    return replace(s, cache_floor=s.cluster_epoch)


def drained(s: System, p: int, epoch: int) -> Cond:
    """What the barrier's drain guarantees: no write to partition p stamped at or below
    `epoch` is still uploaded or fenced (its producer has its answer). A write of unknown
    outcome counts as answered, yet its placeholder may still commit later."""
    return all_of(implies((w.partition == p) & ((w.status == UPLOADED) | (w.status == FENCED)),
                          write_epoch(s, w) > epoch)
                  for w in s.writes)


def barrier(s: System, v: Variant, p: int, epoch: int) -> System:
    """The barrier writes advance_gc_epoch(epoch) to partition p (R36): once the epoch
    service has moved past `epoch` and the caches were invalidated after that (so no new
    write is stamped at or below it), and the in-flight writes at or below it are
    drained. The partition keeps `epoch` pending at the command's offset (R36), refuses
    placeholders at or below it from then on (R37) and promotes it once LRLO reaches the
    command (R38)."""
    part = _part(s, p)
    _require(part.created, "barrier", "partition does not exist")
    require_int("barrier", "epoch", epoch)
    _require(epoch < s.cache_floor, "barrier", "the caches were not invalidated after the "
             "epoch service moved past the candidate")
    # A partition created later accepts nothing at or below its creation revision (A2):
    # a barrier below that would pull its M(p), and M, below an earlier snapshot.
    _require(epoch + 1 >= part.creation_revision, "barrier", "the candidate is below the "
             "partition's creation revision - 1")
    _require(drained(s, p, epoch), "barrier", "a write at or below the candidate is in flight")
    state = apply_advance_gc_epoch(part.state, epoch, part.log_end)
    return _with_part(s, p, replace(part, state=state, log_end=part.log_end + 1))


# -- GC ---------------------------------------------------------------------------------------


def partition_id(p: int) -> str:
    return f"p{p}"


def reports_of(s: System, fresh: bool = False, v: Variant = REFERENCE) -> list[Report]:
    """The health reports in the store: only the replicas that have one (a value or null),
    as `impl/gc/reports.py` finds them; a partition none of whose replicas has one is not
    listed at all (F4: it must block the round). `fresh`: what each replica would say now."""
    out = []
    for p, part in enumerate(s.partitions):
        for r, rep in enumerate(part.replicas):
            if fresh:
                out.append(Report(partition_id(p), f"r{r}", inactive_epoch(part.state, v)))
            elif rep.reported is not None or rep.reported_null:
                out.append(Report(partition_id(p), f"r{r}", rep.reported))
    return out


def _counted_reports(s: System, snap: list[int], fresh: bool, v: Variant) -> list[Report]:
    """The reports of `reports_of` that can change a round: the values reported for the
    snapshot's partitions. `gc_epoch_of_valid` ignores a null report and every report of a
    partition outside the snapshot (a partition with no value blocks whether its replicas
    reported null or nothing), so the round's M and blocked are the same as over every
    report in the store (tests/model/test_reports_partial.py compares them). Reading only
    these keeps a symbolic run (proofs.param.symcorr) from forking on reports that cannot
    matter: a null flag, or a partition the round does not look at."""
    out = []
    for p in snap:
        part = s.partitions[p]
        for r, rep in enumerate(part.replicas):
            value = inactive_epoch(part.state, v) if fresh else rep.reported
            if value is not None:
                out.append(Report(partition_id(p), f"r{r}", value))
    return out


def round_epoch(
    s: System, v: Variant, foreign: tuple[int | None, ...] = (), fresh: bool = False
) -> GcEpoch:
    """M for a GC round over the published snapshot. `foreign` are reports of partitions
    outside this model (in the proofs: every other partition, chosen by the adversary)."""
    snap = [p for p, q in enumerate(s.partitions) if q.in_snapshot]
    parts = [partition_id(p) for p in snap]
    reps = _counted_reports(s, snap, fresh, v)
    for i, value in enumerate(foreign):
        parts.append(f"x{i}")
        reps.append(Report(f"x{i}", "r0", value))
    return gc_epoch_of_valid(s.snapshot_revision, parts, reps, v)


def gc_compute(s: System, v: Variant, foreign: tuple[int | None, ...] = ()) -> System:
    """A GC round starts: it computes M from the published snapshot and the reports in the
    store (both possibly stale) and keeps it for its later deletes. Foreign reports are
    refused below -1 as `gc_epoch` refuses them."""
    for i, value in enumerate(foreign):
        if value is not None:
            _require(value >= -1, "gc_compute", f"foreign[{i}] is below -1")
    g = round_epoch(s, v, foreign)
    return replace(s, gc_m=g.M, last_gc=g)


def gc_delete(s: System, v: Variant, o: int) -> System:
    """The round deletes one object, any time after computing M, checked against that M
    (listing and deleting run long after M was computed)."""
    _require(0 <= o < len(s.objects), "gc_delete", f"no object {o}")
    obj = s.objects[o]
    _require(obj.status == STORED, "gc_delete", f"object {o} is not stored")
    _require(deletable(obj.epoch, s.clock - obj.written_at, s.gc_m, s.grace), "gc_delete",
             "epoch above the round's M, or younger than the grace period")
    return replace(s, objects=_set(s.objects, o, replace(obj, status=DELETED)))


# -- the action table ---------------------------------------------------------------------

# Parameter kinds: "partition", "replica", "object", "write": indices; "epoch", "offset":
# integers; "foreign": a tuple of optional foreign M(p) values.
Action = Callable[..., System]
ACTIONS: dict[str, tuple[Action, tuple[tuple[str, str], ...]]] = {
    "tick": (tick, ()),
    "mint": (mint, ()),
    "create_partition": (create_partition, (("p", "partition"),)),
    "delete_partition": (delete_partition, (("p", "partition"),)),
    "publish_snapshot": (publish_snapshot, ()),
    "upload": (upload, (("o", "object"), ("cache", "epoch"))),
    "fence_write": (fence_write, (("w", "write"),)),
    "fail_replicate": (fail_replicate, (("w", "write"),)),
    "give_up": (give_up, (("w", "write"),)),
    "land_write": (land_write, (("w", "write"),)),
    "copy_to_l1": (copy_to_l1, (("w", "write"),)),
    "other_write": (other_write, (("p", "partition"), ("epoch", "epoch"))),
    "late_land": (late_land, (("p", "partition"), ("epoch", "epoch"))),
    "phantom_fence": (phantom_fence, (("p", "partition"), ("epoch", "epoch"))),
    "housekeep": (housekeep, (("p", "partition"), ("cache", "epoch"), ("lrlo", "offset"))),
    "reconcile": (reconcile, (("p", "partition"), ("lrlo", "offset"))),
    "change_leader": (change_leader, (("p", "partition"), ("r", "replica"))),
    "restart": (restart, (("p", "partition"), ("r", "replica"))),
    "sync_replica": (sync_replica, (("p", "partition"), ("r", "replica"))),
    "report": (report, (("p", "partition"), ("r", "replica"))),
    "expire_report": (expire_report, (("p", "partition"), ("r", "replica"))),
    "gc_compute": (gc_compute, (("foreign", "foreign"),)),
    "gc_delete": (gc_delete, (("o", "object"),)),
    "invalidate_caches": (invalidate_caches, ()),
    "barrier": (barrier, (("p", "partition"), ("epoch", "epoch"))),
}


def step(s: System, v: Variant, action: str, **params: Any) -> System:
    if action not in ACTIONS:
        raise ModelError("step", "action", f"unknown action {action!r}")
    return ACTIONS[action][0](s, v, **params)


# -- invariants (state predicates) -----------------------------------------------------------


def live(s: System, w: Write, v: Variant = REFERENCE) -> Cond:
    """Does the placeholder of write `w` still need its object? Accepted and its data not
    yet durable in L1 (the ghost set, R27), or in flight (uploaded, fenced, or of unknown
    outcome) and still acceptable (acceptance is monotone: a write the window has passed
    can never be accepted again)."""
    part = s.partitions[w.partition]
    e = write_epoch(s, w)
    inflight = (w.status == UPLOADED) | (w.status == FENCED) | (w.status == UNKNOWN)
    return ((w.status == ACCEPTED) & neg(w.durable)) | (inflight & acceptable(part.state, e, v))


def inv_safety(s: System, v: Variant = REFERENCE) -> Cond:
    """I1 (the safety property): no GC round ever deleted an object that a committed,
    unreconciled placeholder or an in-flight, still-acceptable write refers to."""
    return all_of(implies(live(s, w, v), s.objects[w.obj].status != DELETED) for w in s.writes)


def inv_floor(s: System, v: Variant = REFERENCE) -> Cond:
    """I2: every accepted, unreconciled placeholder has epoch >= min_epoch_lower_bound, and
    every accepted placeholder at or after the window offset has epoch >= previous_applied."""
    conds = []
    for w in s.writes:
        st = s.partitions[w.partition].state
        if st.min_epoch_lower_bound is None or st.previous_applied_epoch is None:
            conds.append(w.status != ACCEPTED)
            continue
        assert st.window_offset is not None
        e = write_epoch(s, w)
        acc = w.status == ACCEPTED
        conds.append(
            implies(acc & (w.offset > st.last_reconciled_log_offset), e >= st.min_epoch_lower_bound)
        )
        conds.append(implies(acc & (w.offset >= st.window_offset), e >= st.previous_applied_epoch))
    conds += _barrier_floor(s)
    return all_of(conds)


def _barrier_floor(s: System) -> list[Cond]:
    """I2 for the barrier (R37, R38): an accepted placeholder after the barrier's command
    is above its candidate; one not yet reconciled is above the promoted safe epoch."""
    conds: list[Cond] = []
    for w in s.writes:
        st = s.partitions[w.partition].state
        acc = w.status == ACCEPTED
        e = write_epoch(s, w)
        conds.append(implies(acc & (st.barrier_epoch >= 0) & (w.offset > st.barrier_offset),
                             e > st.barrier_epoch))
        conds.append(implies(acc & (st.gc_safe_epoch >= 0)
                             & (w.offset > st.last_reconciled_log_offset),
                             e > st.gc_safe_epoch))
    return conds


def _state_ok(part: Partition) -> Cond:
    st = part.state
    fields = (st.max_applied_epoch, st.previous_applied_epoch, st.min_epoch_lower_bound,
              st.window_offset)
    base = (
        (st.last_reconciled_log_offset >= -1)
        & (st.last_reconciled_log_offset < part.log_end)
        & (part.log_end >= 0)
    )
    base = all_of((base, _barrier_ok(part)))
    if all(f is None for f in fields):
        return base
    if any(f is None for f in fields):
        return False
    assert st.max_applied_epoch is not None and st.previous_applied_epoch is not None
    assert st.min_epoch_lower_bound is not None and st.window_offset is not None
    return base & all_of(
        (
            part.created,
            st.min_epoch_lower_bound <= st.previous_applied_epoch,
            st.previous_applied_epoch <= st.max_applied_epoch,
            part.creation_revision <= st.min_epoch_lower_bound,
            st.window_offset >= 0,
            st.window_offset < part.log_end,
        )
    )


def _barrier_ok(part: Partition) -> Cond:
    """I3 for the barrier (negative: none): a pending epoch is on a created partition, its
    command inside the log, at least the creation revision - 1; a promoted one at most
    the pending one."""
    st = part.state
    be, g = st.barrier_epoch, st.gc_safe_epoch
    return all_of((
        implies(be >= 0, all_of((part.created, st.barrier_offset >= 0,
                                 st.barrier_offset < part.log_end,
                                 be + 1 >= part.creation_revision))),
        implies(g >= 0, all_of((be >= 0, g <= be, g + 1 >= part.creation_revision))),
    ))


def inv_window(s: System, v: Variant = REFERENCE) -> Cond:
    """I3: every window is well formed: previous <= max, the floor below both and at or
    above the creation revision, fields set together, offsets inside the log; seen windows
    have previous <= max; terms are not negative."""
    conds = []
    for part in s.partitions:
        conds.append(_state_ok(part))
        conds.append(implies(neg(part.created), part.log_end == 0))
        conds.append(part.term >= 0)  # a Raft term (the fence refuses a negative one)
        conds.extend(r.seen.previous <= r.seen.max for r in part.replicas if r.seen is not None)
    return all_of(conds)


def _m_parts(st: PartitionState, v: Variant) -> list[tuple[Cond, Any]]:
    """M(p) (`inactive_epoch`) as the max of its (present?, value) parts, so that
    comparisons with it are formulas, not case splits (R7, R38)."""
    if v.watermark_from_max:
        return [] if st.max_applied_epoch is None else [(True, st.max_applied_epoch - 1)]
    out: list[tuple[Cond, Any]] = [(st.gc_safe_epoch >= 0, st.gc_safe_epoch)]
    if st.min_epoch_lower_bound is not None:
        out.append((True, st.min_epoch_lower_bound - 1))
    return out


def le_inactive(x: int, st: PartitionState, v: Variant = REFERENCE) -> Cond:
    """`x <= inactive_epoch(st)`, False when it has no value."""
    return any_of(present & (x <= val) for present, val in _m_parts(st, v))


def inactive_le(a: PartitionState, b: PartitionState, v: Variant = REFERENCE) -> Cond:
    """`le_opt(inactive_epoch(a), inactive_epoch(b))`: every present part of M(a) is at
    most M(b) (an absent M(a) is below everything)."""
    return all_of(implies(present, le_inactive(val, b, v)) for present, val in _m_parts(a, v))


def inv_reports(s: System, v: Variant = REFERENCE) -> Cond:
    """I4: a replica's M(p), and any report it published, is at most the partition's
    current M(p) (M(p) is monotone, so stale views are low, never high), and never below
    -1."""
    return all_of(_replica_reports(r, part.state, v)
                  for part in s.partitions for r in part.replicas)


@merge_point  # one formula per replica: the proofs do not fork on every replica's fields
def _replica_reports(r: Replica, st: PartitionState, v: Variant) -> Cond:
    """I4 for one replica of a partition in state `st`."""
    return all_of((
        True if r.inactive is None else le_inactive(r.inactive, st, v),
        le_opt(r.reported, r.inactive),
        True if r.inactive is None else r.inactive >= -1,  # M(p) >= -1
        True if r.reported is None else r.reported >= -1,
        implies(r.reported_null, r.reported is None),  # null: no value
    ))


def inv_revisions(s: System, v: Variant = REFERENCE) -> Cond:
    """I5: one number line: the cluster epoch and the snapshot revision are at most the
    revision; the snapshot lists exactly the partitions created by its revision."""
    conds: list[Cond] = [
        s.cluster_epoch >= 0,
        s.cluster_epoch <= s.revision,
        s.snapshot_revision >= 0,
        s.snapshot_revision <= s.revision,
        s.cache_floor >= 0,
        s.cache_floor <= s.cluster_epoch,
    ]
    for part in s.partitions:
        c, crev = part.created, part.creation_revision
        conds.append(implies(c, (crev >= 1) & (crev <= s.revision)))
        conds.append(implies(part.in_snapshot, c & (crev <= s.snapshot_revision)))
        conds.append(implies(c & neg(part.in_snapshot), crev > s.snapshot_revision))
        conds.append(implies(neg(c), neg(part.in_snapshot)))
    return all_of(conds)


def inv_objects(s: System, v: Variant = REFERENCE) -> Cond:
    """I6: writes and objects agree: a write leaves idle exactly when its object is
    uploaded, its object's epoch is at most the revision and (unless its partition was
    deleted) at least its partition's creation revision, an orphaned write's epoch is below
    its re-created partition's creation revision, and an accepted write sits inside its
    partition's log."""
    conds = []
    conds.append(s.grace >= 0)
    for o in s.objects:
        conds.append((o.status >= ABSENT) & (o.status <= DELETED))
        conds.append(implies(o.status != ABSENT, o.epoch <= s.revision))  # stamped in the past
        conds.append(implies(o.status != ABSENT, o.written_at <= s.clock))  # in the past
    for w in s.writes:
        obj = s.objects[w.obj]
        part = s.partitions[w.partition]
        conds.append((w.status >= IDLE) & (w.status <= ORPHANED))
        conds.append(iff(w.status == IDLE, obj.status == ABSENT))
        stamped = part.created & (obj.epoch >= part.creation_revision)
        conds.append(implies((w.status != IDLE) & (w.status != ORPHANED), stamped))
        # R35, the revision line: an orphaned write's epoch is below any later incarnation's
        # creation revision (it was stamped at most the revision at its upload).
        conds.append(implies((w.status == ORPHANED) & part.created,
                             obj.epoch < part.creation_revision))
        conds.append(implies(w.status == ACCEPTED, (w.offset >= 0) & (w.offset < part.log_end)))
    return all_of(conds)


def inv_l1(s: System, v: Variant = REFERENCE) -> Cond:
    """I7 (R27): the ghost set holds accepted placeholders only, and LRLO never passes an
    accepted placeholder that is not in it."""
    conds = []
    for w in s.writes:
        lrlo = s.partitions[w.partition].state.last_reconciled_log_offset
        conds.append(implies(w.durable, w.status == ACCEPTED))
        conds.append(implies((w.status == ACCEPTED) & (w.offset <= lrlo), w.durable))
    return all_of(conds)


def inv_round(s: System, v: Variant = REFERENCE) -> Cond:
    """I8: the M of the round in progress is still safe: at most the revision, at least -1,
    and at most the current M(p) of every partition created at or before it (a partition
    created later has a creation revision, hence every epoch it accepts, above M)."""
    m = s.gc_m
    if m is None:
        return True
    conds: list[Cond] = [m >= -1, m <= s.revision]
    for part in s.partitions:
        early = part.created & (part.creation_revision <= m)
        conds.append(implies(early, le_inactive(m, part.state, v)))
    return all_of(conds)


def inv_answer(s: System, v: Variant = REFERENCE) -> Cond:
    """I9 (the producer's answer): a write reported failed whose placeholder went to the
    log can never be committed as accepted: its window has passed its epoch (acceptance
    is monotone, so it stays passed). One the fence rejected never reached the log."""
    return all_of(implies((w.status == FAILED) & w.replicated,
                          neg(acceptable(s.partitions[w.partition].state, write_epoch(s, w), v)))
                  for w in s.writes)


INVARIANTS: dict[str, Callable[[System, Variant], Cond]] = {
    "safety": inv_safety,
    "floor": inv_floor,
    "window": inv_window,
    "reports": inv_reports,
    "revisions": inv_revisions,
    "objects": inv_objects,
    "l1": inv_l1,
    "round": inv_round,
    "answer": inv_answer,
}


def holds(s: System, v: Variant = REFERENCE) -> Cond:
    return all_of(f(s, v) for f in INVARIANTS.values())


# -- transition invariants (monotonicity) ---------------------------------------------------


def fresh_m(s: System, v: Variant = REFERENCE) -> int | None:
    """M computed from fresh reports (every replica says its partition's current M(p))."""
    return round_epoch(s, v, (), fresh=True).M


# T1-T3 hold while the partition exists: deletion drops its state (R32).
def mono_max_applied(a: System, b: System, v: Variant = REFERENCE) -> Cond:
    return all_of(implies(q.created, le_opt(p.state.max_applied_epoch,
                                            q.state.max_applied_epoch))
                  for p, q in zip(a.partitions, b.partitions, strict=True))


def mono_floor(a: System, b: System, v: Variant = REFERENCE) -> Cond:
    return all_of(implies(q.created, le_opt(p.state.min_epoch_lower_bound,
                                            q.state.min_epoch_lower_bound))
                  for p, q in zip(a.partitions, b.partitions, strict=True))


def mono_inactive(a: System, b: System, v: Variant = REFERENCE) -> Cond:
    return all_of(implies(q.created, inactive_le(p.state, q.state, v))
                  for p, q in zip(a.partitions, b.partitions, strict=True))


def mono_fresh_m(a: System, b: System, v: Variant = REFERENCE,
                 m: Callable[[System, Variant], int | None] = fresh_m) -> Cond:
    """M over fresh reports never goes backwards (a blocked round is no value, not lower).
    `m` is `fresh_m` (the prover passes one that computes it once per state)."""
    ma, mb = m(a, v), m(b, v)
    if ma is None or mb is None:
        return True
    return ma <= mb


def grace_kept(a: System, b: System, v: Variant = REFERENCE) -> Cond:
    """T5: an object deleted by a step was at least the grace period old."""
    # Not strict: the conformance harness's abstraction gains objects as they are written
    # (its clock and grace are 0, so every pair it compares holds).
    return all_of(implies((x.status == STORED) & (y.status == DELETED),
                          b.clock - y.written_at >= b.grace)
                  for x, y in zip(a.objects, b.objects, strict=False))


TRANSITION_INVARIANTS: dict[str, Callable[[System, System, Variant], Cond]] = {
    "mono_max_applied": mono_max_applied,
    "mono_floor": mono_floor,
    "mono_inactive": mono_inactive,
    "mono_fresh_M": mono_fresh_m,
    "grace": grace_kept,
}

