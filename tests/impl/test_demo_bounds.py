"""`demo`'s controller requests are bounded whole (newuser21 X9, seen on `epochgc barrier`):
a controller leader that answers `status` and never commits made `controller_call` send
the request again round after round, 30 s an attempt, up to 50 rounds; the demo's topic
deletion, re-creation, barrier and read-back asked so, without a bound. Here each step
runs against that cluster (tests/impl/test_cluster_client.py `uncommitting_cluster`) with
the demo's bound cut to 0.5 s; the test's own bound (20 s) is under one old attempt."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from epochgc.impl import demo
from epochgc.impl.cluster.client import NoAnswerWithin, ProcClusterAccess
from tests.impl.test_cluster_client import uncommitting_cluster

Step = Callable[[demo.Demo, ProcClusterAccess], Coroutine[Any, Any, None]]
STEPS: dict[str, Step] = {
    "delete-topic": lambda d, a: d._lifecycle(a, time.monotonic()),
    "barrier": lambda d, a: d._barrier(a, time.monotonic()),
    "read-back": lambda d, a: d._read_back(a),
}


@pytest.mark.parametrize("step", sorted(STEPS))
def test_a_controller_that_never_commits_ends_the_step_within_its_bound(
        monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    monkeypatch.setattr(demo, "ASK_S", 0.5, raising=False)  # absent before
    d = demo.Demo(0.0, say=lambda _line: None)

    async def scenario() -> str:
        async with uncommitting_cluster() as nodes:
            access = ProcClusterAccess(nodes, say=lambda _line: None)
            try:
                async with asyncio.timeout(20):  # the old code: 30 s an attempt
                    await STEPS[step](d, access)
            except (NoAnswerWithin, RuntimeError) as e:
                # A topic change sent and unanswered is never sent again: its answer is
                # `no_answer`, said by the step as it fails.
                return str(e)
            finally:
                await access.close()
        raise AssertionError("answered")

    try:
        said = asyncio.run(scenario())
    finally:
        shutil.rmtree(d.tmp, ignore_errors=True)
    assert "within 0.5 s" in said and "{" not in said, said
