"""The per-event Raft check skips a replica whose (incarnation, role, term, log version) it
has checked: every change of the state the checks read must change that key. Seeded runs
with faults, crashes, proposals, compaction and snapshots compare the key with the state
built from scratch after every event."""

from __future__ import annotations

import pytest

from epochgc.impl.raft.sim import Simulator
from epochgc.impl.raft.simtypes import replica_key
from tests.raft.helpers import faulty_run


def _key(s: Simulator) -> dict[tuple[int, int], tuple[object, ...]]:
    # The per-replica part of Simulator.check's key, from the function check uses.
    return {(g, nid): replica_key(inc, n) for g, nid, inc, n in s.live_replicas()}


def _run(seed: int, steps: int) -> int:
    """Drive a faulty run; return how many state changes were compared."""
    prev_state: dict[tuple[int, int], tuple[object, ...]] = {}
    prev_key: dict[tuple[int, int], tuple[object, ...]] = {}
    changes = 0
    for i, s in enumerate(faulty_run(seed, steps)):
        state, key = s.replica_state(), _key(s)
        for rk, st in state.items():
            if i and prev_state.get(rk) != st:
                changes += 1
                assert prev_key.get(rk) != key[rk], (
                    f"seed {seed} step {i}: group {rk[0]} node {rk[1]} changed without"
                    f" changing its check key")
        prev_state, prev_key = state, key
    return changes


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_state_change_changes_the_check_key(seed: int) -> None:
    assert _run(seed, 3000) > 300  # the runs do change state, often
