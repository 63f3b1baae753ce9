"""The epoch barrier (SPEC R36-R38) in the implementation, on the simulated cluster: the
command's encoding, the state machine's pending/promoted epoch, and the barrier run by the
controller leader end to end (caches invalidated, every partition leader drains and writes
advance_gc_epoch(candidate), the pending epoch promoted, M(p) raised)."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochgc.impl.broker.barrier import advance_gc_epoch_once, needs_barrier
from epochgc.impl.controller.statemachine import (
    ControllerStateMachine,
    decode,
    encode_mint_barrier,
)
from epochgc.impl.partition import commands as pc
from epochgc.impl.partition.fence import StaleEpoch
from epochgc.impl.partition.rwlock import SHARED
from epochgc.impl.partition.statemachine import PartitionStateMachine
from epochgc.impl.raft.messages import Entry, Snapshot
from epochgc.impl.sim.cluster import SimCluster
from epochgc.impl.store.local import LocalStore

PARTS = ("t/0", "t/1")


def cluster(tmp_path: Path) -> SimCluster:
    c = SimCluster(seed=5, partitions=PARTS, store=LocalStore(tmp_path, create=True))
    c.bootstrap()
    return c


def test_command_round_trips_and_refuses_garbage() -> None:
    cmd = pc.AdvanceGcEpoch(41)
    assert pc.decode(pc.encode(cmd)) == cmd
    with pytest.raises(pc.CommandError, match="trailing"):
        pc.decode(pc.encode(cmd) + b"x")
    with pytest.raises(pc.CommandError, match="bad advance_gc_epoch"):
        pc.encode(pc.AdvanceGcEpoch(-1))


def test_state_machine_pending_then_promoted_and_snapshotted() -> None:
    sm = PartitionStateMachine()
    sm.apply(Entry(1, 1, data=pc.encode(pc.Placeholder(3, "k", 0, 0, 1))))
    sm.apply(Entry(2, 1, data=pc.encode(pc.AdvanceGcEpoch(9))))
    assert (sm.state.barrier_epoch, sm.state.gc_safe_epoch, sm.inactive_epoch()) == (9, -1, 2)
    r = sm.apply(Entry(3, 1, data=pc.encode(pc.Placeholder(9, "late", 0, 0, 1))))
    assert r is not None and not r.accepted  # R37: at the candidate, refused at apply
    sm.apply(Entry(4, 1, data=pc.encode(pc.AdvanceReconciled(0, 2))))
    assert sm.state.gc_safe_epoch == 9 and sm.inactive_epoch() == 9
    back = PartitionStateMachine()
    back.restore(Snapshot(index=4, term=1, data=sm.snapshot()))
    assert back.state == sm.state


def test_controller_barrier_mint_sets_candidate_and_calls_back() -> None:
    sm = ControllerStateMachine()
    seen: list[int] = []
    sm.on_barrier = seen.append
    sm.apply(Entry(1, 1, data=encode_mint_barrier()))
    sm.apply(Entry(2, 1, data=encode_mint_barrier()))
    assert decode(encode_mint_barrier()) == (4, "")
    assert (sm.epoch, sm.barrier_candidate, seen) == (2, 1, [0, 1])
    back = ControllerStateMachine()
    back.restore(Snapshot(index=2, term=1, data=sm.snapshot()))
    assert back.barrier_candidate == 1 and back.epoch == 2


def test_barrier_raises_m_of_every_partition(tmp_path: Path) -> None:
    c = cluster(tmp_path)
    c.produce({"t/0": [b"a"], "t/1": [b"b"]})
    c.mint()
    before = {p: c.brokers[c.leader(p) or 1].replicas[p].sm.inactive_epoch() for p in PARTS}
    ctl = c._controller()
    cand = c.wait(ctl.barrier())
    assert cand == ctl.controller.epoch - 1
    for b in c.brokers.values():  # every broker dropped its cached epoch on apply
        c.run_until(lambda b=b: b.controller.barrier_candidate == cand)
        assert b.cache.cached is None or b.cache.cached > cand
    for b in c.brokers.values():
        c.wait(b.barrier_round())
    for p in PARTS:
        leader = c.leader(p)
        assert leader is not None
        b = c.brokers[leader]
        sm = b.replicas[p].sm
        assert sm.state.barrier_epoch == cand
        # pending: the placeholder before the command is not reconciled yet (R38)
        assert sm.state.gc_safe_epoch == -1 and sm.inactive_epoch() == before[p]
        c.wait(b.reconcile(p))
        c.wait(b.barrier_round())  # nothing left before it: LRLO moved over the command
        assert sm.state.gc_safe_epoch == cand and sm.inactive_epoch() == cand
        assert before[p] is None or before[p] < cand
    # a write stamped at or below the candidate is refused, one after it accepted
    with pytest.raises(StaleEpoch):
        c.wait(c.brokers[c.leader("t/0") or 1].replicate("t/0", pc.Placeholder(cand, "x", 0, 0,
                                                                                1)))
    acks = c.produce({"t/0": [b"c"]})
    assert acks["t/0"].epoch > cand


def test_barrier_drains_an_admitted_placeholder_first(tmp_path: Path) -> None:
    """The exclusive lock waits for a placeholder admitted before it (the drain)."""
    c = cluster(tmp_path)
    nid = c.leader("t/0")
    assert nid is not None
    rep = c.brokers[nid].replicas["t/0"]
    epoch = c.brokers[nid].controller.epoch
    term = c.wait(rep.fence.admit(epoch))  # holds the shared lock, as a fenced write does
    task = c.spawn(advance_gc_epoch_once("t/0", rep.sm, rep.fence, epoch))
    c.run_for(1.0)
    assert not task.done() and rep.sm.state.barrier_epoch == -1  # waiting on the drain
    fut = rep.fence.raft.propose(pc.encode(pc.Placeholder(epoch, "k", 0, 0, 1)), term)

    async def landed() -> object:
        return await fut

    c.wait(landed())
    rep.fence.lock.release(SHARED)
    step = c.wait(task)
    assert step.written and rep.sm.state.barrier_epoch == epoch
    assert not needs_barrier(rep.sm, epoch)
    # the placeholder admitted before the drain lies before the command in the log
    assert rep.sm.placeholders[-1].log_index < rep.sm.state.barrier_offset


def test_an_idle_partitions_barrier_is_promoted_by_its_own_round(tmp_path: Path) -> None:
    """Issue 42 survivor 2 (liveness): on a partition with nothing unreconciled, the barrier
    round that writes advance_gc_epoch (the last entry of its log) also moves LRLO up to it
    (R38: over command entries up to the command), so the pending epoch is promoted by that
    same round and M(p) rises to the candidate, with no write, reconcile or housekeeper
    after it. Off by one there, nothing unsafe happens and M(p) just never rises."""
    c = cluster(tmp_path)
    ctl = c._controller()
    cand = c.wait(ctl.barrier())
    for b in c.brokers.values():
        c.run_until(lambda b=b: b.controller.barrier_candidate == cand)
    for b in c.brokers.values():
        c.wait(b.barrier_round())
    for p in PARTS:
        leader = c.leader(p)
        assert leader is not None
        sm = c.brokers[leader].replicas[p].sm
        assert not sm.unreconciled()  # idle
        # LRLO moved up to the command (then the only entry after it is that move's own)
        assert sm.state.last_reconciled_log_offset == sm.state.barrier_offset
        assert (sm.state.barrier_epoch, sm.state.gc_safe_epoch) == (cand, cand), sm.state
        assert sm.inactive_epoch() == cand
