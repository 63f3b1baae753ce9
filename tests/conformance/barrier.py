"""The epoch barrier (SPEC R36-R38) as a harness step, in its own module (issue 30): the
controller leader's barrier mint (every broker drops its epoch cache as it applies it),
then each broker's barrier round (its partition leaders drain, write
advance_gc_epoch(candidate), move LRLO over command entries). The model sees it through
the harness's usual checks: the shadow replays advance_gc_epoch, every replica's state
equals the shadow's, and the invariants (the barrier's conjuncts of I2/I3 included) hold on
the abstraction after the step."""

from __future__ import annotations

import contextlib

from tests.conformance.harness import STATS, Harness


def run_barrier(h: Harness, rounds: bool = True) -> None:
    """One barrier: the mint on the controller leader (if there is one), then, unless
    `rounds` is False (the services' own barrier rounds are left to do it), every live
    broker's barrier round. A step refused on the way (no leader, a term change) is what
    the services retry; the checks after the step hold either way."""
    nid = h._leader_of(h.c.controller_leader)
    if nid is None:
        return
    with contextlib.suppress(Exception):
        h.wait(h.c.brokers[nid].barrier())
        STATS["barrier.mint"] += 1
    h.c.run(50)
    if not rounds:
        return
    for b in list(h.c.brokers.values()):
        with contextlib.suppress(Exception):
            steps = h.wait(b.barrier_round())
            STATS["barrier.written"] += sum(s.written for s in steps)
            STATS["barrier.lrlo_moved"] += sum(s.lrlo is not None for s in steps)
