"""The fence scenarios of the brief and the design gist, on the whole simulated cluster
(real Raft core, real brokers, logical clock)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from epochgc.impl.partition.fence import StaleEpoch
from epochgc.impl.sim.cluster import SimCluster
from epochgc.model.fence import SeenWindow
from epochgc.model.partition import window
from epochgc.model.variants import REFERENCE

P = "t/0"


def fenced(c: SimCluster, epoch: int) -> object:
    """Fence + replicate one placeholder; returns its result or the exception."""
    t = c.replicate_async(P, epoch)
    c.run_until(t.done)
    return t.exception() or t.result()


def leader_window(c: SimCluster) -> tuple[int, int] | None:
    nid = c.leader(P)
    assert nid is not None
    return window(c.brokers[nid].replicas[P].sm.state)


def check_no_unsafe_state(c: SimCluster) -> None:
    """Safety (model invariant): M(p) is below every unreconciled accepted placeholder."""
    for b in c.brokers.values():
        rep = b.replicas[P]
        m = rep.sm.inactive_epoch()
        for ph in rep.sm.unreconciled():
            assert m is None or m < ph.epoch, (m, ph)


@pytest.fixture
def c() -> SimCluster:
    cl = SimCluster(seed=7, partitions=(P,))
    cl.bootstrap(mint=False)
    return cl


def test_window_slides_and_below_is_rejected_with_window(c: SimCluster) -> None:
    assert not isinstance(fenced(c, 5), Exception)
    assert leader_window(c) == (5, 5)
    assert not isinstance(fenced(c, 7), Exception)
    assert leader_window(c) == (5, 7)
    assert not isinstance(fenced(c, 6), Exception)  # in-window: admitted, no slide
    err = fenced(c, 4)
    assert isinstance(err, StaleEpoch) and err.window == (5, 7) and err.at == "fence"
    kinds = [r.decision.kind for r in c.fence_log]
    assert kinds == ["above_window", "above_window", "in_window", "below_window"]


def test_concurrent_same_epoch_fences_take_one_exclusive_lock(c: SimCluster) -> None:
    fenced(c, 3)
    nid = c.leader(P)
    assert nid is not None
    lock = c.brokers[nid].replicas[P].fence.lock
    before = lock.exclusive_acquisitions
    tasks = [c.replicate_async(P, 9) for _ in range(5)]
    c.run_until(lambda: all(t.done() for t in tasks))
    assert all(t.exception() is None and t.result().accepted for t in tasks)
    assert lock.exclusive_acquisitions == before + 1
    assert sum(r.decision.slid for r in c.fence_log if r.decision.epoch == 9) == 1


def test_non_contiguous_epochs(c: SimCluster) -> None:
    for e in (5, 100, 50, 100):
        assert not isinstance(fenced(c, e), Exception)
    assert leader_window(c) == (5, 100)
    assert isinstance(fenced(c, 4), StaleEpoch)
    assert not isinstance(fenced(c, 1000), Exception)
    assert leader_window(c) == (100, 1000)
    assert isinstance(fenced(c, 99), StaleEpoch)


def test_out_of_order_arrival_all_in_window_land(c: SimCluster) -> None:
    fenced(c, 5)
    tasks = [c.replicate_async(P, e) for e in (10, 6, 8, 5, 9)]
    c.run_until(lambda: all(t.done() for t in tasks))
    assert all(t.exception() is None for t in tasks)
    assert leader_window(c) == (5, 10)
    c.run_for(1.0)
    states = set(c.replica_states(P).values())
    assert len(states) == 1  # every replica applied the same log


def test_apply_time_check_catches_a_broken_in_memory_layer() -> None:
    # A variant whose fence takes lo from the (corruptible) seen window only; the apply-time
    # check must still reject what it wrongly admits.
    v = replace(REFERENCE, name="seen-only", fence_lo_from_applied=False)
    c = SimCluster(seed=3, partitions=(P,), variant=v)
    c.bootstrap(mint=False)
    fenced(c, 10)
    fenced(c, 12)
    nid = c.leader(P)
    assert nid is not None
    fence = c.brokers[nid].replicas[P].fence
    fence.seen = SeenWindow(c.ports[nid].term(c.group_of(P)), 1, 12)  # corrupted
    err = fenced(c, 2)
    assert isinstance(err, StaleEpoch) and err.at == "apply" and err.window == (10, 12)
    assert leader_window(c) == (10, 12)
    c.run_for(1.0)  # followers apply the same entry
    rejected = [r for r in c.apply_log if r.event.result and not r.event.result.accepted]
    assert {r.node for r in rejected} == {1, 2, 3}  # decided identically on every replica


def test_f1_failed_replicate_after_slide_loses_nothing(c: SimCluster) -> None:
    assert not isinstance(fenced(c, 10), Exception)
    c.fail_next_replicate(P)
    assert isinstance(fenced(c, 14), Exception)  # fence slid the seen window to 14, then failed
    nid = c.leader(P)
    assert nid is not None
    assert c.brokers[nid].replicas[P].fence.seen is not None
    assert c.brokers[nid].replicas[P].fence.seen.max == 14
    assert not isinstance(fenced(c, 12), Exception)
    assert not isinstance(fenced(c, 13), Exception)
    err = fenced(c, 11)  # F1: production admitted this; lo now comes from the applied window
    assert isinstance(err, StaleEpoch)
    c.run_for(1.0)
    for st in c.replica_states(P).values():
        assert window(st) == (12, 13)
    accepted = [r.event for r in c.apply_log if r.event.result and r.event.result.accepted]
    assert sorted({ev.command.epoch for ev in accepted}) == [10, 12, 13]  # type: ignore[union-attr]
    check_no_unsafe_state(c)


def test_leadership_change_with_stale_seen_window(c: SimCluster) -> None:
    fenced(c, 5)
    old = c.leader(P)
    assert old is not None
    c.fail_next_replicate(P)
    fenced(c, 10)  # old leader's seen window is now [5, 10] in its term
    others = [n for n in (1, 2, 3) if n != old]
    c.transfer_leadership(P, others[0])
    assert c.run_until(lambda: c.leader(P) == others[0])
    fenced(c, 20)
    fenced(c, 30)
    c.transfer_leadership(P, old)
    assert c.run_until(lambda: c.leader(P) == old)
    fence = c.brokers[old].replicas[P].fence
    assert fence.seen is None or fence.seen.term == c.ports[old].term(c.group_of(P))
    err = fenced(c, 12)  # the old term's window [5, 10] would have admitted 12
    assert isinstance(err, StaleEpoch) and err.at == "fence" and err.window == (20, 30)


def test_snapshot_and_recovery_keeps_persisted_fields_and_forgets_seen(c: SimCluster) -> None:
    acks = c.produce({P: [b"r0", b"r1"]})
    fenced(c, 50)
    acks2 = c.produce({P: [b"r2"]}, epoch=50)
    c.run_for(1.0)
    before = c.replica_states(P)
    for n in (1, 2, 3):
        c.compact(n, P)
        c.compact(n)
    for n in (1, 2, 3):
        c.crash(n)
    for n in (1, 2, 3):
        c.restart(n)
    assert c.run_until(lambda: c.leader(P) is not None)
    c.run_for(1.0)
    assert c.replica_states(P) == before
    assert all(s is None for s in c.seen_windows(P).values())
    got = c.read_all(P)
    assert [r for _, r in got] == [b"r0", b"r1", b"r2"]
    assert acks[P].base == 0 and acks2[P].base == 2


def _barriers_applied(c: SimCluster, nid: int, term: int) -> list[int]:
    """The indexes of the Barrier commands of `term` that node `nid` has applied for P."""
    from epochgc.impl.partition import commands as pc
    from epochgc.impl.raft.messages import ENTRY_NORMAL

    g = c.group_of(P)
    host = c.ports[nid].host
    log = host.groups[g].node.log
    applied = host.applied_index(g)
    return [e.index for e in log.slice(max(log.first_index, 1), applied + 1)
            if e.term == term and e.type == ENTRY_NORMAL and e.data
            and pc.decode(e.data) == pc.Barrier()]


def test_a_reelected_leader_syncs_on_a_barrier_of_its_new_term(c: SimCluster) -> None:
    """Issue 42 survivor 1: a leader re-elected after another leader's term must sync on a
    barrier of its NEW term (the fence's sync protocol: its applied state then includes
    every entry an earlier term committed). Reusing its finished barrier of the earlier
    term returned at once, and a fence could decide on an applied state missing the other
    leader's committed slide (a write admitted, then refused at apply)."""
    assert not isinstance(fenced(c, 5), Exception)
    a = c.leader(P)
    assert a is not None
    b = next(n for n in (1, 2, 3) if n != a)
    c.transfer_leadership(P, b)
    assert c.run_until(lambda: c.leader(P) == b)
    assert not isinstance(fenced(c, 10), Exception)
    assert not isinstance(fenced(c, 12), Exception)
    c.transfer_leadership(P, a)
    assert c.run_until(lambda: c.leader(P) == a)
    fence = c.brokers[a].replicas[P].fence
    term = c.wait(fence.sync())
    assert term == c.ports[a].term(c.group_of(P)) and fence.synced_term == term
    assert _barriers_applied(c, a, term), (
        f"node {a} returned from sync in term {term} without applying a barrier of it")
    # ... so the fence decides on the window b slid: 9 is refused at the fence, not at apply
    err = fenced(c, 9)
    assert isinstance(err, StaleEpoch) and err.at == "fence" and err.window == (10, 12), err
