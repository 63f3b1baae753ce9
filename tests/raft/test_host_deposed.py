"""Host level (issue 16): a deposed leader's pending proposal whose index is filled by
another term's entry must fail for its proposer, never complete with that entry's result.

Driven message by message so that the step-down, the overwrite and the commit of the other
term's entry all arrive in ONE Ready (the order that bypasses the deposed-leader sweep,
which only runs after the Ready's entries are applied)."""

from __future__ import annotations

import random

from epochgc.impl.raft.host import MultiRaftHost, Overwritten, ProposalFailed
from epochgc.impl.raft.messages import ENTRY_NORMAL, Entry, Message, MsgType, Snapshot
from epochgc.impl.raft.node import Config
from epochgc.impl.raft.storage import MemStorage

G = 1


class Recorder:
    """A state machine that returns what it applied (so a wrong completion is visible)."""

    def __init__(self) -> None:
        self.applied: list[bytes] = []

    def apply(self, entry: Entry) -> bytes:
        self.applied.append(entry.data)
        return entry.data

    def snapshot(self) -> bytes:
        return b""

    def restore(self, snapshot: Snapshot) -> None:
        self.applied = []


def leader_host() -> tuple[MultiRaftHost, Recorder, list[tuple[int, Message]]]:
    sent: list[tuple[int, Message]] = []
    host = MultiRaftHost(1, lambda to, g, m: sent.append((to, m)), random.Random(1),
                         Config(pre_vote=False, check_quorum=False))
    sm = Recorder()
    host.add_group(G, [1, 2, 3], MemStorage(), sm)
    for _ in range(40):  # campaign
        host.tick()
        host.process_ready()
        if host.groups[G].node.term > 0:
            break
    term = host.term(G)
    assert term == 1
    host.receive(G, Message(MsgType.VOTE_RESP, to=1, frm=2, term=term))
    host.process_ready()
    assert host.is_leader(G)
    # Commit the leader's empty entry (index 1) with node 2's acknowledgement.
    host.receive(G, Message(MsgType.APP_RESP, to=1, frm=2, term=term, index=1))
    host.process_ready()
    assert host.groups[G].node.log.committed == 1
    return host, sm, sent


def test_pending_proposal_overwritten_by_another_terms_entry_fails() -> None:
    host, sm, _ = leader_host()
    p = host.propose(G, b"X")
    host.process_ready()
    assert (p.index, p.term, p.done) == (2, 1, False)
    # Node 2 won term 2 without X and committed its own entry Y at index 2.
    host.receive(G, Message(
        MsgType.APP, to=1, frm=2, term=2, log_term=1, index=1,
        entries=(Entry(2, 2, ENTRY_NORMAL, b"Y"),), commit=2,
    ))
    host.process_ready()
    assert sm.applied == [b"Y"]
    assert not host.is_leader(G) and host.term(G) == 2
    assert p.done
    assert p.result is None, f"the proposer of X got Y's result {p.result!r}"
    assert isinstance(p.error, ProposalFailed) and isinstance(p.error, Overwritten), p.error


def test_pending_proposal_of_the_same_term_completes() -> None:
    """The other side: the entry at the index is the proposal's own (same term)."""
    host, sm, _ = leader_host()
    p = host.propose(G, b"X")
    host.process_ready()
    host.receive(G, Message(MsgType.APP_RESP, to=1, frm=2, term=1, index=2))
    host.process_ready()
    assert p.done and p.error is None and p.result == b"X" and sm.applied == [b"X"]


def test_a_leader_reads_current_only_once_it_applied_what_it_committed() -> None:
    """Issue 42's last survivor, `reads-current-ignores-applied`: between the step that
    raises the commit index (an append response) and the Ready that applies it, the leader's
    state machine is behind its own commit: a read served then misses a committed write."""
    host, sm, _ = leader_host()
    assert host.reads_current(G)
    host.propose(G, b"X")
    host.process_ready()
    host.receive(G, Message(MsgType.APP_RESP, to=1, frm=2, term=1, index=2))
    assert host.groups[G].node.log.committed == 2 and host.applied_index(G) == 1
    assert not host.reads_current(G), "a read now would miss committed entry 2"
    host.process_ready()
    assert sm.applied[-1] == b"X" and host.reads_current(G)
