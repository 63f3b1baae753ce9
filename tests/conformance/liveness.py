"""Liveness checks of the conformance harness (issue 31): once faults stop and the network
heals, everything started finishes.

Per-step safety checks cannot see a write that hangs or a lock that is never released: a
stuck operation is simply left running (`Harness.wait` gives up after a bound). So at the
end of every program (and wherever a test asks), `check_liveness` stops every fault (network
calm and healed, every node restarted, no injected store or replicate failure, no lagging
epoch cache) and then requires, within bounds of simulated events:

- every operation the program started finished: acknowledged or refused with a reason
  (the harness's producer wrapper turns a refusal into a counted `ProduceError`); one that
  ended with any other exception is a finding too;
- every fence's reader/writer lock is free, with no waiter left;
- every group (the controller and each live partition) commits a new proposal;
- a GC round over freshly published documents ends unblocked, and as the model says;
- GC makes progress (issue 42): once every partition is reconciled, an epoch barrier
  promotes every partition's pending epoch within BARRIER_STEPS events (an idle
  partition's by its own barrier round, R38) and the cluster's M rises past the last
  round's. Safety checks cannot see GC that merely stops: nothing unsafe happens.

A violation raises `LivenessViolation` (a `Divergence`): a finding like a safety one.
"""

from __future__ import annotations

import asyncio
import contextlib
import traceback
from typing import TYPE_CHECKING, Any

from epochgc.impl.partition.commands import Barrier
from tests.conformance.shadow import Divergence

if TYPE_CHECKING:
    from tests.conformance.harness import Harness

# Bounds, in simulator events (a tick is one event per node, 0.1 s): a producer's retries
# (4 attempts, 2 s apart), an election after restarts, and a replicate fit well inside.
FINISH_STEPS = 30_000
LEADER_STEPS = 5_000
PROPOSE_STEPS = 5_000
# An epoch barrier's mint, round and promotion (a few proposals each).
BARRIER_STEPS = 5_000
ATTEMPTS = 3
# Between attempts: past an election timeout (1-2 s), so a leadership transfer under way
# completes or is abandoned (a leader refuses proposals while it transfers).
RETRY_AFTER_S = 2.5


class LivenessViolation(Divergence):
    """Something started never finished after the faults stopped."""


def stop_faults(h: Harness) -> None:
    """Calm and heal the network, restart every node, drop the injected faults."""
    from tests.conformance.harness import NODES

    h.calm()
    h.heal()
    h.store.fail_next_put = None
    for nid in NODES:
        h.restart(nid)
    for b in h.c.brokers.values():
        b.cache.invalidate()  # a lagging (frozen) cache is a fault
        for rep in b.replicas.values():
            rep.fence.fail_replicate = None


def _where(t: asyncio.Task[Any]) -> str:
    """The task's chain of awaits down to where it is suspended (function:line each)."""
    chain: list[str] = []
    c: Any = t.get_coro()
    while c is not None:
        fr = getattr(c, "cr_frame", None) or getattr(c, "gi_frame", None)
        if fr is not None:
            chain.append(f"{fr.f_code.co_name}:{fr.f_lineno}")
        c = getattr(c, "cr_await", None) or getattr(c, "gi_yieldfrom", None)
    return " > ".join(chain) or repr(t)


def check_operations_finish(h: Harness) -> None:
    """Every task the program started is done, and none failed without a reason."""
    h.c.run_until(lambda: all(t.done() for t in h.tasks), FINISH_STEPS)
    stuck = [t for t in h.tasks if not t.done()]
    if stuck:
        raise LivenessViolation(
            f"liveness: {len(stuck)} started operation(s) never finished within"
            f" {FINISH_STEPS} events after the faults stopped: {_where(stuck[0])}")
    for t in h.tasks:
        if not t.cancelled() and t.exception() is not None:
            e = t.exception()
            assert e is not None
            raise LivenessViolation(
                f"liveness: an operation ended with an unexpected {type(e).__name__}: {e}"
                f" ({''.join(traceback.format_exception(e)[-2:]).strip()})")
    h.tasks = []


def check_locks_free(h: Harness) -> None:
    """No fence lock is held or waited on once nothing runs."""
    for nid, b in sorted(h.c.brokers.items()):
        for name, rep in sorted(b.replicas.items()):
            lk = rep.fence.lock
            waiting = sum(1 for _, fut in lk._waiters if not fut.done())
            if lk.readers or lk.writer or waiting:
                raise LivenessViolation(
                    f"liveness: node {nid}'s fence lock for {name} is not free after every"
                    f" operation ended (shared holders {lk.readers}, exclusive {lk.writer},"
                    f" waiters {waiting})")


def check_groups_commit(h: Harness) -> None:
    """The controller and every live partition group commit a new proposal (a few tries:
    a leader elected just now may still hand over)."""
    why: object = "no leader"
    for attempt in range(ATTEMPTS):
        if attempt:
            h.c.run_for(RETRY_AFTER_S)
        nid = h._leader_of(h.c.controller_leader)
        if nid is None:
            continue
        before = h.c.brokers[nid].controller.epoch
        try:
            got = h.wait(h.c.brokers[nid].mint(), PROPOSE_STEPS)
        except Exception as e:
            why = e
            continue
        if got is not None and got > before:
            break
        why = f"node {nid} at epoch {before} got {got}"
    else:
        raise LivenessViolation(f"liveness: the controller group does not commit a mint"
                                f" after the faults stopped: {why}")
    for p in h.created():
        why = "no leader"
        for attempt in range(ATTEMPTS):
            if attempt:
                h.c.run_for(RETRY_AFTER_S)
            leader = h._leader_of(lambda p=p: h.c.leader(p))  # type: ignore[misc]
            if leader is None or p not in h.c.brokers[leader].replicas:
                continue
            fence = h.c.brokers[leader].replicas[p].fence
            task = h.c.spawn(fence.replicate_command(Barrier()))
            if h.c.run_until(task.done, PROPOSE_STEPS) and task.exception() is None:
                break
            if not task.done():
                h.tasks.append(task)
                why = f"leader node {leader}: the proposal is not done"
            else:
                why = f"leader node {leader}: {task.exception()!r}"
        else:
            raise LivenessViolation(f"liveness: {p}'s group does not commit a proposal after"
                                    f" the faults stopped: {why}")


def check_gc_round_ends(h: Harness) -> None:
    """Fresh documents, then a GC round that ends unblocked (and agrees with the model)."""
    from tests.conformance.harness import MAX_REPORT_AGE_S
    from tests.conformance.shadow import model_gc

    for p in h.created():
        h.housekeep(p)  # a partition nobody wrote to gets its first epoch
    h.publish_partitions()
    h.publish_health(h.live())
    docs, listing, now = h._docs_and_listing()
    want = model_gc(docs, listing, now, MAX_REPORT_AGE_S, 0.0)
    if want.error is not None or want.decision is None or want.decision.blocked is not None:
        why = want.error or (want.decision.blocked if want.decision else "no decision")
        raise LivenessViolation(f"liveness: a GC round after the faults stopped and every node"
                                f" reported does not end unblocked: {why}")
    h.gc()


def _model_m(h: Harness) -> int | None:
    """The M a GC round over freshly published documents would use (the model's)."""
    from tests.conformance.harness import MAX_REPORT_AGE_S
    from tests.conformance.shadow import model_gc

    h.publish_partitions()
    h.publish_health(h.live())
    docs, listing, now = h._docs_and_listing()
    want = model_gc(docs, listing, now, MAX_REPORT_AGE_S, 0.0)
    return None if want.decision is None else want.decision.M


def check_gc_progresses(h: Harness) -> None:
    """GC makes progress when it may (issue 42): with the faults stopped and every partition
    reconciled, one epoch barrier (the controller's mint, then each partition leader's
    barrier round) promotes every partition's pending epoch to the candidate within
    BARRIER_STEPS events, and M, computed from fresh documents, rises above what it was
    before the barrier (every M(p) reaches the candidate, above any M(p) before it)."""
    # The GC round check_gc_round_ends just ran is checked first: a live object it deleted
    # is reported as the safety violation it is, not as the stalled reconcile it causes.
    h.check_step()
    before = _model_m(h)
    for p in h.created():
        h.reconcile(p)
    cand: int | None = None
    for attempt in range(ATTEMPTS):
        if attempt:
            h.c.run_for(RETRY_AFTER_S)
        nid = h._leader_of(h.c.controller_leader)
        if nid is None:
            continue
        with contextlib.suppress(Exception):
            cand = h.wait(h.c.brokers[nid].barrier(), PROPOSE_STEPS)
        if cand is not None:
            break
    if cand is None:
        raise LivenessViolation("liveness: the controller does not mint an epoch barrier"
                                " after the faults stopped")
    for p in h.created():
        why = "no leader"
        for attempt in range(ATTEMPTS):
            if attempt:
                h.c.run_for(RETRY_AFTER_S)
            nid = h._leader_of(lambda p=p: h.c.leader(p))  # type: ignore[misc]
            if nid is None or p not in h.c.brokers[nid].replicas:
                continue
            b = h.c.brokers[nid]
            sm = b.replicas[p].sm
            h.c.run_until(lambda b=b: b.controller.barrier_candidate >= cand,  # type: ignore[misc]
                          BARRIER_STEPS)
            with contextlib.suppress(Exception):
                h.wait(b.barrier_round(), BARRIER_STEPS)
            if h.c.run_until(lambda sm=sm: sm.state.gc_safe_epoch >= cand,  # type: ignore[misc]
                             BARRIER_STEPS):
                break
            why = (f"leader node {nid}: barrier epoch {sm.state.barrier_epoch} at offset"
                   f" {sm.state.barrier_offset}, LRLO {sm.state.last_reconciled_log_offset},"
                   f" {len(sm.unreconciled())} unreconciled, gc_safe_epoch"
                   f" {sm.state.gc_safe_epoch}")
        else:
            raise LivenessViolation(
                f"liveness: {p}'s pending barrier epoch {cand} is not promoted within"
                f" {BARRIER_STEPS} events of its barrier round, after its reconcile (GC"
                f" stops making progress): {why}")
    after = _model_m(h)
    if after is None or (before is not None and after <= before):
        raise LivenessViolation(f"liveness: M does not rise after an epoch barrier with every"
                                f" partition reconciled: {before} -> {after} (candidate {cand})")


def check_liveness(h: Harness) -> None:
    """Stop every fault, then every liveness check above, in order."""
    stop_faults(h)
    check_operations_finish(h)
    check_locks_free(h)
    check_groups_commit(h)
    check_operations_finish(h)
    check_locks_free(h)
    check_gc_round_ends(h)
    check_gc_progresses(h)
