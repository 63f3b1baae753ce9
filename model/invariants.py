"""The invariants of the whole design: I1-I9 over a state, T1-T5 over a step.

Written with `model.logic` connectives so that each evaluates to one formula on symbolic
values (the proofs) and to a bool on concrete ones (the conformance harness).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from epochgc.model.actions import round_epoch
from epochgc.model.logic import Cond, all_of, any_of, iff, implies, le_opt, merge_point, neg
from epochgc.model.partition import PartitionState
from epochgc.model.system import (
    ABSENT,
    ACCEPTED,
    DELETED,
    FAILED,
    FENCED,
    IDLE,
    ORPHANED,
    STORED,
    UNKNOWN,
    UPLOADED,
    Partition,
    Replica,
    System,
    Write,
    acceptable,
    write_epoch,
)
from epochgc.model.variants import REFERENCE, Variant

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
