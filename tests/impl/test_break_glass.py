"""Break-glass advance-epoch (issue 30) on the simulated cluster: it moves an idle
partition's applied epoch to the leader's cached cluster epoch, and it is refused, naming
both epochs, while that cache lags the epochs the partition already accepted (the race
production documents: advancing to a lagging cache changes nothing)."""

from __future__ import annotations

import pytest

from epochgc.impl.broker.breakglass import BreakGlassRefused, break_glass_advance
from epochgc.impl.partition.fence import NotLeaderError
from epochgc.impl.sim.cluster import SimCluster

P = "t/0"


@pytest.fixture
def c() -> SimCluster:
    cl = SimCluster(seed=7, partitions=(P,))
    cl.bootstrap(mint=False)
    return cl


def _written_at(c: SimCluster, epoch: int) -> None:
    t = c.replicate_async(P, epoch)
    c.run_until(t.done)
    assert t.exception() is None, t.exception()


def test_it_advances_to_the_cached_epoch(c: SimCluster) -> None:
    first = c.mint()
    _written_at(c, first)
    nid = c.leader(P)
    assert nid is not None
    newer = c.mint()
    assert c.run_until(lambda: c.brokers[nid].controller.epoch >= newer)
    c.refresh_cache(nid)
    r = c.wait(break_glass_advance(c.brokers[nid], P))
    assert r.cached_epoch == newer and r.advanced_to == newer
    assert c.brokers[nid].replicas[P].sm.state.max_applied_epoch == newer


def test_refused_while_the_admin_nodes_cache_lags_the_objects(c: SimCluster) -> None:
    """Without the refusal the call 'succeeded' and changed nothing (advance_epoch to an
    epoch at or below max_applied is a no-op)."""
    first = c.mint()
    nid = c.leader(P)
    assert nid is not None
    c.lag_cache(nid, first)  # the admin node's cache stays at `first`
    newer = c.mint()
    _written_at(c, newer)  # an object written through a broker with a newer cache
    before = c.brokers[nid].replicas[P].sm.state.max_applied_epoch
    with pytest.raises(BreakGlassRefused, match=f"cached cluster epoch {first} is not above "
                                                f"the partition's applied epoch {newer}"):
        c.wait(break_glass_advance(c.brokers[nid], P))
    assert c.brokers[nid].replicas[P].sm.state.max_applied_epoch == before


def test_refused_on_a_node_that_does_not_lead(c: SimCluster) -> None:
    c.mint()
    nid = c.leader(P)
    other = next(n for n in c.brokers if n != nid)
    with pytest.raises(NotLeaderError):
        c.wait(break_glass_advance(c.brokers[other], P))


def test_a_partition_already_at_the_cached_epoch_has_nothing_to_advance(c: SimCluster) -> None:
    """newuser12 P6: on a healthy cluster a partition applies every epoch minted, so the
    call was refused ("the cache lags ... mint a new epoch, then retry") and an operator
    retried it in a loop. Now it says there is nothing to advance, and the broker's answer
    is not a refusal (`gc-admin advance-epoch` exits 0). Old code: BreakGlassRefused with
    that advice, answered "refused"."""
    from epochgc.impl.broker.breakglass import NothingToAdvance
    from epochgc.impl.cluster.rpc import handle

    first = c.mint()
    _written_at(c, first)
    nid = c.leader(P)
    assert nid is not None
    c.refresh_cache(nid)
    assert c.brokers[nid].cluster_epoch() == first
    with pytest.raises(NothingToAdvance, match=f"{P} already applies epoch {first}, the "
                       "epoch an advance would write now .*: nothing to advance"):
        c.wait(break_glass_advance(c.brokers[nid], P))
    answer = c.wait(handle(c.brokers[nid], {"op": "break_glass_advance", "partition": P}))
    assert answer["status"] == "nothing" and "nothing to advance" in answer["message"]
    assert "retry" not in answer["message"]
    assert c.brokers[nid].replicas[P].sm.state.max_applied_epoch == first
