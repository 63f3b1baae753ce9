"""The old release point stays tested: the fence-ordering programs of the conformance
harness (F1-F3 shapes, the slide that must wait for a held write, an injected apply-time
rejection, a re-election between fence and propose, a phantom slide), each followed by every
check, on a cluster whose fences hold their lock through the replicate
(`release_at_enqueue=False`). The same programs run with the default (release at enqueue)
in the modules they come from."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conformance import test_implchecks as implchecks
from tests.conformance import test_regressions as regressions
from tests.conformance.harness import Harness

PROGRAMS: dict[str, Callable[[Harness], None]] = {
    "f1-phantom-bump": regressions.test_f1_phantom_bump_shape,
    "f3-in-window-and-above": regressions.test_f3_concurrent_in_window_and_above_window_fences,
    "f2-leadership-round-trip": regressions.test_f2_leadership_round_trip,
    "slide-waits-for-held-write": implchecks.test_a_slide_waits_for_shared_holders,
    "injected-apply-rejection": implchecks.test_an_injected_apply_time_rejection_fails_the_producer,
    "reelected-between-fence-and-propose":
        implchecks.test_reelected_leader_does_not_land_a_write_of_its_old_term,
    "phantom-own-term-only":
        implchecks.test_a_phantom_slide_excuses_rejections_in_its_own_term_only,
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_with_the_lock_held_through_the_replicate(name: str) -> None:
    h = Harness(seed=11, release_at_enqueue=False)
    try:
        assert all(not r.fence.release_at_enqueue for b in h.c.brokers.values()
                   for r in b.replicas.values())
        PROGRAMS[name](h)
    finally:
        h.close()
