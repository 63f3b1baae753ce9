"""Scenario tests of the pure core: the Raft paper's figures and etcd-raft's "paper tests",
restated in our own words against RaftNode."""

from __future__ import annotations

import random

import pytest

from epochgc.impl.raft.messages import HardState, InitialState, Message, MsgType, Snapshot
from epochgc.impl.raft.node import (
    Config,
    NotLeader,
    RaftNode,
    Role,
    TermMismatch,
    TransferInProgress,
)
from tests.raft.helpers import CFG, Cluster, log_of


def elect(c: Cluster, i: int) -> None:
    c.campaign(i)
    assert c.nodes[i].role is Role.LEADER


# ---- election -------------------------------------------------------------------------------


def test_starts_as_follower_and_elects_one_leader() -> None:
    c = Cluster(3)
    assert all(n.role is Role.FOLLOWER for n in c.nodes.values())
    elect(c, 1)
    assert [n.role for n in c.nodes.values()].count(Role.LEADER) == 1
    assert all(n.lead == 1 and n.term == 1 for n in c.nodes.values())


def test_election_timeout_is_randomized_in_one_to_two_timeouts() -> None:
    seen = set()
    for seed in range(40):
        n = RaftNode(1, [1, 2, 3], InitialState(), random.Random(seed), CFG)
        assert CFG.election_tick <= n.randomized_timeout < 2 * CFG.election_tick
        seen.add(n.randomized_timeout)
    assert len(seen) > 3


def test_follower_campaigns_after_timeout_with_pre_vote_then_vote() -> None:
    c = Cluster(3)
    n = c.nodes[1]
    for _ in range(n.randomized_timeout):
        n.tick()
    assert n.role is Role.PRE_CANDIDATE and n.term == 0  # pre-vote does not bump the term
    c.process(1)
    assert {m.type for m in c.outbox} == {MsgType.PRE_VOTE}
    assert all(m.term == 1 for m in c.outbox)


@pytest.mark.parametrize(
    ("size", "granted", "rejected", "outcome"),
    [
        (3, 2, 0, Role.LEADER),
        (3, 1, 2, Role.FOLLOWER),
        (5, 3, 0, Role.LEADER),
        (5, 2, 1, Role.CANDIDATE),
        (5, 1, 3, Role.FOLLOWER),
    ],
)
def test_election_outcome_counts_a_quorum(
    size: int, granted: int, rejected: int, outcome: Role
) -> None:
    cfg = Config(pre_vote=False)
    n = RaftNode(1, list(range(1, size + 1)), InitialState(), random.Random(0), cfg)
    for _ in range(n.randomized_timeout):
        n.tick()
    assert n.role is Role.CANDIDATE
    voters = iter(range(2, size + 1))
    for _ in range(granted - 1):  # the candidate votes for itself
        n.step(Message(MsgType.VOTE_RESP, 1, next(voters), n.term))
    for _ in range(rejected):
        n.step(Message(MsgType.VOTE_RESP, 1, next(voters), n.term, reject=True))
    assert n.role is outcome


def test_votes_once_per_term_and_persists_vote_before_answering() -> None:
    n = RaftNode(2, [1, 2, 3], InitialState(), random.Random(0), Config(pre_vote=False))
    n.step(Message(MsgType.VOTE, 2, 1, 5, log_term=0, index=0))
    rd = n.ready()
    assert rd.hard_state == HardState(5, 1, 0)  # persisted together with the grant
    assert [(m.type, m.reject) for m in rd.messages] == [(MsgType.VOTE_RESP, False)]
    n.advance(rd)
    n.step(Message(MsgType.VOTE, 2, 3, 5, log_term=0, index=0))
    assert [m.reject for m in n.ready().messages] == [True]


@pytest.mark.parametrize(
    ("cand_last_term", "cand_last_index", "granted"),
    [(2, 3, True), (2, 2, False), (1, 9, False), (3, 1, True), (2, 4, True)],
)
def test_vote_requires_candidate_log_up_to_date(
    cand_last_term: int, cand_last_index: int, granted: bool
) -> None:
    init = InitialState(HardState(2, 0, 0), Snapshot(), log_of([1, 2, 2]))
    n = RaftNode(2, [1, 2, 3], init, random.Random(0), Config(pre_vote=False))
    n.step(Message(MsgType.VOTE, 2, 1, 3, log_term=cand_last_term, index=cand_last_index))
    (m,) = n.ready().messages
    assert m.reject is (not granted)


def test_candidate_steps_down_on_append_from_leader_of_same_term() -> None:
    n = RaftNode(1, [1, 2, 3], InitialState(), random.Random(0), Config(pre_vote=False))
    for _ in range(n.randomized_timeout):
        n.tick()
    assert n.role is Role.CANDIDATE
    n.step(Message(MsgType.APP, 1, 2, n.term, log_term=0, index=0))
    after: Role = n.role
    assert after is Role.FOLLOWER and n.lead == 2


def test_higher_term_updates_term_and_lower_term_is_ignored() -> None:
    c = Cluster(3)
    elect(c, 1)
    leader = c.nodes[1]
    leader.step(Message(MsgType.APP_RESP, 1, 2, leader.term + 3))
    assert leader.role is Role.FOLLOWER and leader.term == 4
    before = leader.hard_state()
    leader.step(Message(MsgType.VOTE, 1, 3, 2, log_term=9, index=9))
    assert leader.hard_state() == before


# ---- pre-vote and check-quorum ----------------------------------------------------------------


def test_rejoining_partitioned_node_does_not_disrupt_leader() -> None:
    c = Cluster(3)
    elect(c, 1)
    c.isolate(3)
    c.tick_all(60)  # node 3 keeps pre-campaigning; pre-votes never win, term stays put
    assert c.nodes[3].term == 1
    c.heal()
    c.tick_all(30)
    assert c.nodes[1].role is Role.LEADER and c.nodes[1].term == 1
    assert c.nodes[3].lead == 1


def test_without_pre_vote_a_rejoining_node_bumps_terms() -> None:
    # The counterpart showing pre-vote is what keeps terms stable.
    c = Cluster(3, config=Config(pre_vote=False, check_quorum=False))
    elect(c, 1)
    c.isolate(3)
    c.tick_all(60)
    assert c.nodes[3].term > 1


def test_check_quorum_steps_down_an_isolated_leader() -> None:
    c = Cluster(3)
    elect(c, 1)
    c.isolate(1)
    c.tick_all(2 * CFG.election_tick + 1)
    assert c.nodes[1].role is not Role.LEADER
    leaders = [i for i in (2, 3) if c.nodes[i].role is Role.LEADER]
    assert len(leaders) == 1 and c.nodes[leaders[0]].term == 2


def test_follower_with_live_leader_ignores_vote_requests() -> None:
    c = Cluster(3)
    elect(c, 1)
    f = c.nodes[2]
    f.step(Message(MsgType.VOTE, 2, 3, 7, log_term=9, index=9))
    assert (f.term == 1 and f.vote == 1) or f.vote == 0
    assert not [m for m in f.ready().messages if m.type is MsgType.VOTE_RESP]


# ---- replication --------------------------------------------------------------------------


def test_leader_appends_noop_and_replicates_proposals() -> None:
    c = Cluster(3)
    elect(c, 1)
    idx, term = c.nodes[1].propose(b"hello")
    assert (idx, term) == (2, 1)
    c.deliver()
    c.tick_all(1)  # a heartbeat carries the new commit index to the followers
    for i in c.ids:
        assert [e.data for e in c.applied[i]] == [b"", b"hello"]
        assert c.nodes[i].log.committed == 2


def test_propose_refused_when_not_leader_or_term_differs() -> None:
    c = Cluster(3)
    elect(c, 1)
    with pytest.raises(NotLeader) as ei:
        c.nodes[2].propose(b"x")
    assert ei.value.leader_hint == 1
    with pytest.raises(TermMismatch):
        c.nodes[1].propose(b"x", expected_term=7)
    assert c.nodes[1].propose(b"x", expected_term=1) == (2, 1)


def test_figure7_leader_brings_every_follower_log_in_line() -> None:
    # Raft paper Figure 7: the leader of term 8 and followers (a)-(f).
    leader = [1, 1, 1, 4, 4, 5, 5, 6, 6, 6]
    followers = [
        [1, 1, 1, 4, 4, 5, 5, 6, 6],  # (a) missing an entry
        [1, 1, 1, 4],  # (b) missing many
        [1, 1, 1, 4, 4, 5, 5, 6, 6, 6, 6],  # (c) an extra uncommitted entry
        [1, 1, 1, 4, 4, 5, 5, 6, 6, 6, 7, 7],  # (d) extra entries of a later term
        [1, 1, 1, 4, 4, 4, 4],  # (e) missing and conflicting
        [1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3],  # (f) many conflicting entries
    ]
    logs = {1: leader} | {i + 2: f for i, f in enumerate(followers)}
    c = Cluster(7, logs=logs, terms=dict.fromkeys(range(1, 8), 7))
    elect(c, 1)
    assert c.nodes[1].term == 8
    c.tick_all(3)
    want = [*leader, 8]
    for i in c.ids:
        assert c.terms(i) == want, f"node {i}"
        assert c.nodes[i].log.committed == 11


def test_figure8_old_term_entry_commits_only_with_a_current_term_entry() -> None:
    # S1 holds an index-2 entry of term 2; S5 holds a term-3 entry at index 2.
    logs = {1: [1, 2], 2: [1, 2], 3: [1], 4: [1], 5: [1, 3]}
    c = Cluster(5, logs=logs, terms={1: 3, 2: 3, 3: 3, 4: 3, 5: 3}, config=Config(pre_vote=False))
    s1 = c.nodes[1]
    for _ in range(s1.randomized_timeout):
        s1.tick()
    c.process(1)
    for m in c.outbox:
        if m.to in (2, 3, 4):
            c.nodes[m.to].step(m)
    c.outbox.clear()
    c.process_all()
    for m in list(c.outbox):
        if m.to == 1:
            s1.step(m)
    c.outbox.clear()
    c.process(1)
    c.outbox.clear()
    assert s1.role is Role.LEADER and s1.term == 4 and s1.log.last_index() == 3
    # S2 and S3 acknowledge index 2 (term 2): a majority holds it, yet it must not commit.
    s1.step(Message(MsgType.APP_RESP, 1, 2, 4, index=2))
    s1.step(Message(MsgType.APP_RESP, 1, 3, 4, index=2))
    assert s1.log.committed < 2
    # Once a current-term entry (index 3) is on a majority, both commit.
    s1.step(Message(MsgType.APP_RESP, 1, 2, 4, index=3))
    assert s1.log.committed < 2  # S1 and S2 hold index 3: not yet a majority of five
    s1.step(Message(MsgType.APP_RESP, 1, 3, 4, index=3))
    assert s1.log.committed == 3


def test_follower_rejects_append_whose_previous_entry_does_not_match() -> None:
    init = InitialState(HardState(2, 0, 0), Snapshot(), log_of([1, 2]))
    n = RaftNode(2, [1, 2, 3], init, random.Random(0), CFG)
    n.step(Message(MsgType.APP, 2, 1, 2, log_term=1, index=2))  # we have term 2 at index 2
    (m,) = n.ready().messages
    assert m.reject and m.reject_hint == 2
    n.step(Message(MsgType.APP, 2, 1, 2, log_term=2, index=3))  # beyond our log
    (m,) = n.ready().messages
    assert m.reject


def test_follower_truncates_only_from_first_conflict() -> None:
    init = InitialState(HardState(3, 0, 0), Snapshot(), log_of([1, 2, 2, 3]))
    n = RaftNode(2, [1, 2, 3], init, random.Random(0), CFG)
    entries = log_of([1, 2, 2, 3])
    # A stale, shorter append that matches must not truncate anything.
    n.step(Message(MsgType.APP, 2, 1, 3, log_term=1, index=1, entries=entries[1:2]))
    assert [e.term for e in n.log.entries] == [1, 2, 2, 3]
    # A conflict at index 3 replaces from there on.
    new = (entries[1], entries[2].__class__(3, 3, 1, b"new"))
    n.step(Message(MsgType.APP, 2, 1, 3, log_term=1, index=1, entries=new))
    assert [e.term for e in n.log.entries] == [1, 2, 3]
    rd = n.ready()
    assert [e.index for e in rd.entries] == [3]  # only the changed suffix is persisted


def test_follower_commit_is_min_of_leader_commit_and_last_new_entry() -> None:
    init = InitialState(HardState(2, 0, 0), Snapshot(), log_of([1, 1, 1, 1, 1]))
    n = RaftNode(2, [1, 2, 3], init, random.Random(0), CFG)
    ents = log_of([1, 1])
    n.step(Message(MsgType.APP, 2, 1, 2, log_term=0, index=0, entries=ents, commit=5))
    assert n.log.committed == 2  # not 5: the message proved only entries 1..2


def test_heartbeat_never_commits_a_followers_stale_entries() -> None:
    # Node 3 holds two term-1 entries nobody else has. Node 1 wins term 2 with node 2's
    # vote and commits its own entries 2..3 with node 2, while node 3 hears nothing but
    # the heartbeat: a heartbeat commit not capped at node 3's match would make node 3
    # commit (and apply) its stale entries at indexes the leader committed differently.
    c = Cluster(3, logs={1: [1], 2: [1], 3: [1, 1, 1]}, config=Config(pre_vote=False))
    c.cut(1, 3)
    c.cut(2, 3)
    elect(c, 1)
    leader = c.nodes[1]
    leader.propose(b"x")
    c.deliver()
    assert leader.log.committed == 3 and leader.prs[3].match == 0
    c.heal()
    c.process_all()
    c.outbox.clear()  # only the heartbeat reaches node 3
    for _ in range(c.config.heartbeat_tick):
        leader.tick()
    c.process(1)
    beats = [m for m in c.outbox if m.type is MsgType.HEARTBEAT and m.to == 3]
    assert beats
    c.outbox.clear()
    for m in beats:
        c.nodes[3].step(m)
    c.process(3)
    n3 = c.nodes[3]
    for i in range(1, n3.log.committed + 1):
        assert n3.log.term(i) == leader.log.term(i), (
            f"node 3 committed index {i} of term {n3.log.term(i)}; the leader's is term"
            f" {leader.log.term(i)}")
    assert [e.term for e in c.applied[3]] == [leader.log.term(e.index) for e in c.applied[3]]


def test_pipelining_is_bounded_by_max_inflight() -> None:
    cfg = Config(max_inflight=4, max_msg_bytes=1)
    c = Cluster(3, config=cfg)
    elect(c, 1)
    leader = c.nodes[1]
    for i in range(20):
        leader.propose(b"x%d" % i)
    c.process(1)
    apps = [m for m in c.outbox if m.type is MsgType.APP and m.to == 2 and m.entries]
    assert len(apps) == 4
    c.deliver()
    c.tick_all(2)
    assert all(n.log.committed == 21 for n in c.nodes.values())


def test_duplicated_and_reordered_appends_are_harmless() -> None:
    c = Cluster(3)
    elect(c, 1)
    for i in range(5):
        c.nodes[1].propose(b"%d" % i)
    c.process(1)
    msgs = list(c.outbox)
    c.outbox.clear()
    for m in [*reversed(msgs), *msgs, *msgs]:
        c.nodes[m.to].step(m)
    c.deliver()
    c.tick_all(2)
    assert c.terms(2) == c.terms(1) == [1] * 6
    assert c.nodes[2].log.committed == 6


# ---- snapshots and transfer -------------------------------------------------------------


def test_compaction_and_snapshot_install_for_a_lagging_follower() -> None:
    c = Cluster(3)
    elect(c, 1)
    c.isolate(3)
    for i in range(10):
        c.nodes[1].propose(b"%d" % i)
    c.deliver()
    c.tick_all(1)
    leader = c.nodes[1]
    assert leader.log.committed == 11
    leader.compact(8, b"state@8")
    rd = c.process(1)
    assert rd is not None and rd.compacted == Snapshot(8, 1, b"state@8")
    assert leader.log.first_index == 9
    c.heal()
    c.tick_all(3)
    f = c.nodes[3]
    assert f.log.snapshot == Snapshot(8, 1, b"state@8")
    assert f.log.last_index() == 11 and f.log.committed == 11
    assert c.storages[3].snapshot.index == 8
    assert [e.index for e in c.applied[3]] == [1, 9, 10, 11]  # the no-op came before the cut
    c.restart(3)
    assert c.nodes[3].log.snapshot.index == 8 and c.nodes[3].log.last_index() == 11


def test_compact_refuses_unapplied_index() -> None:
    c = Cluster(3)
    elect(c, 1)
    c.nodes[1].propose(b"x")
    with pytest.raises(ValueError):
        c.nodes[1].compact(2, b"")


def test_leadership_transfer_via_timeout_now() -> None:
    c = Cluster(3)
    elect(c, 1)
    c.nodes[1].propose(b"x")
    c.deliver()
    c.nodes[1].transfer_leadership(3)
    with pytest.raises(TransferInProgress):
        c.nodes[1].propose(b"y")
    c.deliver()
    assert c.nodes[3].role is Role.LEADER and c.nodes[3].term == 2
    assert c.nodes[1].role is Role.FOLLOWER and c.nodes[1].lead == 3


def test_transfer_to_lagging_follower_catches_it_up_first() -> None:
    c = Cluster(3)
    elect(c, 1)
    c.cut(1, 2)
    for i in range(3):
        c.nodes[1].propose(b"%d" % i)
    c.deliver()
    c.heal()
    c.nodes[1].transfer_leadership(2)
    c.deliver()
    assert c.nodes[2].role is Role.LEADER
    assert c.terms(2)[:4] == [1, 1, 1, 1]


def test_restart_recovers_term_vote_and_log() -> None:
    c = Cluster(3)
    elect(c, 1)
    c.nodes[1].propose(b"x")
    c.deliver()
    c.restart(2)
    n = c.nodes[2]
    assert (n.term, n.vote) == (1, 1)
    assert n.log.last_index() == 2 and n.role is Role.FOLLOWER


def test_heartbeat_every_heartbeat_tick_keeps_the_leader() -> None:
    # The conformance harness's deployment (issue 14): a heartbeat every 3rd tick, election
    # timeout 10-20 ticks. The leader beats exactly once per 3 ticks to every follower, no
    # follower campaigns over 6 timeouts, and check-quorum still deposes a cut-off leader.
    c = Cluster(3, config=Config(election_tick=10, heartbeat_tick=3))
    elect(c, 1)
    c.deliver()
    term = c.nodes[1].term
    rounds = []
    for t in range(1, 61):
        for n in c.nodes.values():
            n.tick()
        c.process_all()
        beats = sorted(m.to for m in c.outbox if m.type is MsgType.HEARTBEAT)
        if beats:
            rounds.append((t, beats))
        c.deliver()
    assert rounds == [(t, [2, 3]) for t in range(3, 61, 3)]
    assert all(n.term == term for n in c.nodes.values())
    assert [n.role for n in c.nodes.values()] == [Role.LEADER, Role.FOLLOWER, Role.FOLLOWER]
    c.isolate(1)
    c.tick_all(2 * 10)
    assert c.nodes[1].role is not Role.LEADER
