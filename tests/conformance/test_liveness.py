"""The harness's liveness checks (issue 31): they pass on a program that deletes a partition
with writes in flight, and each one fails on the stuck thing it exists for (a started
operation that never finishes, a fence lock left held). The seeded implementation bugs they
kill are in tests/conformance/mutants.py (class `[liveness]`)."""

from __future__ import annotations

import asyncio

import pytest

from epochgc.impl.partition.rwlock import SHARED
from tests.conformance.harness import Harness
from tests.conformance.liveness import LivenessViolation, check_liveness


@pytest.fixture
def h() -> object:
    harness = Harness(7)
    yield harness
    harness.close()


def test_writes_in_flight_across_a_delete_all_finish(h: Harness) -> None:
    h.produce(["t/0", "t/1"], 1, 1, wait=False)
    h.produce(["t/0"], 1, 2, wait=False)
    h.c.run(20)
    h.crash(3)
    h.delete_partition("t/0")
    check_liveness(h)
    h.check_step()
    assert not h.tasks


def test_an_operation_that_never_finishes_is_a_finding(h: Harness) -> None:
    never: asyncio.Future[None] = h.c.loop.create_future()

    async def stuck() -> None:
        await never

    h.tasks.append(h.c.spawn(stuck()))
    with pytest.raises(LivenessViolation, match=r"never finished .* stuck:\d+"):
        check_liveness(h)
    never.set_result(None)


def test_a_lock_left_held_is_a_finding(h: Harness) -> None:
    nid = h._leader_of(lambda: h.c.leader("t/1"))
    assert nid is not None
    lock = h.c.brokers[nid].replicas["t/1"].fence.lock
    h.wait(lock.acquire(SHARED))
    with pytest.raises(LivenessViolation, match=r"fence lock for t/1 is not free"):
        check_liveness(h)
    lock.release(SHARED)


def test_gc_that_stops_making_progress_is_a_finding(h: Harness) -> None:
    """Issue 42: a cluster whose barrier rounds never promote (here every broker's round
    does nothing: GC stops, nothing unsafe happens) fails the GC-progress check."""
    h.produce(["t/0", "t/1"], 1, 1)

    async def nothing() -> list[object]:
        return []

    for b in h.c.brokers.values():
        b.barrier_round = nothing  # type: ignore[method-assign, assignment]
    with pytest.raises(LivenessViolation, match=r"pending barrier epoch \d+ is not promoted"):
        check_liveness(h)
