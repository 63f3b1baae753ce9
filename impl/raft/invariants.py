"""Raft safety properties, checked against a set of live nodes after every simulated step.

Election safety, log matching, leader completeness, state-machine safety, monotone commit and
survival of every acknowledged proposal. A violation raises InvariantViolation with enough
detail to replay the seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from impl.raft.messages import Entry
from impl.raft.node import RaftNode, Role


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


class InvariantChecker:
    def __init__(self) -> None:
        self.groups: dict[int, GroupHistory] = {}
        self._commit_seen: dict[tuple[int, int, int], int] = {}  # (node, incarnation, g)

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
        self._check_log_matching(group, nodes)
        self._check_leader_completeness(group, h, nodes)

    @staticmethod
    def _check_log_matching(group: int, nodes: dict[int, tuple[int, RaftNode]]) -> None:
        logs = [(nid, n.log) for nid, (_, n) in sorted(nodes.items())]
        for a in range(len(logs)):
            for b in range(a + 1, len(logs)):
                (ia, la), (ib, lb) = logs[a], logs[b]
                lo = max(la.first_index, lb.first_index)
                hi = min(la.last_index(), lb.last_index())
                top = hi
                while top >= lo and la.term(top) != lb.term(top):
                    top -= 1
                if top < lo:
                    continue
                if la.slice(lo, top + 1) != lb.slice(lo, top + 1):
                    raise InvariantViolation(
                        f"log matching: group {group} nodes {ia}, {ib} agree on the term at"
                        f" {top} but differ below it"
                    )

    @staticmethod
    def _check_leader_completeness(
        group: int, h: GroupHistory, nodes: dict[int, tuple[int, RaftNode]]
    ) -> None:
        for nid, (_, n) in nodes.items():
            if n.role is not Role.LEADER:
                continue
            for i in range(n.log.first_index, h.max_committed + 1):
                ct = h.commit_term.get(i)
                if ct is None or ct[0] >= n.term:
                    continue
                if n.log.term(i) != ct[1]:
                    raise InvariantViolation(
                        f"leader completeness: group {group} leader {nid} (term {n.term})"
                        f" lacks committed index {i}"
                    )

    def check_acked_applied(self, group: int, applied_index: dict[int, int]) -> None:
        """At quiescence: every acknowledged proposal was applied by every given node."""
        h = self.history(group)
        for index, (term, data) in h.acked.items():
            if h.applied.get(index) != (term, data):
                raise InvariantViolation(f"acknowledged index {index} never applied")
            for nid, applied in applied_index.items():
                if applied < index:
                    raise InvariantViolation(f"node {nid} has not applied acked index {index}")
