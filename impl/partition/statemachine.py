"""The Raft state machine of one partition: every replica applies the log in order with the
model's functions (`model.partition`), so the window rules exist in one place only.

Besides the model's persisted fields it keeps what reads and the reconciler need: the accepted
placeholders not yet reconciled and the L1 segments. The leader's seen window is NOT here: it
is in-memory leader state (`impl.partition.fence`) and is lost on restart by design.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from epochgc.impl.partition import commands as c
from epochgc.impl.raft.messages import Entry, Snapshot
from epochgc.model import partition as mp
from epochgc.model.variants import REFERENCE, Variant

_SNAP_MAGIC = b"PSM1"
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _flat(obj: Any) -> dict[str, Any]:
    """`dataclasses.asdict` for the snapshot's dataclasses, whose fields are all ints, strs
    or None (nothing to copy deeply): the same dict, without asdict's recursion, which was
    most of a snapshot's cost (the conformance harness snapshots a state machine each time
    it changes)."""
    names = _FIELD_NAMES.get(type(obj))
    if names is None:
        names = _FIELD_NAMES[type(obj)] = tuple(f.name for f in fields(obj))
    return {n: getattr(obj, n) for n in names}


@dataclass(frozen=True)
class AcceptedPlaceholder:
    log_index: int
    epoch: int
    key: str
    start: int
    end: int
    base: int  # record offset of the first record
    count: int

    @property
    def last(self) -> int:
        return self.base + self.count - 1


@dataclass(frozen=True)
class L1Segment:
    base: int
    count: int
    key: str


@dataclass(frozen=True)
class PlaceholderResult:
    """What applying a placeholder decided: accepted (with its first record offset) or
    rejected at apply time with the applied window it fell below."""

    accepted: bool
    base: int
    window: tuple[int, int] | None
    deleted: bool = False  # refused because the partition was deleted (R34)


@dataclass(frozen=True)
class ApplyEvent:
    """One apply decision, for metrics and the conformance harness."""

    index: int
    command: c.Command
    result: PlaceholderResult | None
    state: mp.PartitionState


@dataclass
class PartitionStateMachine:
    variant: Variant = REFERENCE
    on_apply: Callable[[ApplyEvent], None] | None = None
    state: mp.PartitionState = mp.INITIAL
    placeholders: list[AcceptedPlaceholder] = field(default_factory=list)
    l1: list[L1Segment] = field(default_factory=list)
    next_offset: int = 0  # the next record offset an accepted placeholder gets
    last_index: int = 0  # the last applied log index
    # Set by the broker the moment its controller replica applies the partition's deletion
    # (before the group is removed): from then on a placeholder is refused at apply (R34).
    deleted: bool = False
    # Every epoch this incarnation accepts is at least its creation revision (A2): a
    # placeholder below it was stamped for an earlier, deleted incarnation of the same name
    # (R35) and is refused at apply, as on a deleted partition.
    creation_revision: int = 0

    # ---- Raft StateMachine ----------------------------------------------------------------

    def apply(self, entry: Entry) -> PlaceholderResult | None:
        cmd = c.decode(entry.data)
        result: PlaceholderResult | None = None
        s = self.state
        if self.deleted:
            # The partition is gone: nothing changes any more, a placeholder is refused.
            if isinstance(cmd, c.Placeholder):
                result = PlaceholderResult(False, -1, mp.window(s), deleted=True)
        elif isinstance(cmd, c.Placeholder) and cmd.epoch < self.creation_revision:
            # Stamped below this incarnation's creation revision (A2), e.g. for an earlier,
            # deleted incarnation of the name (R35): refused as stale, nothing changes.
            result = PlaceholderResult(False, -1, mp.window(s))
        elif isinstance(cmd, c.Placeholder):
            window = mp.window(s)
            applied = mp.apply_placeholder(s, cmd.epoch, entry.index, self.variant)
            self.state = applied.state
            if applied.accepted:
                self.placeholders.append(
                    AcceptedPlaceholder(
                        entry.index, cmd.epoch, cmd.key, cmd.start, cmd.end,
                        self.next_offset, cmd.count,
                    )
                )
                result = PlaceholderResult(True, self.next_offset, mp.window(self.state))
                self.next_offset += cmd.count
            else:
                result = PlaceholderResult(False, -1, window)
        elif isinstance(cmd, c.AdvanceEpoch):
            self.state = mp.apply_advance_epoch(s, cmd.epoch, entry.index, self.variant)
        elif isinstance(cmd, c.AdvanceReconciled):
            self.state = mp.apply_reconciled(s, cmd.lrlo, cmd.lro)
            if cmd.l1_key and cmd.l1_count > 0:
                self.l1.append(L1Segment(cmd.l1_base, cmd.l1_count, cmd.l1_key))
            lro, lrlo = self.state.last_reconciled_offset, self.state.last_reconciled_log_offset
            # Keep a placeholder until both its records and its log entry are reconciled.
            self.placeholders = [
                p for p in self.placeholders if not (p.last <= lro and p.log_index <= lrlo)
            ]
        elif isinstance(cmd, c.SetStartOffset):
            self.state = mp.apply_set_start_offset(s, cmd.start_offset)
        elif isinstance(cmd, c.AdvanceGcEpoch):
            self.state = mp.apply_advance_gc_epoch(s, cmd.epoch, entry.index)
        self.last_index = entry.index
        if self.on_apply is not None:
            self.on_apply(ApplyEvent(entry.index, cmd, result, self.state))
        return result

    def snapshot(self) -> bytes:
        return self.encode(_flat)

    def encode(self, as_dict: Callable[[Any], dict[str, Any]]) -> bytes:
        """The snapshot, with `as_dict` turning each dataclass into a dict (`_flat`; a test
        passes `dataclasses.asdict`, the definition it must equal)."""
        doc = {
            "state": as_dict(self.state),
            "placeholders": [as_dict(p) for p in self.placeholders],
            "l1": [as_dict(s) for s in self.l1],
            "next_offset": self.next_offset,
            "last_index": self.last_index,
        }
        return _SNAP_MAGIC + json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    def restore(self, snapshot: Snapshot) -> None:
        if snapshot.index == 0:
            self.state, self.placeholders, self.l1 = mp.INITIAL, [], []
            self.next_offset = self.last_index = 0
            return
        if not snapshot.data.startswith(_SNAP_MAGIC):
            raise ValueError(f"partition snapshot at index {snapshot.index}: bad magic")
        doc = json.loads(snapshot.data[len(_SNAP_MAGIC) :])
        state = mp.PartitionState(**doc["state"])
        if not mp.well_formed(state):
            raise ValueError(f"partition snapshot at index {snapshot.index}: ill-formed {state}")
        self.state = state
        self.placeholders = [AcceptedPlaceholder(**p) for p in doc["placeholders"]]
        self.l1 = [L1Segment(**s) for s in doc["l1"]]
        self.next_offset = int(doc["next_offset"])
        self.last_index = int(doc["last_index"])

    # ---- queries --------------------------------------------------------------------------

    def inactive_epoch(self) -> int | None:
        return mp.inactive_epoch(self.state, self.variant)

    def unreconciled(self) -> list[AcceptedPlaceholder]:
        """Accepted placeholders past LRLO, in log order (the reconciler's work list)."""
        lrlo = self.state.last_reconciled_log_offset
        return [p for p in self.placeholders if p.log_index > lrlo]

    def housekeeping_lrlo(self) -> int:
        """How far LRLO may move over command entries: up to, never past, the entry before
        the next unreconciled placeholder (or the last applied index if there is none)."""
        pending = self.unreconciled()
        return pending[0].log_index - 1 if pending else self.last_index

    def locate(self, offset: int) -> tuple[str, L1Segment | AcceptedPlaceholder] | None:
        """Where record `offset` lives: ("l1", segment) at or below LRO, ("l0", placeholder)
        above it; None if no accepted record has that offset."""
        if offset <= self.state.last_reconciled_offset:
            for seg in self.l1:
                if seg.base <= offset < seg.base + seg.count:
                    return ("l1", seg)
            return None
        for p in self.placeholders:
            if p.base <= offset <= p.last:
                return ("l0", p)
        return None
