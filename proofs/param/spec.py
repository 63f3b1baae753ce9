"""The design as a quantified transition system over any number of writes, objects,
partitions and replicas (spec section P3): the second encoding of `model/system.py`,
checked against it by `proofs/param/correspond.py`.

State: the fields in `logic.SIG` (the leader's seen windows, the leader and the term are
left out: they only decide the fence's admissions, which is liveness; the fence is
havocked, constrained only by "admits only what the window accepts", its postcondition).
Each invariant is a list of named conjuncts `(name, sorts, body)` meaning
`forall elements of sorts: body`; each action `(params, choices, fn)` with
`fn(L, s, prm) -> (guard, post)` where `post` is a view of `s` (so no frame axioms) and
choices are existentially chosen values (the stamp, M, the fence's verdict).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
)
from epochgc.proofs.param.logic import BOOL, INT, St

Conjunct = tuple[str, tuple[str, ...], Callable[..., Any]]
L_ = Any  # a logic (Z3Logic or FiniteLogic)


# -- derived notions ------------------------------------------------------------------------


def epoch_of(s: St, w: Any) -> Any:
    return s.oepoch(s.wobj(w))


def window_accepts(L: L_, s: St, p: Any, e: Any) -> Any:
    """R3: no window yet, or at or above previous_applied_epoch."""
    return L.Or(L.Not(s.wset(p)), e >= s.prev(p))


def above_barrier(L: L_, s: St, p: Any, e: Any) -> Any:
    """R37: no barrier applied, or above its candidate."""
    return L.Or(L.Not(s.bset(p)), e > s.bepoch(p))


def accepts(L: L_, s: St, p: Any, e: Any) -> Any:
    """What apply accepts: the window (R3) and the barrier (R37)."""
    return L.And(window_accepts(L, s, p, e), above_barrier(L, s, p, e))


def mset(L: L_, s: St, p: Any) -> Any:
    """M(p) has a value: a window was set, or a barrier epoch promoted (R7, R38)."""
    return L.Or(s.wset(p), s.gset(p))


def mp(L: L_, s: St, p: Any) -> Any:
    """M(p) when `mset`: floor - 1, or the promoted barrier epoch when higher."""
    return L.Ite(L.And(s.gset(p), L.Or(L.Not(s.wset(p)), s.gsafe(p) > s.floor(p) - 1)),
                 s.gsafe(p), s.floor(p) - 1)


def in_flight(L: L_, s: St, w: Any) -> Any:
    st = s.wstatus(w)
    return L.Or(st == UPLOADED, st == FENCED, st == UNKNOWN)


def live(L: L_, s: St, w: Any) -> Any:
    """Accepted and not durable in L1, or in flight and still acceptable."""
    return L.Or(L.And(s.wstatus(w) == ACCEPTED, L.Not(s.durable(w))),
                L.And(in_flight(L, s, w), accepts(L, s, s.wpart(w), epoch_of(s, w))))


# -- invariants (I1-I8) ---------------------------------------------------------------------


def _w(body: Callable[..., Any]) -> Callable[..., Any]:
    """A per-write conjunct with its partition and epoch at hand."""
    return lambda L, s, w: body(L, s, w, s.wpart(w), epoch_of(s, w))


INVARIANTS: dict[str, list[Conjunct]] = {
    "safety": [
        ("a live write's object is not deleted", ("W",),
         lambda L, s, w: L.Implies(live(L, s, w), s.ostatus(s.wobj(w)) != DELETED)),
    ],
    "floor": [
        ("an accepted write's partition has a window", ("W",),
         _w(lambda L, s, w, p, e: L.Implies(s.wstatus(w) == ACCEPTED, s.wset(p)))),
        ("accepted above LRLO => epoch >= floor", ("W",),
         _w(lambda L, s, w, p, e: L.Implies(
             L.And(s.wstatus(w) == ACCEPTED, s.woffset(w) > s.lrlo(p)), e >= s.floor(p)))),
        ("accepted at/after the window offset => epoch >= previous", ("W",),
         _w(lambda L, s, w, p, e: L.Implies(
             L.And(s.wstatus(w) == ACCEPTED, s.woffset(w) >= s.woff(p)), e >= s.prev(p)))),
        ("accepted after the barrier's command => epoch > its candidate (R37)", ("W",),
         _w(lambda L, s, w, p, e: L.Implies(
             L.And(s.wstatus(w) == ACCEPTED, s.bset(p), s.woffset(w) > s.boff(p)),
             e > s.bepoch(p)))),
        ("accepted above LRLO => epoch > the promoted safe epoch (R38)", ("W",),
         _w(lambda L, s, w, p, e: L.Implies(
             L.And(s.wstatus(w) == ACCEPTED, s.gset(p), s.woffset(w) > s.lrlo(p)),
             e > s.gsafe(p)))),
    ],
    "window": [
        ("offsets: -1 <= LRLO < log end", ("P",),
         lambda L, s, p: L.And(s.lrlo(p) >= -1, s.lrlo(p) < s.log_end(p), s.log_end(p) >= 0)),
        ("a window is well formed", ("P",),
         lambda L, s, p: L.Implies(s.wset(p), L.And(
             s.created(p), s.floor(p) <= s.prev(p), s.prev(p) <= s.max(p),
             s.crev(p) <= s.floor(p), s.woff(p) >= 0, s.woff(p) < s.log_end(p)))),
        ("a partition not created has an empty log", ("P",),
         lambda L, s, p: L.Implies(L.Not(s.created(p)), s.log_end(p) == 0)),
        ("a barrier's pending epoch is well formed (R36)", ("P",),
         lambda L, s, p: L.Implies(s.bset(p), L.And(
             s.created(p), s.bepoch(p) >= 0, s.boff(p) >= 0, s.boff(p) < s.log_end(p),
             s.bepoch(p) + 1 >= s.crev(p)))),
        ("a promoted safe epoch is at most the pending one (R38)", ("P",),
         lambda L, s, p: L.Implies(s.gset(p), L.And(
             s.bset(p), s.gsafe(p) >= 0, s.gsafe(p) <= s.bepoch(p),
             s.gsafe(p) + 1 >= s.crev(p)))),
    ],
    "reports": [
        ("a replica's M(p) is at most the partition's", ("P", "R"),
         lambda L, s, p, r: L.Implies(s.iset(p, r), L.And(
             mset(L, s, p), s.inact(p, r) <= mp(L, s, p), s.inact(p, r) >= -1))),
        ("a report is at most the replica's M(p)", ("P", "R"),
         lambda L, s, p, r: L.Implies(s.rset(p, r), L.And(
             s.iset(p, r), s.rep(p, r) <= s.inact(p, r), s.rep(p, r) >= -1))),
        ("a null report has no value", ("P", "R"),
         lambda L, s, p, r: L.Implies(s.rnull(p, r), L.Not(s.rset(p, r)))),
    ],
    "revisions": [
        ("one number line", (),
         lambda L, s: L.And(s.cluster_epoch() >= 0, s.cluster_epoch() <= s.revision(),
                            s.snapshot_revision() >= 0,
                            s.snapshot_revision() <= s.revision(),
                            s.cache_floor() >= 0, s.cache_floor() <= s.cluster_epoch())),
        ("a creation revision is a past revision", ("P",),
         lambda L, s, p: L.Implies(s.created(p),
                                   L.And(s.crev(p) >= 1, s.crev(p) <= s.revision()))),
        ("the snapshot lists exactly the partitions created by its revision", ("P",),
         lambda L, s, p: L.And(
             L.Implies(s.in_snap(p), L.And(s.created(p),
                                           s.crev(p) <= s.snapshot_revision())),
             L.Implies(L.And(s.created(p), L.Not(s.in_snap(p))),
                       s.crev(p) > s.snapshot_revision()))),
    ],
    "objects": [
        ("the grace period is not negative", (), lambda L, s: s.grace() >= 0),
        ("an uploaded object was written in the past", ("O",),
         lambda L, s, o: L.Implies(s.ostatus(o) != ABSENT, s.owritten(o) <= s.clock())),
        ("object status in range", ("O",),
         lambda L, s, o: L.And(s.ostatus(o) >= ABSENT, s.ostatus(o) <= DELETED)),
        ("an uploaded object is stamped at most the revision", ("O",),
         lambda L, s, o: L.Implies(s.ostatus(o) != ABSENT, s.oepoch(o) <= s.revision())),
        ("write status in range", ("W",),
         lambda L, s, w: L.And(s.wstatus(w) >= IDLE, s.wstatus(w) <= ORPHANED)),
        ("a write is idle exactly while its object is absent", ("W",),
         lambda L, s, w: (s.wstatus(w) == IDLE) == (s.ostatus(s.wobj(w)) == ABSENT)),
        ("an uploaded object is stamped >= each target's creation revision (R25)", ("W",),
         _w(lambda L, s, w, p, e: L.Implies(L.And(s.wstatus(w) != IDLE,
                                                  s.wstatus(w) != ORPHANED),
                                            L.And(s.created(p), e >= s.crev(p))))),
        ("an orphaned write is below its re-created partition's creation revision (R35)",
         ("W",), _w(lambda L, s, w, p, e: L.Implies(
             L.And(s.wstatus(w) == ORPHANED, s.created(p)), e < s.crev(p)))),
        ("an accepted write sits in its log", ("W",),
         _w(lambda L, s, w, p, e: L.Implies(
             s.wstatus(w) == ACCEPTED,
             L.And(s.woffset(w) >= 0, s.woffset(w) < s.log_end(p))))),
    ],
    "l1": [
        ("only accepted placeholders are durable in L1", ("W",),
         lambda L, s, w: L.Implies(s.durable(w), s.wstatus(w) == ACCEPTED)),
        ("LRLO never passes a placeholder not in L1 (R27)", ("W",),
         _w(lambda L, s, w, p, e: L.Implies(
             L.And(s.wstatus(w) == ACCEPTED, s.woffset(w) <= s.lrlo(p)), s.durable(w)))),
    ],
    "answer": [
        ("a failed write whose placeholder went to the log is never accepted again", ("W",),
         _w(lambda L, s, w, p, e: L.Implies(L.And(s.wstatus(w) == FAILED, s.wrepl(w)),
                                            L.Not(accepts(L, s, p, e))))),
    ],
    "round": [
        ("the round's M is on the number line", (),
         lambda L, s: L.Implies(s.gc_set(), L.And(s.gc_m() >= -1,
                                                 s.gc_m() <= s.revision()))),
        ("the round's M is at most M(p) of every partition created by it", ("P",),
         lambda L, s, p: L.Implies(
             L.And(s.gc_set(), s.created(p), s.crev(p) <= s.gc_m()),
             L.And(mset(L, s, p), s.gc_m() <= mp(L, s, p)))),
    ],
}


# -- transition invariants (T1-T4) ------------------------------------------------------------


# conjunct name -> its antecedent (a transition invariant's conjunct is `ante => cons`):
# the proof checks each antecedent is satisfiable under each action (not vacuous).
ANTECEDENTS: dict[str, Callable[..., Any]] = {}


# conjunct name -> the actions under which its antecedent must be satisfiable (default all)
ANTECEDENT_ACTIONS: dict[str, tuple[str, ...]] = {}


def _implies(name: str, sorts: tuple[str, ...], ante: Callable[..., Any],
             cons: Callable[..., Any], only: tuple[str, ...] = ()) -> Conjunct:
    ANTECEDENTS[name] = ante
    if only:
        ANTECEDENT_ACTIONS[name] = only
    return (name, sorts, lambda L, a, b, *xs: L.Implies(ante(L, a, b, *xs),
                                                        cons(L, a, b, *xs)))


def _exists_partition(L: L_, a: St, b: St, p: Any) -> Any:
    return L.And(a.wset(p), b.created(p))


def _mono(field: str) -> Conjunct:
    """While the partition exists (deletion drops its state, R32)."""
    return _implies(f"{field} never decreases", ("P",), _exists_partition,
                    lambda L, a, b, p: L.And(b.wset(p),
                                             getattr(a, field)(p) <= getattr(b, field)(p)))


def fresh_defined(L: L_, s: St) -> Any:
    """M over fresh reports has a value: every partition in the snapshot has M(p) (an
    empty snapshot gives its revision: R19, changed)."""
    return L.forall(("P",), lambda p: L.Implies(s.in_snap(p), mset(L, s, p)))


def fresh_le(L: L_, s: St, x: Any) -> Any:
    """M(s) <= x, where M(s) = min(snapshot revision, min over the snapshot of M(p))."""
    return L.Or(s.snapshot_revision() <= x,
                L.exists(("P",), lambda p: L.And(s.in_snap(p), mp(L, s, p) <= x)))


TRANSITION_INVARIANTS: dict[str, list[Conjunct]] = {
    "mono_max_applied": [_mono("max")],
    "mono_floor": [_mono("floor")],
    "mono_inactive": [_implies("M(p) never decreases", ("P",),
                               lambda L, a, b, p: L.And(mset(L, a, p), b.created(p)),
                               lambda L, a, b, p: L.And(mset(L, b, p),
                                                        mp(L, a, p) <= mp(L, b, p)))],
    # T4 is a minimum over all partitions: M(a) <= M(b) iff M(a) <= the snapshot revision
    # of b and M(a) <= M_b(q) for every q in b's snapshot.
    "mono_fresh_M": [
        _implies("fresh M <= the new snapshot revision", (),
                 lambda L, a, b: L.And(fresh_defined(L, a), fresh_defined(L, b)),
                 lambda L, a, b: fresh_le(L, a, b.snapshot_revision())),
        _implies("fresh M <= M(q) of every partition in the new snapshot", ("P",),
                 lambda L, a, b, q: L.And(fresh_defined(L, a), fresh_defined(L, b),
                                          b.in_snap(q)),
                 lambda L, a, b, q: fresh_le(L, a, mp(L, b, q))),
    ],
    # T5: only a deletion moves an object from stored to deleted
    "grace": [
        _implies("a deleted object was at least the grace period old", ("O",),
                 lambda L, a, b, o: L.And(a.ostatus(o) == STORED, b.ostatus(o) == DELETED),
                 lambda L, a, b, o: b.clock() - b.owritten(o) >= b.grace(),
                 only=("gc_delete",)),
    ],
}


def init(L: L_, s: St) -> Any:
    """The initial state of `model.system.initial` for any universe."""
    return L.And(
        s.revision() == 0, s.cluster_epoch() == 0, s.snapshot_revision() == 0,
        L.Not(s.gc_set()), s.clock() == 0, s.grace() >= 0, s.cache_floor() == 0,
        L.forall(("P",), lambda p: L.And(
            L.Not(s.created(p)), s.crev(p) == 0, L.Not(s.wset(p)), s.lrlo(p) == -1,
            s.log_end(p) == 0, L.Not(s.in_snap(p)), L.Not(s.bset(p)), L.Not(s.gset(p)))),
        L.forall(("P", "R"), lambda p, r: L.And(L.Not(s.iset(p, r)), L.Not(s.rset(p, r)),
                                                 L.Not(s.rnull(p, r)))),
        L.forall(("O",), lambda o: L.And(s.ostatus(o) == ABSENT, s.oepoch(o) == 0,
                                         s.owritten(o) == 0)),
        L.forall(("W",), lambda w: L.And(s.wstatus(w) == IDLE, s.woffset(w) == -1,
                                         L.Not(s.durable(w)), L.Not(s.wrepl(w)))),
    )


# -- actions ------------------------------------------------------------------------------------


def _at(L: L_, p0: Any, new: Callable[..., Any], old: Callable[..., Any]) -> Callable[..., Any]:
    """A point update of a one-argument field."""
    return lambda x: L.Ite(x == p0, new(), old(x))


def apply_placeholder(L: L_, s: St, p0: Any, e: Any, accepted: Any) -> St:
    """R1-R3 at offset log_end(p0): an accepted epoch above max slides the window."""
    first = L.Not(s.wset(p0))
    slide = L.And(accepted, L.Or(first, e > s.max(p0)))
    n = s.log_end(p0)
    return s.with_(
        wset=_at(L, p0, lambda: L.Or(s.wset(p0), accepted), s.wset),
        max=_at(L, p0, lambda: L.Ite(slide, e, s.max(p0)), s.max),
        prev=_at(L, p0, lambda: L.Ite(slide, L.Ite(first, e, s.max(p0)), s.prev(p0)), s.prev),
        floor=_at(L, p0, lambda: L.Ite(L.And(slide, first), e, s.floor(p0)), s.floor),
        woff=_at(L, p0, lambda: L.Ite(slide, n, s.woff(p0)), s.woff),
        log_end=_at(L, p0, lambda: n + 1, s.log_end),
    )


def apply_ok(L: L_, s: St, p0: Any, e: Any) -> Any:
    """What the apply functions refuse (ModelError): negative epochs and offsets, and an
    offset not after the window offset."""
    return L.And(e >= 0, s.log_end(p0) >= 0,
                 L.Or(L.Not(s.wset(p0)), s.log_end(p0) > s.woff(p0)))


def apply_reconciled(L: L_, s: St, p0: Any, lrlo: Any) -> St:
    """R5: LRLO only moves forward; reaching the window offset raises the floor."""
    new = L.Ite(lrlo > s.lrlo(p0), lrlo, s.lrlo(p0))
    raise_ = L.And(s.wset(p0), s.woff(p0) <= new)
    promote = L.And(s.bset(p0), s.boff(p0) <= new)  # R38
    return s.with_(lrlo=_at(L, p0, lambda: new, s.lrlo),
                   floor=_at(L, p0, lambda: L.Ite(raise_, s.prev(p0), s.floor(p0)), s.floor),
                   gset=_at(L, p0, lambda: L.Or(s.gset(p0), promote), s.gset),
                   gsafe=_at(L, p0, lambda: L.Ite(promote, s.bepoch(p0), s.gsafe(p0)),
                             s.gsafe))


def in_l1_up_to(L: L_, s: St, p0: Any, lrlo: Any) -> Any:
    """R27: every accepted placeholder of p0 at or below lrlo is durable in L1."""
    return L.forall(("W",), lambda w: L.Implies(
        L.And(s.wpart(w) == p0, s.wstatus(w) == ACCEPTED, s.woffset(w) <= lrlo), s.durable(w)))


def _write_status(L: L_, s: St, w0: Any, new: Any) -> St:
    return s.with_(wstatus=_at(L, w0, lambda: new, s.wstatus))


def tick(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    c = s.clock() + 1
    return True, s.with_(clock=lambda: c)


def mint(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    r = s.revision() + 1
    return True, s.with_(revision=lambda: r, cluster_epoch=lambda: r)


def create_partition(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    p0, r = prm["p"], s.revision() + 1  # a fresh, greater revision
    return L.Not(s.created(p0)), s.with_(
        revision=lambda: r,
        created=lambda p: L.Or(s.created(p), p == p0),
        crev=_at(L, p0, lambda: r, s.crev))


def delete_partition(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    """R32-R34: its own revision; out of the table and the snapshot; its state and its
    replicas' dropped; every write to it that left idle orphaned."""
    p0, r = prm["p"], s.revision() + 1

    def off(f: Callable[..., Any], v: Any = False) -> Callable[..., Any]:
        return _at(L, p0, lambda: v, f)

    def off_r(f: Callable[..., Any], v: Any = False) -> Callable[..., Any]:
        return lambda p, q: L.Ite(p == p0, v, f(p, q))

    def hit(w: Any) -> Any:
        return L.And(s.wpart(w) == p0, s.wstatus(w) != IDLE)

    return s.created(p0), s.with_(
        revision=lambda: r, created=off(s.created), in_snap=off(s.in_snap),
        wset=off(s.wset), max=off(s.max, 0), prev=off(s.prev, 0), floor=off(s.floor, 0),
        woff=off(s.woff, 0), lrlo=off(s.lrlo, -1), log_end=off(s.log_end, 0),
        bset=off(s.bset), bepoch=off(s.bepoch, 0), boff=off(s.boff, 0), gset=off(s.gset),
        gsafe=off(s.gsafe, 0),
        iset=off_r(s.iset), inact=off_r(s.inact, 0), rset=off_r(s.rset), rep=off_r(s.rep, 0),
        rnull=off_r(s.rnull),
        wstatus=lambda w: L.Ite(hit(w), ORPHANED, s.wstatus(w)),
        woffset=lambda w: L.Ite(hit(w), -1, s.woffset(w)),
        durable=lambda w: L.And(L.Not(hit(w)), s.durable(w)))


def publish_snapshot(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    return True, s.with_(snapshot_revision=s.revision, in_snap=s.created)


def stamp_ok(L: L_, s: St, o0: Any, cache: Any, e: Any) -> Any:
    """R25: e = max(cache, creation revision of every partition o0 feeds)."""
    def feeds(w: Any) -> Any:
        return s.wobj(w) == o0

    return L.And(
        e >= cache,
        L.forall(("W",), lambda w: L.Implies(feeds(w), e >= s.crev(s.wpart(w)))),
        L.Or(e == cache, L.exists(("W",), lambda w: L.And(feeds(w), e == s.crev(s.wpart(w))))))


def upload(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    o0, cache, e = prm["o"], prm["cache"], prm["e"]
    guard = L.And(
        s.ostatus(o0) == ABSENT, cache >= 0, cache <= s.cluster_epoch(),
        cache >= s.cache_floor(),
        L.forall(("W",), lambda w: L.Implies(s.wobj(w) == o0, s.created(s.wpart(w)))),
        stamp_ok(L, s, o0, cache, e))
    return guard, s.with_(
        ostatus=_at(L, o0, lambda: STORED, s.ostatus),
        oepoch=_at(L, o0, lambda: e, s.oepoch),
        owritten=_at(L, o0, lambda: s.clock(), s.owritten),
        wstatus=lambda w: L.Ite(s.wobj(w) == o0, UPLOADED, s.wstatus(w)))


def fence_write(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    """The fence is havocked: it may admit (only what the window accepts) or reject."""
    w0, ok = prm["w"], prm["admit"]
    guard = L.And(s.wstatus(w0) == UPLOADED,
                  L.Implies(ok, window_accepts(L, s, s.wpart(w0), epoch_of(s, w0))))
    return guard, _write_status(L, s, w0, L.Ite(ok, FENCED, FAILED)).with_(
        wrepl=_at(L, w0, lambda: ok, s.wrepl))


def fail_replicate(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    w0 = prm["w"]
    return s.wstatus(w0) == FENCED, _write_status(L, s, w0, UNKNOWN)


def give_up(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    w0 = prm["w"]
    guard = L.And(s.wstatus(w0) == UNKNOWN,  # the window passed it (not just the barrier)
                  L.Not(window_accepts(L, s, s.wpart(w0), epoch_of(s, w0))))
    return guard, _write_status(L, s, w0, FAILED)


def land_write(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    w0 = prm["w"]
    p0, e = s.wpart(w0), epoch_of(s, w0)
    acc = accepts(L, s, p0, e)
    guard = L.And(L.Or(s.wstatus(w0) == FENCED, s.wstatus(w0) == UNKNOWN),
                  apply_ok(L, s, p0, e))
    post = apply_placeholder(L, s, p0, e, acc).with_(
        wstatus=_at(L, w0, lambda: L.Ite(acc, ACCEPTED, REJECTED), s.wstatus),
        woffset=_at(L, w0, lambda: s.log_end(p0), s.woffset))
    return guard, post


def copy_to_l1(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    w0 = prm["w"]
    return s.wstatus(w0) == ACCEPTED, s.with_(durable=lambda w: L.Or(s.durable(w), w == w0))


def _other_ok(L: L_, s: St, p0: Any, e: Any) -> Any:
    """A2, A3: an epoch the assumptions allow on p0."""
    return L.And(e >= 0, e <= s.cluster_epoch(), s.created(p0), e >= s.crev(p0))


def other_write(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    p0, e = prm["p"], prm["epoch"]
    guard = L.And(_other_ok(L, s, p0, e), window_accepts(L, s, p0, e), apply_ok(L, s, p0, e))
    return guard, apply_placeholder(L, s, p0, e, above_barrier(L, s, p0, e))


def late_land(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    """Any epoch up to the cluster epoch, an earlier incarnation's included: the apply
    refuses one below the creation revision (A2, enforced) or below the window (R3)."""
    p0, e = prm["p"], prm["epoch"]
    guard = L.And(e >= 0, e <= s.cluster_epoch(), s.created(p0), apply_ok(L, s, p0, e))
    return guard, apply_placeholder(L, s, p0, e, L.And(accepts(L, s, p0, e), e >= s.crev(p0)))


def phantom_fence(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    return _other_ok(L, s, prm["p"], prm["epoch"]), s  # only the (havocked) seen window


def housekeep_epoch(L: L_, s: St, p0: Any, cache: Any) -> Any:
    return L.Ite(cache >= s.crev(p0), cache, s.crev(p0))


def housekeep(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    """R4 and R28: advance_epoch(max(cache, creation revision)), then LRLO over command
    entries up to lrlo (at most its own entry), never past a placeholder not in L1."""
    p0, cache, lrlo = prm["p"], prm["cache"], prm["lrlo"]
    e = housekeep_epoch(L, s, p0, cache)
    guard = L.And(s.created(p0), cache >= 0, cache <= s.cluster_epoch(), apply_ok(L, s, p0, e),
                  lrlo >= -1, lrlo <= s.log_end(p0), in_l1_up_to(L, s, p0, lrlo))
    return guard, apply_reconciled(L, apply_placeholder(L, s, p0, e, True), p0, lrlo)


def reconcile(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    p0, lrlo = prm["p"], prm["lrlo"]
    guard = L.And(lrlo >= 0, lrlo < s.log_end(p0), in_l1_up_to(L, s, p0, lrlo))
    return guard, apply_reconciled(L, s, p0, lrlo)


def stutter(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    """change_leader, restart: only the term, leader and seen windows (liveness state)."""
    return True, s


def _pr(L: L_, p0: Any, r0: Any, new: Callable[[], Any],
        old: Callable[..., Any]) -> Callable[..., Any]:
    return lambda p, r: L.Ite(L.And(p == p0, r == r0), new(), old(p, r))


def sync_replica(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    p0, r0 = prm["p"], prm["r"]
    return True, s.with_(
        iset=_pr(L, p0, r0, lambda: mset(L, s, p0), s.iset),
        inact=_pr(L, p0, r0, lambda: L.Ite(mset(L, s, p0), mp(L, s, p0), 0), s.inact))


def report(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    """The replica's report in the store: its M(p) view, or null when it has none."""
    p0, r0 = prm["p"], prm["r"]
    return True, s.with_(rset=_pr(L, p0, r0, lambda: s.iset(p0, r0), s.rset),
                         rep=_pr(L, p0, r0, lambda: s.inact(p0, r0), s.rep),
                         rnull=_pr(L, p0, r0, lambda: L.Not(s.iset(p0, r0)), s.rnull))


def expire_report(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    """The replica's report leaves the store (or is too old to count): absent."""
    p0, r0 = prm["p"], prm["r"]
    return True, s.with_(rset=_pr(L, p0, r0, lambda: False, s.rset),
                         rep=_pr(L, p0, r0, lambda: 0, s.rep),
                         rnull=_pr(L, p0, r0, lambda: False, s.rnull))


def gc_guard(L: L_, s: St, m: Any) -> Any:
    """R15-R19, one-directional: M is at most the snapshot revision and, for every
    partition in the snapshot, at most some replica's report (the replica is a Skolem
    function P -> R: stratified). Any lower M is allowed: it deletes less."""
    return L.And(m >= -1, m <= s.snapshot_revision(),
                 L.forall(("P",), lambda p: L.Implies(s.in_snap(p), L.exists(
                     ("R",), lambda r: L.And(s.rset(p, r), m <= s.rep(p, r))))))


def gc_compute(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    go, m = prm["go"], prm["M"]
    return L.Implies(go, gc_guard(L, s, m)), s.with_(
        gc_set=lambda: go, gc_m=lambda: L.Ite(go, m, 0))


def gc_delete(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    o0 = prm["o"]
    guard = L.And(s.gc_set(), s.ostatus(o0) == STORED, s.oepoch(o0) <= s.gc_m(),
                  s.clock() - s.owritten(o0) >= s.grace())
    return guard, s.with_(ostatus=_at(L, o0, lambda: DELETED, s.ostatus))


def invalidate_caches(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    """R36: every cached epoch is at least the current cluster epoch from now on."""
    return True, s.with_(cache_floor=s.cluster_epoch)


def drained(L: L_, s: St, p0: Any, e: Any) -> Any:
    """No write to p0 stamped at or below e is uploaded or fenced (unknown: answered)."""
    return L.forall(("W",), lambda w: L.Implies(
        L.And(s.wpart(w) == p0, L.Or(s.wstatus(w) == UPLOADED, s.wstatus(w) == FENCED)),
        epoch_of(s, w) > e))


def barrier(L: L_, s: St, prm: dict[str, Any]) -> tuple[Any, St]:
    """R36: advance_gc_epoch(e) at log_end(p0), once the caches were invalidated above e
    and p0's writes at or below e drained; e becomes pending if above the pending one."""
    p0, e = prm["p"], prm["epoch"]
    guard = L.And(s.created(p0), e >= 0, e < s.cache_floor(), e + 1 >= s.crev(p0),
                  drained(L, s, p0, e), apply_ok(L, s, p0, e))
    up = L.Or(L.Not(s.bset(p0)), e > s.bepoch(p0))
    n = s.log_end(p0)
    return guard, s.with_(
        bset=_at(L, p0, lambda: True, s.bset),
        bepoch=_at(L, p0, lambda: L.Ite(up, e, s.bepoch(p0)), s.bepoch),
        boff=_at(L, p0, lambda: L.Ite(up, n, s.boff(p0)), s.boff),
        log_end=_at(L, p0, lambda: n + 1, s.log_end))


Params = tuple[tuple[str, str], ...]
# name -> (parameters (as in model.actions.ACTIONS), choices (existential), formula)
ACTIONS: dict[str, tuple[Params, Params, Callable[..., tuple[Any, St]]]] = {
    "tick": ((), (), tick),
    "mint": ((), (), mint),
    "create_partition": ((("p", "P"),), (), create_partition),
    "delete_partition": ((("p", "P"),), (), delete_partition),
    "publish_snapshot": ((), (), publish_snapshot),
    "upload": ((("o", "O"), ("cache", INT)), (("e", INT),), upload),
    "fence_write": ((("w", "W"),), (("admit", BOOL),), fence_write),
    "fail_replicate": ((("w", "W"),), (), fail_replicate),
    "give_up": ((("w", "W"),), (), give_up),
    "land_write": ((("w", "W"),), (), land_write),
    "copy_to_l1": ((("w", "W"),), (), copy_to_l1),
    "other_write": ((("p", "P"), ("epoch", INT)), (), other_write),
    "late_land": ((("p", "P"), ("epoch", INT)), (), late_land),
    "phantom_fence": ((("p", "P"), ("epoch", INT)), (), phantom_fence),
    "housekeep": ((("p", "P"), ("cache", INT), ("lrlo", INT)), (), housekeep),
    "reconcile": ((("p", "P"), ("lrlo", INT)), (), reconcile),
    "change_leader": ((("p", "P"), ("r", "R")), (), stutter),
    "restart": ((("p", "P"), ("r", "R")), (), stutter),
    "sync_replica": ((("p", "P"), ("r", "R")), (), sync_replica),
    "report": ((("p", "P"), ("r", "R")), (), report),
    "expire_report": ((("p", "P"), ("r", "R")), (), expire_report),
    "gc_compute": ((), (("go", BOOL), ("M", INT)), gc_compute),
    "gc_delete": ((("o", "O"),), (), gc_delete),
    "invalidate_caches": ((), (), invalidate_caches),
    "barrier": ((("p", "P"), ("epoch", INT)), (), barrier),
}
