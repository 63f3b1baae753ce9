"""Issue 31's harness shapes as directed programs (cheap, deterministic): each runs the
shape on a fixed seed and its checks; each is the regression-level kill of a seeded bug
in tests/conformance/mutants.py (named in the mutant's check)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conformance import shapes
from tests.conformance.harness import STATS, Harness
from tests.conformance.liveness import check_liveness


@pytest.fixture
def h() -> Iterator[Harness]:
    harness = Harness(0)
    yield harness
    harness.close()


def test_a_new_controller_leader_publishes_only_after_its_own_term_commit(h: Harness) -> None:
    before = STATS["controller.publish_refused_before_own_term_commit"]
    for to in (2, 3, 1):
        shapes.publish_across_controller_handover(h, to, crash=True)
        h.check_step()
        for nid in (1, 2, 3):
            h.restart(nid)
        h.c.run(200)
    assert STATS["controller.publish_refused_before_own_term_commit"] > before


def test_topics_sharing_a_prefix_are_created_and_deleted_apart(h: Harness) -> None:
    for topic in ("t2", "t-2"):
        shapes.create_topic(h, topic, 1)
        h.check_step()
    assert {"t2/0", "t-2/0"} <= set(h.created())
    shapes.create_topic(h, "t2", 1)  # exists: refused, nothing changes
    shapes.delete_topic(h, "t")
    h.check_step()
    assert set(h.created()) == {"t2/0", "t-2/0"}


def test_duplicate_creates_keep_the_live_incarnation(h: Harness) -> None:
    h.produce(["t/0"], 2)
    for p in ("t/0", "t/2", "t/2"):
        shapes.duplicate_create(h, p)
        h.check_step()
    h.check_readback()


def test_a_retry_across_delete_and_recreate_is_refused(h: Harness) -> None:
    before = STATS["lifecycle.retry_across_recreate"]
    for p in ("t/0", "t/1"):
        shapes.retry_across_recreate(h, p)
        h.check_step()
    assert STATS["lifecycle.retry_across_recreate"] > before


def test_a_held_write_with_a_queue_and_a_reelection_all_finish(h: Harness) -> None:
    for _ in range(3):
        h.mint()
        h.produce(["t/0"], 1)
    shapes.held_write_with_queue(h, "t/0", reelect=True)
    h.check_step()
    check_liveness(h)


def test_a_gc_round_whose_reread_fails_deletes_nothing(h: Harness) -> None:
    for _ in range(3):
        h.produce(["t/0", "t/1"], 2)
        h.service_round()
    h.service_round(collect=False)
    before = STATS["gc.round_failed_on_failed_reread"] + STATS["gc.reread_failed_no_delete"]
    h.gc(0.0, fail_reread=True)
    h.check_step()
    assert STATS["gc.round_failed_on_failed_reread"] + STATS["gc.reread_failed_no_delete"] > before


def test_a_housekeeper_deposed_mid_replicate_frees_the_lock(h: Harness) -> None:
    before = STATS["fault.housekeeper_deposed_mid_replicate"]
    for _ in range(2):
        h.produce(["t/0"], 1)
    shapes.housekeep_deposed_mid_replicate(h, "t/0")
    h.check_step()
    assert STATS["fault.housekeeper_deposed_mid_replicate"] > before
    check_liveness(h)


def test_a_gc_round_whose_listing_fails_ends_with_the_error(h: Harness) -> None:
    for _ in range(3):
        h.produce(["t/0", "t/1"], 2)
        h.service_round()
    h.service_round(collect=False)
    before = STATS["gc.round_failed_on_listing_error"]
    h.gc_listing_fails()
    h.check_step()
    assert STATS["gc.round_failed_on_listing_error"] > before
