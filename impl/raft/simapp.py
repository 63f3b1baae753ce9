"""DigestStateMachine: the simulator's own application, a hash chain of every entry it applied
(two replicas agree on the digest at an index iff they applied the same entries up to it)."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable

from epochgc.impl.raft.messages import Entry, Snapshot

_SNAP = struct.Struct(">Q32s")


class DigestStateMachine:
    """A state machine whose state is a hash chain of everything applied: two replicas agree
    on the digest at an index iff they applied the same entries up to it."""

    def __init__(self, on_apply: Callable[[Entry, bytes], None] | None = None) -> None:
        self.index = 0
        self.digest = bytes(32)
        self.on_apply = on_apply
        self.count = 0

    def apply(self, entry: Entry) -> bytes:
        h = hashlib.sha256(self.digest)
        h.update(struct.pack(">QQI", entry.index, entry.term, entry.type))
        h.update(entry.data)
        self.digest = h.digest()
        self.index = entry.index
        self.count += 1
        if self.on_apply is not None:
            self.on_apply(entry, self.digest)
        return self.digest

    def snapshot(self) -> bytes:
        return _SNAP.pack(self.index, self.digest)

    def restore(self, snapshot: Snapshot) -> None:
        if snapshot.index == 0:
            self.index, self.digest = 0, bytes(32)
        else:
            self.index, self.digest = _SNAP.unpack(snapshot.data)
