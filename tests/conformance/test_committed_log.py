"""Issue 14: the harness's bound on "the committed log the model replayed" (Harness.
_advance_shadows), pinned from both sides.

The deep run's seed-15 finding ("apply on node 2 for t/2 at index 5 is not in the committed
log the model replayed") was the harness's: the shadow of a partition's current incarnation
replayed only as far as the live replicas' applied indexes. A leader that applies an entry
(committed with one follower, the followers not yet told) and then crashes and restarts in
the same step is back at its snapshot's applied index, so that correct apply was reported.
The shadow now replays every applied entry up to the highest commit index known; an entry
applied past it was applied uncommitted, and the seeded Raft bug below (a node applying its
whole log, committed or not) must still be reported, live or restarted."""

from __future__ import annotations

import types

import pytest

from epochgc.impl.raft import raftlog
from epochgc.impl.raft.messages import Entry
from epochgc.impl.raft.node import Config
from tests.conformance import harness
from tests.conformance.harness import STATS, Harness
from tests.conformance.shadow import Divergence

P = "t/0"


@pytest.fixture(params=["step", "event"])
def raft_check(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(harness, "RAFT_CHECK", request.param)
    return str(request.param)


def _views(h: Harness, p: str) -> dict[int, tuple[int, int]]:
    """node -> (applied index, commit index) of p's group on every live node."""
    g = h.c.group_of(p)
    return {n: (b.port.host.applied_index(g), b.port.host.groups[g].node.log.committed)
            for n, b in sorted(h.c.brokers.items()) if g in b.port.host.groups}


def _apply_then_restart(h: Harness, p: str) -> tuple[int, dict[int, tuple[int, int]]]:
    """Produce to p at its leader and wait for the ack (the leader has applied it), then
    crash and restart that leader at once, in one step. Returns the leader and the views
    just before the crash."""
    nid = h.c.leader(p)
    assert nid is not None
    h.produce([p], 1, nid)
    before = _views(h, p)
    h.crash(nid)
    h.restart(nid)
    return nid, before


def test_found_apply_then_restart_before_followers_learn_the_commit(raft_check: str) -> None:
    """The finding's shape, directed (no faults): the leader's apply of an entry committed
    with one follower is not in any live replica's applied index once it restarted."""
    h = Harness(seed=11)
    try:
        nid, before = _apply_then_restart(h, P)
        top = before[nid][0]
        after = _views(h, P)
        # The shape is reached (else this test would no longer test anything):
        assert top > max(c for n, (_, c) in before.items() if n != nid), before
        assert after[nid][0] < top <= after[nid][1], (before, after)
        seen = STATS["check.shadow_past_live_replicas"]
        h.check_step()
        assert STATS["check.shadow_past_live_replicas"] == seen + 1
        h.settle()
        h.check_step()
        h.check_readback()
    finally:
        h.close()


def _applies_past_live_replicas(h: Harness) -> list[tuple[int, int, int]]:
    """(node, group, index) of the applies not yet checked whose index no live replica of
    their group has applied (now): the shape the old bound called uncommitted."""
    out = []
    for k in range(h.apply_seen, len(h.c.apply_log)):
        rec, g = h.c.apply_log[k], h.c.apply_groups[k]
        live = [b.port.host.applied_index(g) for b in h.c.brokers.values()
                if g in b.port.host.groups]
        if rec.event.index > max(live, default=0):
            out.append((rec.node, g, rec.event.index))
    return out


def test_found_deep_seed_15_shrunk(monkeypatch: pytest.MonkeyPatch) -> None:
    """The deep run's program (`--replay 15 --raft-check event`: seed 57671, memory disks),
    Hypothesis's partial shrink (it stopped after 5 minutes at 43 rules), then a greedy one
    to these 22: the last rule, `restart_mid_window` on t/0, crashes and restarts node 2
    right after it applied entries of t/2's current incarnation that only it had applied."""
    monkeypatch.setattr(harness, "RAFT_CHECK", "event")
    # Replayed in the deployment it was found in (a heartbeat every tick): the shape depends
    # on the simulated timing, which EPOCHGC_CONFORMANCE_HEARTBEAT_TICK can change.
    monkeypatch.setattr(harness, "RAFT_CONFIG", Config(election_tick=10, heartbeat_tick=1))
    h = Harness(seed=57671)
    program: list[tuple[str, tuple[object, ...]]] = [
        *[("service_round", (False,))] * 3,
        ("reelected_between_fence_and_propose", ("t/1",)),
        ("produce_below", (["t/1"], 0, False)),
        ("create_and_produce", ()),
        ("restart_mid_window", ("t/2", 3)),
        ("isolate", (3,)),
        ("delete_partition", ("t/1",)),
        ("delete_while_writing", ("t/2", "t/0")),
        ("create_partition", ()),
        ("heal", ()),
        ("produce", (["t/1"], 1, 3, None, True)),
        ("delete_while_writing", ("t/1", "t/1")),
        ("isolate", (2,)),
        ("create_and_produce", ()),
        ("heal", ()),
        ("create_and_produce", ()),
        ("net_faults", (0.05, 0.3, 0.5, 17)),
        ("isolate", (1,)),
        ("delete_across_leader_change", ("t/0", 1)),
        ("produce", (["t/2", "t/0"], 1, 1, None, False)),
        ("delete_on_stale_reports", ("t/1",)),
    ]
    try:
        h.check_step()
        for name, args in program:
            getattr(h, name)(*args)
            h.check_step()
        h.restart_mid_window("t/0", 2)
        assert _applies_past_live_replicas(h), "the program no longer reaches the shape"
        h.check_step()
        h.settle()
        h.check_step()
        h.check_readback()
    finally:
        h.close()


def _apply_whole_log(self: raftlog.RaftLog) -> list[Entry]:
    """SEEDED Raft bug: a node hands its whole log to the state machine, committed or not."""
    lo = max(self.applied + 1, self.first_index)
    return self.slice(lo, self.last_index() + 1) if self.last_index() >= lo else []


def _uncommitted_apply(h: Harness) -> int:
    """With the seeded bug in t/0's leader's log (that node's only, that incarnation's only:
    a restart builds a fresh log), a write reaches the leader and is applied there before
    any follower has it; returns the leader, checked to have applied past every commit
    index."""
    nid = h.c.leader(P)
    assert nid is not None
    log = h.c.brokers[nid].port.host.groups[h.c.group_of(P)].node.log
    log.next_committed = types.MethodType(_apply_whole_log, log)  # type: ignore[method-assign]
    h.produce([P], 1, nid, wait=False)
    h.c.run(3)
    views = _views(h, P)
    assert views[nid][0] > max(c for _, c in views.values()), views
    return nid


def test_seeded_uncommitted_apply_by_a_live_replica_is_caught(h: Harness) -> None:
    _uncommitted_apply(h)
    with pytest.raises(Divergence, match="past the committed log the model replayed"):
        h.check_step()


def test_seeded_uncommitted_apply_then_restart_is_caught(h: Harness) -> None:
    """The boundary of the fix: an apply by a replica that restarted since counts only up to
    a known commit index; this one was never committed, so its apply record is reported."""
    nid = _uncommitted_apply(h)
    h.crash(nid)
    h.restart(nid)
    with pytest.raises(Divergence, match="is not in the committed log the model replayed"):
        h.check_step()


# ---- the controller's committed state (deep run with a beat every 3rd tick, issue s6) ----

# Greedy-shrunk from the 943,032-step deep run's failing chunks (EPOCHGC_CONFORMANCE_HEARTBEAT_TICK
# =3, --raft-check event). Each ends with the controller leader crashing after it committed
# and applied an entry whose commit index its followers had not learnt yet (they hold the
# entry: it is committed and the next leader applies it).
_CTL_BEHIND_A_CRASH = {
    # A3 (chunks 912, 929, 953 had this shape): lag_cache froze node 2's cache at the
    # leader's applied epoch 6 (a mint at index 7); nodes 1 and 2 had applied index 6 (epoch 3).
    "a3_seed_929": [
        ("boot", {"seed": 86, "disk": 2}),
        ("delete_partition", {"p": "t/0"}),
        ("delete_partition", {"p": "t/1"}),
        ("service_round", {"publish_table": True, "times": 1}),
        ("lag_cache", {"back": 0, "nid": 2}),
        ("crash", {"nid": 3}),
    ],
    "a3_seed_953": [
        ("boot", {"disk": 2, "seed": 24301}),
        ("recreate_with_old_write", {"p": "t/0"}),
        ("recreate_with_old_write", {"p": "t/0"}),
        ("power_loss_and_recover", {"mid_write": False, "nid": 3}),
        ("mint", {"times": 1}),
        ("lag_cache", {"back": 1, "nid": 1}),
        ("crash", {"nid": 2}),
    ],
    # `revisions` (chunks 353, 357): node 3 applied the delete of t/0 (index 5, revision 4)
    # and published the partition snapshot at revision 4; nodes 1 and 2 still had t/0.
    "revisions_seed_353": [
        ("boot", {"disk": 4, "seed": 255}),
        ("delete_across_leader_change", {"p": "t/0", "to": 3}),
        ("publish_partitions", {}),
        ("crash", {"nid": 3}),
    ],
    "revisions_seed_357": [
        ("boot", {"disk": 2, "seed": 671}),
        ("isolate", {"nid": 1}),
        ("create_and_produce", {}),
        ("delete_across_leader_change", {"p": "t/1", "to": 2}),
        ("publish_partitions", {}),
        ("crash", {"nid": 2}),
    ],
}


@pytest.mark.parametrize("name", sorted(_CTL_BEHIND_A_CRASH))
def test_found_controller_applied_behind_commit_after_leader_crash(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A3 and the abstraction compared against the most advanced LIVE controller replica's
    applied state; after the leader crashed, the live ones had not learnt the commit of
    its last entry yet, so a cache lagged at the committed epoch 'led the controller' and
    a snapshot published at the committed revision 'left out' a partition the live
    replicas still had. Both now compare against `Harness.committed_controller` (the
    committed log replayed). The program must run clean, reach the shape, and the live
    replicas must then catch up to exactly that committed state (nothing was lost)."""
    from tests.conformance.machine import ConformanceMachine

    monkeypatch.setattr(harness, "RAFT_CHECK", "event")
    monkeypatch.setattr(harness, "RAFT_CONFIG", Config(election_tick=10, heartbeat_tick=3))
    program = _CTL_BEHIND_A_CRASH[name]
    state = ConformanceMachine()
    try:
        for rule, kw in program[:-1]:
            getattr(state, rule)(**kw)
            state.conforms()
        h = state.h
        assert h is not None
        victim = program[-1][1]["nid"]
        want = h.committed_controller()
        others = [b.controller.revision for n, b in h.c.brokers.items() if n != victim]
        assert h.c.brokers[victim].controller.revision == want.revision > max(others), (
            "the program no longer reaches the shape (only the crashing leader applied the"
            " last committed controller entry)")
        getattr(state, program[-1][0])(**program[-1][1])
        state.conforms()
        h.c.heal()  # seed 357's program leaves node 1 isolated
        assert h.c.run_until(lambda: all(b.controller.revision >= want.revision
                                         for b in h.c.brokers.values()), 50_000)
        for b in h.c.brokers.values():
            assert (b.controller.revision, b.controller.epoch) == (want.revision, want.epoch)
        state.conforms()
    finally:
        state.teardown()


def test_a3_still_fires_on_a_cache_ahead_of_the_committed_epoch(h: Harness) -> None:
    """The committed reference does not blunt A3: a cache one past the committed epoch (an
    epoch no replica applied, so never committed as far as anyone knows) is a divergence."""
    h.mint()
    h.check_step()
    top = h.committed_controller().epoch
    assert top >= 1
    h.c.lag_cache(1, top + 1)
    with pytest.raises(Divergence, match="A3 on node 1"):
        h.check_step()
