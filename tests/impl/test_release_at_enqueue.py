"""The fence's release point (issue 30): with `release_at_enqueue` (the default) a write's
shared lock is released once its placeholder is in the Raft log, so a slide no longer waits
for the write's replicate; with it off (the design notes' rule) the lock is held until the
replicate is over. Either way every write admitted under a window lands before the slide
that replaces the window, nothing is rejected at apply, and a leadership change still aborts
a queued write (expected-term). Deterministic: the simulated cluster on its logical clock."""

from __future__ import annotations

import asyncio

import pytest

from epochgc.impl.partition import commands as c
from epochgc.impl.partition.fence import PartitionFence, ReplicateFailed, StaleEpoch
from epochgc.impl.partition.statemachine import PlaceholderResult
from epochgc.impl.sim.cluster import SimCluster

P = "t/0"
MODES = [pytest.param(True, id="release-at-enqueue"), pytest.param(False, id="hold-through")]


def cluster(release_at_enqueue: bool) -> SimCluster:
    cl = SimCluster(seed=7, partitions=(P,), release_at_enqueue=release_at_enqueue)
    cl.bootstrap(mint=False)
    return cl


def done(c_: SimCluster, epoch: int) -> None:
    """Fence + replicate one placeholder to the end; it must be accepted."""
    t = c_.replicate_async(P, epoch)
    c_.run_until(t.done)
    assert t.exception() is None and t.result().accepted, t.exception() or t.result()


def leader_fence(c_: SimCluster) -> PartitionFence:
    nid = c_.leader(P)
    assert nid is not None
    return c_.brokers[nid].replicas[P].fence


def log_epochs(c_: SimCluster) -> list[int]:
    """The placeholder epochs in the leader's Raft log of P, in log order."""
    nid = c_.leader(P)
    assert nid is not None
    log = c_.sim.host(nid).groups[c_.group_of(P)].node.log
    out = []
    for e in log.slice(log.first_index, log.last_index() + 1):
        cmd = c.decode(e.data) if e.type == 1 else None
        if isinstance(cmd, c.Placeholder):
            out.append(cmd.epoch)
    return out


def apply_results(c_: SimCluster) -> list[tuple[int, bool]]:
    return [(r.event.command.epoch, r.event.result.accepted) for r in c_.apply_log
            if isinstance(r.event.command, c.Placeholder) and r.event.result is not None]


@pytest.mark.parametrize("release", MODES)
def test_a_slide_waits_for_a_write_to_be_queued_or_replicated(release: bool) -> None:
    """A write in window [5, 9] is queued; then a write at 12 must slide the window. With
    release at enqueue the slide is decided and queued while the first write is still
    replicating; held through, it waits for that write to apply. Both land, in fence order."""
    cl = cluster(release)
    done(cl, 5)
    done(cl, 9)
    fence = leader_fence(cl)
    first = cl.replicate_async(P, 6)  # spawn runs it up to its apply wait
    assert log_epochs(cl)[-1] == 6, "the in-window write is not in the leader's log yet"
    assert fence.lock.readers == (0 if release else 1)
    n = len(cl.fence_log)
    slide = cl.replicate_async(P, 12)
    slid = [r.decision for r in cl.fence_log[n:] if r.decision.epoch == 12]
    if release:
        assert slid and slid[0].kind == "above_window", "the slide waited for the replicate"
        assert not first.done(), "the first write finished before the slide (no overlap)"
        assert log_epochs(cl)[-2:] == [6, 12]
    else:
        assert not slid, "the slide went ahead of a replicate still holding the lock"
    cl.run_until(lambda: first.done() and slide.done())
    for t in (first, slide):
        assert t.exception() is None and t.result().accepted, t.exception() or t.result()
    assert log_epochs(cl)[-2:] == [6, 12]
    assert all(ok for _, ok in apply_results(cl)), apply_results(cl)


@pytest.mark.parametrize("release", MODES)
def test_a_write_held_before_its_propose_keeps_the_lock(release: bool) -> None:
    """Release at enqueue means at enqueue, not at admission: a write held between its fence
    and its propose (a slow caller) keeps the slide waiting, so it still lands first; had it
    released at admission, the slide would land first and the write (6 < the slid window's
    lower edge 9) would be rejected at apply in its own fence's term."""
    cl = cluster(release)
    done(cl, 5)
    done(cl, 9)
    fence = leader_fence(cl)
    gate: asyncio.Future[None] = cl.loop.create_future()

    async def hold(epoch: int) -> None:
        if epoch == 6:
            await gate

    fence.before_propose = hold
    first = cl.replicate_async(P, 6)
    slide = cl.replicate_async(P, 12)
    cl.run(300)
    assert fence.lock.readers == 1 and not slide.done(), "the held write released its lock"
    gate.set_result(None)
    cl.run_until(lambda: first.done() and slide.done())
    for t in (first, slide):
        assert t.exception() is None and t.result().accepted, t.exception() or t.result()
    assert log_epochs(cl)[-2:] == [6, 12]
    assert all(ok for _, ok in apply_results(cl)), apply_results(cl)


def burst(c_: SimCluster, epochs: tuple[int, ...]) -> asyncio.Task[list[object]]:
    """Fence + replicate placeholders at `epochs` as concurrent tasks started in one loop
    turn, in that order (so each runs until it first waits before the next one starts)."""
    nid = c_.leader(P)
    assert nid is not None
    b = c_.brokers[nid]

    async def run() -> list[object]:
        return list(await asyncio.gather(
            *(b.replicate(P, c.Placeholder(e, f"burst/{e}/{i}", 0, 0, 0))
              for i, e in enumerate(epochs)), return_exceptions=True))

    return c_.spawn(run())


@pytest.mark.parametrize("release", MODES)
def test_many_writes_and_slides_land_in_fence_order(release: bool) -> None:
    """Bursts of three concurrent writes while the window is [t-2, t-1]: one in window at its
    lower edge, one at t that slides it to [t-1, t], one at t-1; bursts overlap in flight.
    Every write is accepted at apply (the apply-time check never fires), i.e. each slide
    lands after the writes admitted before it: had the edge write been queued after the
    slide, t-2 would fall below the slid window's lower edge t-1."""
    cl = cluster(release)
    done(cl, 8)
    done(cl, 9)
    tasks = []
    for top in range(10, 30):
        tasks.append(burst(cl, (top - 2, top, top - 1)))
        cl.run(3)
    cl.run_until(lambda: all(t.done() for t in tasks))
    for t in tasks:
        for r in t.result():
            assert isinstance(r, PlaceholderResult) and r.accepted, r
    assert all(ok for _, ok in apply_results(cl)), apply_results(cl)
    fence = leader_fence(cl)
    assert fence.lock.readers == 0 and not fence.lock.writer


@pytest.mark.parametrize("release", MODES)
def test_a_leadership_change_after_enqueue_still_fails_the_write(release: bool) -> None:
    """Expected-term stays: a write queued in term T whose leader is cut off fails (its fate
    is unknown), never lands acknowledged in another term, and its lock is released once."""
    cl = cluster(release)
    done(cl, 5)
    nid = cl.leader(P)
    assert nid is not None
    fence = leader_fence(cl)
    term = cl.brokers[nid].port.term(cl.group_of(P))
    cl.isolate(nid)
    t = cl.replicate_async(P, 7)
    assert fence.lock.readers == (0 if release else 1)
    cl.run_until(lambda: t.done() or (cl.leader(P) not in (None, nid)), 50_000)
    cl.heal()
    cl.run_until(t.done, 50_000)
    err = t.exception()
    if err is None:  # it may commit after all (Raft): then in its own term, never another
        assert t.result().accepted
        assert landed_terms(cl, 7) == [term], landed_terms(cl, 7)
    else:
        assert isinstance(err, ReplicateFailed), repr(err)
        assert set(landed_terms(cl, 7)) <= {term}, landed_terms(cl, 7)
    assert fence.lock.readers == 0 and not fence.lock.writer
    done(cl, 8)  # the new leader's fence works: nothing is stuck


def landed_terms(c_: SimCluster, epoch: int) -> list[int]:
    """The terms of the entries holding a placeholder at `epoch` in the leader's log."""
    nid = c_.leader(P)
    assert nid is not None
    log = c_.sim.host(nid).groups[c_.group_of(P)].node.log
    return [e.term for e in log.slice(log.first_index, log.last_index() + 1)
            if e.type == 1 and isinstance(c.decode(e.data), c.Placeholder)
            and c.decode(e.data).epoch == epoch]  # type: ignore[union-attr]


def test_the_setting_reaches_every_fence_and_defaults_on() -> None:
    on = SimCluster(seed=1, partitions=(P,))
    assert all(r.fence.release_at_enqueue for b in on.brokers.values()
               for r in b.replicas.values())
    off = cluster(False)
    assert all(not r.fence.release_at_enqueue for b in off.brokers.values()
               for r in b.replicas.values())


@pytest.mark.parametrize("release", MODES)
@pytest.mark.parametrize("hk_first", [True, False], ids=["advance-first", "write-first"])
def test_an_idle_partitions_advance_and_a_write_in_one_turn(release: bool,
                                                            hk_first: bool) -> None:
    """The housekeeper's advance_epoch goes through the fence like a slide: started in the
    same loop turn as a write at the window's lower edge, either the write lands before the
    advance (accepted) or it is refused at the fence; never admitted and then rejected at
    apply in its fence's term (which an advance around the exclusive lock would cause)."""
    from epochgc.impl.broker.housekeeper import housekeep_once

    cl = cluster(release)
    done(cl, 5)
    done(cl, 9)
    nid = cl.leader(P)
    assert nid is not None
    b = cl.brokers[nid]
    rep = b.replicas[P]
    write = b.replicate(P, c.Placeholder(5, "edge/5", 0, 0, 0))
    advance = housekeep_once(rep.sm, rep.fence, 12, rep.info.creation_revision)

    async def both() -> list[object]:
        first, second = (advance, write) if hk_first else (write, advance)
        return list(await asyncio.gather(first, second, return_exceptions=True))

    t = cl.spawn(both())
    cl.run_until(t.done)
    hk, w = t.result() if hk_first else t.result()[::-1]
    assert not isinstance(hk, BaseException) and hk.advanced_to == 12, hk
    if isinstance(w, StaleEpoch):
        assert w.at == "fence", f"the write was admitted and then rejected at apply: {w}"
    else:
        assert isinstance(w, PlaceholderResult) and w.accepted, w
    assert all(ok for _, ok in apply_results(cl)), apply_results(cl)
