"""break-glass advance-epoch must not report an advance that changed nothing."""

from __future__ import annotations

from epochgc.impl.broker.breakglass import BreakGlassRefused, break_glass_advance
from epochgc.impl.sim.cluster import SimCluster

P = "t/0"


def test_no_success_for_an_advance_that_an_in_flight_placeholder_made_a_no_op() -> None:
    c = SimCluster(seed=7, partitions=(P,))
    c.bootstrap(mint=False)
    first = c.mint()
    t = c.replicate_async(P, first)
    c.run_until(t.done)
    nid = c.leader(P)
    assert nid is not None
    cached, newer = c.mint(), c.mint()
    assert c.run_until(lambda: c.brokers[nid].controller.epoch >= newer)
    c.lag_cache(nid, cached)  # the admin node's cache: above the applied epoch, below `newer`
    inflight = c.replicate_async(P, newer)  # a producer with a newer cache, through the leader
    try:
        r = c.wait(break_glass_advance(c.brokers[nid], P))
    except BreakGlassRefused:
        return  # refused: the right answer
    c.run_until(inflight.done)
    assert inflight.exception() is None
    st = c.brokers[nid].replicas[P].sm.state
    # Had advance_epoch(cached) been applied before `newer`, previous_applied would be
    # `cached`; had it come after, it changed nothing.
    assert r.advanced_to is None or cached in (st.max_applied_epoch, st.previous_applied_epoch), (
        f"reported advanced_to={r.advanced_to} (cached {r.cached_epoch}), but the partition's "
        f"window is [{st.previous_applied_epoch}, {st.max_applied_epoch}]: the advance was a "
        "no-op")
