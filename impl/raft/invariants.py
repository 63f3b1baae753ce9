"""Raft safety properties, checked against a set of live nodes after every simulated step.

Election safety, log matching, leader completeness, state-machine safety, monotone commit and
survival of every acknowledged proposal. A violation raises InvariantViolation with enough
detail to replay the seed.

Log matching is checked in its per-entry form: an (index, term) pair names one entry for the
group's whole history (the leader of that term appended it once and never rewrites its own
log), so every entry any log holds must carry the same type, data and previous term as the
first entry seen under its pair. Two logs that hold the same pair then agree on every entry
below it by induction on the index, which is what the pairwise comparison of live logs
checks; the per-entry form also compares logs with ones that are gone (a crashed node's, a
truncated suffix). It is incremental: a log whose `RaftLog.rewrites` count stands still only
gained entries at its end since it was last verified, so only those are verified.
Leader completeness is incremental the same way: a leader's log below what it was checked up
to cannot change while it leads without a rewrite. `tests/raft/test_invariants_incremental.py`
runs the from-scratch pairwise forms beside these after every event.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from epochgc.impl.raft.messages import Entry
from epochgc.impl.raft.node import RaftNode, Role
from epochgc.impl.raft.raftlog import RaftLog


class InvariantViolation(AssertionError):
    pass


@dataclass
class GroupHistory:
    leaders: dict[int, int] = field(default_factory=dict)  # term -> leader id
    applied: dict[int, tuple[int, bytes]] = field(default_factory=dict)  # index -> (term, data)
    chain: dict[int, bytes] = field(default_factory=dict)  # index -> state digest after it
    # index -> (term of the leader that committed it, term of the entry)
    commit_term: dict[int, tuple[int, int]] = field(default_factory=dict)
    max_committed: int = 0
    acked: dict[int, tuple[int, bytes]] = field(default_factory=dict)  # acknowledged proposals
    # (index, term) -> (type, data, previous entry's term) of the entry first seen there,
    # and the node whose log held it (for the message).
    entries: dict[tuple[int, int], tuple[int, bytes, int]] = field(default_factory=dict)
    entry_seen_on: dict[tuple[int, int], int] = field(default_factory=dict)


class InvariantChecker:
    def __init__(self) -> None:
        self.groups: dict[int, GroupHistory] = {}
        self._commit_seen: dict[tuple[int, int, int], int] = {}  # (node, incarnation, g)
        # (node, incarnation, g) -> (log, its rewrites, last index verified): log matching
        self._verified: dict[tuple[int, int, int], tuple[RaftLog, int, int]] = {}
        # (node, incarnation, g) -> (log, term led, its rewrites, index checked up to):
        # leader completeness
        self._complete: dict[tuple[int, int, int], tuple[RaftLog, int, int, int]] = {}

    def history(self, group: int) -> GroupHistory:
        h = self.groups.get(group)  # not setdefault: that builds a GroupHistory every call
        if h is None:
            h = self.groups[group] = GroupHistory()
        return h

    # ---- event hooks -----------------------------------------------------------------------

    def on_apply(self, node_id: int, group: int, entry: Entry, digest: bytes | None) -> None:
        """digest: the state machine's state after the entry, if it can tell (compared too)."""
        h = self.history(group)
        seen = h.applied.setdefault(entry.index, (entry.term, entry.data))
        if seen != (entry.term, entry.data):
            raise InvariantViolation(
                f"state machine safety: node {node_id} group {group} applied term {entry.term}"
                f" at index {entry.index}, another node applied term {seen[0]}"
            )
        prev = digest if digest is None else h.chain.setdefault(entry.index, digest)
        if prev != digest:
            raise InvariantViolation(
                f"state machine safety: node {node_id} group {group} state at index"
                f" {entry.index} differs from another node's"
            )
        acked = h.acked.get(entry.index)
        if acked is not None and acked != (entry.term, entry.data):
            raise InvariantViolation(
                f"acknowledged proposal lost: group {group} index {entry.index}"
            )

    def on_ack(self, group: int, index: int, term: int, data: bytes) -> None:
        h = self.history(group)
        h.acked[index] = (term, data)
        seen = h.applied.get(index)
        if seen is not None and seen != (term, data):
            raise InvariantViolation(f"acknowledged proposal lost: group {group} index {index}")

    # ---- whole-state checks ----------------------------------------------------------------

    def check(self, group: int, nodes: dict[int, tuple[int, RaftNode]]) -> None:
        """nodes: node id -> (incarnation, RaftNode) for every live node of the group."""
        h = self.history(group)
        for nid, (inc, n) in nodes.items():
            if n.role is Role.LEADER:
                prev = h.leaders.setdefault(n.term, nid)
                if prev != nid:
                    raise InvariantViolation(
                        f"election safety: group {group} term {n.term} has leaders {prev}, {nid}"
                    )
                for i in range(max(h.max_committed + 1, n.log.first_index), n.log.committed + 1):
                    h.commit_term[i] = (n.term, n.log.term(i) or 0)
                h.max_committed = max(h.max_committed, n.log.committed)
            key = (nid, inc, group)
            if n.log.committed < self._commit_seen.get(key, 0):
                raise InvariantViolation(f"commit index went back on node {nid} group {group}")
            self._commit_seen[key] = n.log.committed
        for nid, (inc, n) in nodes.items():
            self._check_entries(group, h, nid, inc, n.log)
        for nid, (inc, n) in nodes.items():
            if n.role is Role.LEADER:
                self._check_leader_completeness(group, h, nid, inc, n)

    def _check_entries(self, group: int, h: GroupHistory, nid: int, inc: int,
                       log: RaftLog) -> None:
        """Log matching, per entry: each entry appended to this log since it was last
        verified has the type, data and previous term of every entry seen at its (index,
        term) before, in any log of the group."""
        key = (nid, inc, group)
        done = self._verified.get(key)
        lo = log.first_index
        if done is not None and done[0] is log and done[1] == log.rewrites:
            lo = max(lo, done[2] + 1)
        last = log.last_index()
        if lo <= last:
            seen, on = h.entries, h.entry_seen_on
            prev = log.term(lo - 1) or 0
            for e in log.entries[lo - log.first_index :]:
                pair = (e.index, e.term)
                want = (e.type, e.data, prev)
                got = seen.get(pair)
                if got is None:
                    seen[pair] = want
                    on[pair] = nid
                elif got != want:
                    what = "previous term" if got[:2] == want[:2] else "entry"
                    raise InvariantViolation(
                        f"log matching: group {group} node {nid} holds index {e.index} term"
                        f" {e.term} with a different {what} than node {on[pair]}'s log had"
                        f" ({want} against {got})"
                    )
                prev = e.term
        self._verified[key] = (log, log.rewrites, last)

    def _check_leader_completeness(self, group: int, h: GroupHistory, nid: int, inc: int,
                                   n: RaftNode) -> None:
        """The leader's log holds every entry committed in an earlier term (checked from
        where it was last checked while this log led in this term, unless it was rewritten)."""
        log = n.log
        key = (nid, inc, group)
        done = self._complete.get(key)
        lo = log.first_index
        if done is not None and done[0] is log and done[1] == n.term and done[2] == log.rewrites:
            lo = max(lo, done[3] + 1)
        for i in range(lo, h.max_committed + 1):
            ct = h.commit_term.get(i)
            if ct is None or ct[0] >= n.term:
                continue
            if log.term(i) != ct[1]:
                raise InvariantViolation(
                    f"leader completeness: group {group} leader {nid} (term {n.term})"
                    f" lacks committed index {i}"
                )
        self._complete[key] = (log, n.term, log.rewrites, max(lo - 1, h.max_committed))

    def check_acked_applied(self, group: int, applied_index: dict[int, int]) -> None:
        """At quiescence: every acknowledged proposal was applied by every given node."""
        h = self.history(group)
        for index, (term, data) in h.acked.items():
            if h.applied.get(index) != (term, data):
                raise InvariantViolation(f"acknowledged index {index} never applied")
            for nid, applied in applied_index.items():
                if applied < index:
                    raise InvariantViolation(f"node {nid} has not applied acked index {index}")
