"""newuser12 P13 (issue 41): `produce` to a cluster that lost its quorum said nothing for 71 s,
then "Error: not acknowledged after 8 attempts: ['t/0', 't/1'] (last error: t/1: not the
leader (leader hint 0)); acknowledged: []" (Python lists, a node 0 that does not exist, and
not a word of what was acknowledged in all). Old code: every test here failed (no `say`, the
lists, "leader hint 0")."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from epochgc.impl.broker.producer import NotAcknowledgedError, Producer
from epochgc.impl.broker.raftport import inline_io
from epochgc.impl.partition.commands import Placeholder
from epochgc.impl.partition.fence import NotLeaderError
from epochgc.impl.partition.statemachine import PlaceholderResult
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.patience import SAY_AFTER_ENV

BOUND_S = 30.0  # generous: the line is due 0.05 s in; a loaded host is not this slow


class NoQuorum:
    """The producer's view of a cluster whose partitions have no leader (two of three nodes
    killed): every replicate answers as `ProcClusterAccess.replicate` does for a node that
    says "not the leader" with no leader known (hint 0). The first answer is held back until
    a waiting line was said, so the test waits on that event, not on a clock."""

    def __init__(self, said: asyncio.Event) -> None:
        self.said = said

    async def cluster_epoch(self) -> int:
        return 5

    async def creation_revision(self, partition: str) -> int:
        return 1

    async def replicate(self, partition: str, ph: Placeholder) -> PlaceholderResult:
        try:
            await asyncio.wait_for(self.said.wait(), BOUND_S)
        except TimeoutError:  # a BaseException: the producer does not retry it
            pytest.fail(f"no waiting line within {BOUND_S:.0f} s of an unanswered batch")
        raise NotLeaderError(0)

    def invalidate_epoch(self) -> None:
        pass


def test_a_batch_without_a_leader_is_said_while_waited_for_and_ends_in_words(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SAY_AFTER_ENV, "0.05")
    lines: list[str] = []

    async def go() -> None:
        loop = asyncio.get_running_loop()
        said = asyncio.Event()

        def say(line: str) -> None:  # from the waiting line's thread
            lines.append(line)
            loop.call_soon_threadsafe(said.set)

        prod = Producer(NoQuorum(said), LocalStore(tmp_path, create=True), inline_io,
                        random.Random(1), not_leader_wait=0.0)
        prod.say = say
        with pytest.raises(NotAcknowledgedError) as err:
            await prod.produce({"t/0": [b"a"], "t/1": [b"b"]})
        text = str(err.value)
        assert "[" not in text and "leader hint" not in text, text
        assert text.startswith("not acknowledged after 8 attempts: t/0, t/1 ("), text
        assert "no leader known" in text and text.endswith(
            "acknowledged in this batch: none"), text
        assert err.value.acks == {}

    asyncio.run(go())
    assert lines, "no waiting line"
    assert lines[0].startswith("waiting for the cluster: t/0, t/1 not acknowledged yet, "
                               "attempt 1 of 8"), lines


def test_not_leader_words_name_no_node_0() -> None:
    assert str(NotLeaderError(0)) == ("not the leader, and no leader known (no quorum, or "
                                      "an election)")
    assert str(NotLeaderError(2)) == "not the leader (node 2 is)"
    assert "Connection refused" in str(NotLeaderError(0, "Connection refused"))
