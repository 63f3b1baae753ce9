"""The per-event Raft check skips a replica whose (incarnation, role, term, log version) it
has checked: every change of the state the checks read must change that key. Seeded runs
with faults, crashes, proposals, compaction and snapshots compare the key with the state
built from scratch after every event."""

from __future__ import annotations

import contextlib
import random

import pytest

from impl.raft.node import ProposalRefused
from impl.raft.sim import Faults, Simulator, replica_key


def _key(s: Simulator) -> dict[tuple[int, int], tuple[object, ...]]:
    # The per-replica part of Simulator.check's key, from the function check uses.
    return {(g, nid): replica_key(inc, n) for g, nid, inc, n in s.live_replicas()}


def _run(seed: int, steps: int) -> int:
    """Drive a faulty run; return how many state changes were compared."""
    r = random.Random(seed)
    faults = Faults(drop=0.05, duplicate=0.05, reorder=0.1, crash_mid_write=0.3,
                    replay=0.02, batch=0.2)
    s = Simulator(3, seed=seed, groups=(1, 2), faults=faults, snapshot_interval=7)
    prev_state, prev_key = s.replica_state(), _key(s)
    changes = 0
    for i in range(steps):
        x = r.random()
        live = s.live()
        if x < 0.01 and len(live) > 1:
            s.crash(r.choice(live))
        elif x < 0.03:
            down = [n for n in s.ids if n not in live]
            if down:
                s.restart(r.choice(down))
        elif x < 0.1:
            g = r.choice((1, 2))
            lead = s.leader(g)
            if lead is not None:
                with contextlib.suppress(ProposalRefused):
                    s.propose(lead, b"v%d" % i, group=g)
        elif x < 0.12 and live:
            s.compact(r.choice(live), r.choice((1, 2)))
        elif x < 0.13:
            s.isolate(r.choice(s.ids))
        elif x < 0.15:
            s.heal()
        if not s.step():
            break
        state, key = s.replica_state(), _key(s)
        for rk, st in state.items():
            if prev_state.get(rk) != st:
                changes += 1
                assert prev_key.get(rk) != key[rk], (
                    f"seed {seed} step {i}: group {rk[0]} node {rk[1]} changed without"
                    f" changing its check key")
        prev_state, prev_key = state, key
    return changes


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_state_change_changes_the_check_key(seed: int) -> None:
    assert _run(seed, 3000) > 300  # the runs do change state, often
