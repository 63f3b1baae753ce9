"""The Raft checker's incremental log matching and leader completeness
(`impl/raft/invariants.py`) against their from-scratch forms.

Seeded faulty runs compare, after every event: every entry of every live log is in the
checker's (index, term) registry with its own type, data and previous term (nothing the
incremental check skipped was left unverified), and the pairwise comparison of live logs and
the whole-log leader completeness check (the checker's forms before it was incremental) pass
where it passed. Direct cases show each form fails on a seeded divergence, including one
behind an already verified index, which only the `RaftLog.rewrites` count brings back."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from epochgc.impl.raft.invariants import GroupHistory, InvariantChecker, InvariantViolation
from epochgc.impl.raft.messages import Entry, Snapshot
from epochgc.impl.raft.node import RaftNode, Role
from epochgc.impl.raft.raftlog import RaftLog
from epochgc.impl.raft.sim import Simulator
from tests.raft.helpers import faulty_run


def pairwise_log_matching(group: int, nodes: dict[int, tuple[int, RaftNode]]) -> None:
    """From scratch: two live logs that agree on the term at an index agree below it."""
    logs = [(nid, n.log) for nid, (_, n) in sorted(nodes.items())]
    for a in range(len(logs)):
        for b in range(a + 1, len(logs)):
            (ia, la), (ib, lb) = logs[a], logs[b]
            lo = max(la.first_index, lb.first_index)
            top = min(la.last_index(), lb.last_index())
            while top >= lo and la.term(top) != lb.term(top):
                top -= 1
            if top >= lo and la.slice(lo, top + 1) != lb.slice(lo, top + 1):
                raise InvariantViolation(f"log matching (pairwise): group {group} nodes {ia},"
                                         f" {ib} agree on the term at {top} but differ below")


def whole_leader_completeness(group: int, h: GroupHistory,
                              nodes: dict[int, tuple[int, RaftNode]]) -> None:
    """From scratch: every leader's log holds every entry committed in an earlier term."""
    for nid, (_, n) in nodes.items():
        if n.role is not Role.LEADER:
            continue
        for i in range(n.log.first_index, h.max_committed + 1):
            ct = h.commit_term.get(i)
            if ct is not None and ct[0] < n.term and n.log.term(i) != ct[1]:
                raise InvariantViolation(f"leader completeness (whole log): group {group}"
                                         f" leader {nid} lacks committed index {i}")


def _from_scratch(s: Simulator) -> int:
    """The from-scratch forms over every group; returns how many entries were covered."""
    assert s.checker is not None
    covered = 0
    by_group: dict[int, dict[int, tuple[int, RaftNode]]] = {}
    for g, nid, inc, n in s.live_replicas():
        by_group.setdefault(g, {})[nid] = (inc, n)
        h = s.checker.history(g)
        log = n.log
        for e in log.entries:
            got = h.entries.get((e.index, e.term))
            assert got == (e.type, e.data, log.term(e.index - 1)), (
                f"group {g} node {nid} entry {e.index}/{e.term} not verified: {got}")
            covered += 1
    for g, nodes in by_group.items():
        pairwise_log_matching(g, nodes)
        whole_leader_completeness(g, s.checker.history(g), nodes)
    return covered


def _run(seed: int, steps: int, disk: bool) -> int:
    covered = 0
    for s in faulty_run(seed, steps, disk):
        # A step that delivered nothing skips its check; the one check of the marks (what
        # every event's check does) then covers a proposal made before it too.
        s.check(touched=1)
        covered += _from_scratch(s)
    return covered


@pytest.mark.parametrize(("seed", "disk"), [(1, False), (2, False), (3, True)])
def test_incremental_checks_cover_what_the_from_scratch_ones_do(seed: int, disk: bool) -> None:
    assert _run(seed, 2500, disk) > 10_000


def _log(*entries: tuple[int, int, bytes], snap: tuple[int, int] = (0, 0)) -> RaftLog:
    return RaftLog(Snapshot(snap[0], snap[1], b""),
                   [Entry(i, t, 1, d) for i, t, d in entries], 0)


def _node(log: RaftLog, role: Role = Role.FOLLOWER, term: int = 3) -> RaftNode:
    return SimpleNamespace(log=log, role=role, term=term)  # type: ignore[return-value]


@pytest.mark.parametrize(("b_entries", "what"), [
    ([(1, 1, b"a"), (2, 1, b"X"), (3, 2, b"c")], "different entry"),
    ([(1, 1, b"a"), (2, 3, b"b"), (3, 2, b"c")], "different previous term"),
])
def test_a_divergence_below_a_shared_entry_fails_both_forms(
        b_entries: list[tuple[int, int, bytes]], what: str) -> None:
    a = _node(_log((1, 1, b"a"), (2, 1, b"b"), (3, 2, b"c")))
    b = _node(_log(*b_entries))
    nodes = {1: (1, a), 2: (1, b)}
    with pytest.raises(InvariantViolation, match="pairwise"):
        pairwise_log_matching(7, nodes)
    with pytest.raises(InvariantViolation, match=f"log matching: group 7 node 2 .*{what}"):
        InvariantChecker().check(7, nodes)


def test_a_rewrite_below_the_verified_index_is_verified_again() -> None:
    """Node 1's log is verified to index 3; a truncating append then replaces entry 2 with a
    different one of the same term. Only the rewrites count says index 2 must be looked at
    again (the log is the same object and no longer than before)."""
    c = InvariantChecker()
    a = _node(_log((1, 1, b"a"), (2, 1, b"b"), (3, 1, b"c")))
    c.check(7, {1: (1, a)})
    a.log.append([Entry(2, 1, 1, b"Z"), Entry(3, 1, 1, b"c")])
    with pytest.raises(InvariantViolation, match="node 1 holds index 2 term 1"):
        c.check(7, {1: (1, a)})


def test_a_leader_that_lost_a_committed_entry_fails_both_forms() -> None:
    c = InvariantChecker()
    old = _node(_log((1, 1, b"a"), (2, 1, b"b")), Role.LEADER, 1)
    old.log.commit_to(2)
    c.check(7, {1: (1, old)})  # index 1 and 2 committed in term 1
    new = _node(_log((1, 1, b"a"), (2, 1, b"b")), Role.LEADER, 2)
    c.check(7, {2: (1, new)})  # checked up to 2
    new.log.append([Entry(2, 2, 1, b"y")])  # a leader rewriting its own log: a bug
    nodes = {2: (1, new)}
    with pytest.raises(InvariantViolation, match="leader completeness"):
        whole_leader_completeness(7, c.history(7), nodes)
    with pytest.raises(InvariantViolation, match=r"leader 2 .* lacks committed index 2"):
        c.check(7, nodes)


def test_entries_committed_after_a_leader_was_checked_are_checked_on_it() -> None:
    """Leader 2 (term 2) is checked up to index 2; the history then records 3 as committed
    in term 1, and leader 2's log gains a different entry at 3: found at once, from the
    index after the one it was checked up to."""
    c = InvariantChecker()
    old = _node(_log((1, 1, b"a"), (2, 1, b"b"), (3, 1, b"c"), (4, 1, b"d")), Role.LEADER, 1)
    old.log.commit_to(2)
    c.check(7, {1: (1, old)})
    new = _node(_log((1, 1, b"a"), (2, 1, b"b")), Role.LEADER, 2)
    c.check(7, {2: (1, new)})
    old.log.commit_to(3)
    c.check(7, {1: (1, old)})
    new.log.append([Entry(3, 2, 1, b"x")])  # not a rewrite
    with pytest.raises(InvariantViolation, match="leader completeness"):
        whole_leader_completeness(7, c.history(7), {2: (1, new)})
    with pytest.raises(InvariantViolation, match=r"leader 2 .* lacks committed index 3"):
        c.check(7, {2: (1, new)})
