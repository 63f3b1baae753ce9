"""The transitions of the whole design (spec section S actions) and the GC round.

Every action is a pure function `(System, Variant, params) -> System` that raises
`NotEnabled` when its precondition does not hold. The Z3 proofs run these very functions
on symbolic values; the conformance harness steps them beside the implementation.
`ACTIONS` names them with their parameters' kinds, `step` applies one by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from epochgc.model.cluster import GcEpoch, Report, gc_epoch_of_valid
from epochgc.model.errors import ModelError, require_int
from epochgc.model.fence import fence
from epochgc.model.keys import deletable
from epochgc.model.logic import Cond, all_of, implies, neg
from epochgc.model.partition import (
    INITIAL,
    accepts,
    apply_advance_epoch,
    apply_advance_gc_epoch,
    apply_placeholder,
    apply_reconciled,
    inactive_epoch,
)
from epochgc.model.system import (
    ABSENT,
    ACCEPTED,
    DELETED,
    FAILED,
    FENCED,
    IDLE,
    ORPHANED,
    REJECTED,
    STORED,
    UNKNOWN,
    UPLOADED,
    WRITE_STATUS,
    Obj,
    Partition,
    Replica,
    System,
    Write,
    _cache,
    _part,
    _require,
    _set,
    _with_part,
    write_epoch,
)
from epochgc.model.variants import REFERENCE, Variant

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
