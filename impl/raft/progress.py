"""The leader's view of one follower (etcd-raft's Progress): probe, replicate or snapshot.

Probe: one append in flight until the follower answers (finding where logs agree).
Replicate: optimistic pipelining, bounded by `max_inflight` unacknowledged append messages.
Snapshot: waiting for the follower to install a snapshot; appends are paused.
"""

from __future__ import annotations

from collections import deque
from enum import Enum


class ProgressState(Enum):
    PROBE = "probe"
    REPLICATE = "replicate"
    SNAPSHOT = "snapshot"


class Progress:
    __slots__ = (
        "inflight",
        "match",
        "max_inflight",
        "next",
        "pending_snapshot",
        "probe_sent",
        "recent_active",
        "state",
    )

    def __init__(self, next_index: int, max_inflight: int) -> None:
        self.match = 0
        self.next = next_index
        self.state = ProgressState.PROBE
        self.probe_sent = False
        self.pending_snapshot = 0
        self.recent_active = False
        self.max_inflight = max_inflight
        self.inflight: deque[int] = deque()  # last index of each unacknowledged append

    def become_probe(self) -> None:
        if self.state is ProgressState.SNAPSHOT:
            self.next = max(self.match + 1, self.pending_snapshot + 1)
        else:
            self.next = self.match + 1
        self._reset(ProgressState.PROBE)

    def become_replicate(self) -> None:
        self.next = self.match + 1
        self._reset(ProgressState.REPLICATE)

    def become_snapshot(self, index: int) -> None:
        self._reset(ProgressState.SNAPSHOT)
        self.pending_snapshot = index

    def _reset(self, state: ProgressState) -> None:
        self.state = state
        self.probe_sent = False
        self.pending_snapshot = 0
        self.inflight.clear()

    def maybe_update(self, index: int) -> bool:
        """An acknowledgement up to index arrived; True if match moved."""
        updated = index > self.match
        if updated:
            self.match = index
            self.probe_sent = False
        self.next = max(self.next, index + 1)
        return updated

    def maybe_decr_to(self, rejected: int, hint: int) -> bool:
        """A rejection of the append whose previous index was `rejected`; False if stale."""
        if self.state is ProgressState.REPLICATE:
            if rejected <= self.match:
                return False
            self.next = self.match + 1
            return True
        if self.next - 1 != rejected:
            return False
        self.next = max(min(rejected, hint + 1), self.match + 1, 1)
        self.probe_sent = False
        return True

    def sent_entries(self, last: int) -> None:
        if self.state is ProgressState.REPLICATE:
            self.next = last + 1
            self.inflight.append(last)

    def free_inflight_le(self, index: int) -> None:
        while self.inflight and self.inflight[0] <= index:
            self.inflight.popleft()

    def is_paused(self) -> bool:
        if self.state is ProgressState.PROBE:
            return self.probe_sent
        if self.state is ProgressState.REPLICATE:
            return len(self.inflight) >= self.max_inflight
        return True
