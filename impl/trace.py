"""NDJSON trace of window-state transitions and decisions, for `epochgc check-trace`.

Every node appends one JSON object per line to the same file (O_APPEND, one `write` per
line, so lines from several processes never interleave within a line). Two kinds of record:

  {"v": 1, "kind": "apply", "node": 1, "run": "<pid>-<ns>", "seq": 7, "partition": "t/0",
   "index": 12, "command": {"type": "placeholder", "epoch": 5, ...},
   "accepted": true | false | null, "state": {<PartitionState fields>}}
  {"v": 1, "kind": "fence", "node": 1, "run": ..., "seq": ..., "partition": "t/0",
   "term": 3, "epoch": 5, "admitted": true, "decision": "in_window|above_window|below_window",
   "window": [lo, hi] | null, "seen_before": [term, previous, max] | null,
   "seen_after": [term, previous, max] | null, "applied": {<PartitionState fields>}}

`apply` is written by every replica after it applies a committed entry (its state after);
`fence` by a leader for each fence decision, with the applied state it decided on. The
writer is attached through the broker's observer hooks (`Hooks`), so neither the fence nor
the state machine knows about it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from epochgc.impl.partition import commands as c
from epochgc.model.fence import SeenWindow
from epochgc.model.partition import PartitionState

VERSION = 1

_COMMAND_TYPES: dict[type, str] = {
    c.Placeholder: "placeholder",
    c.AdvanceEpoch: "advance_epoch",
    c.AdvanceReconciled: "advance_reconciled",
    c.SetStartOffset: "set_start_offset",
    c.Barrier: "barrier",
    c.AdvanceGcEpoch: "advance_gc_epoch",
}


def encode_state(s: PartitionState) -> dict[str, Any]:
    return asdict(s)


def encode_seen(s: SeenWindow | None) -> list[int] | None:
    return None if s is None else [s.term, s.previous, s.max]


def encode_command(cmd: object) -> dict[str, Any]:
    doc: dict[str, Any] = {"type": _COMMAND_TYPES.get(type(cmd), type(cmd).__name__)}
    if hasattr(cmd, "__dataclass_fields__"):
        doc.update(asdict(cmd))  # type: ignore[call-overload]
    return doc


class TraceWriter:
    def __init__(self, path: str | os.PathLike[str], node: int) -> None:
        self.path = os.fspath(path)
        self.node = node
        self.run = f"{os.getpid()}-{time.time_ns()}"
        self.seq = 0
        self._lock = threading.Lock()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, kind: str, partition: str, body: dict[str, Any]) -> None:
        with self._lock:
            self.seq += 1
            rec = {"v": VERSION, "kind": kind, "node": self.node, "run": self.run,
                   "seq": self.seq, "partition": partition, **body}
            line = json.dumps(rec, sort_keys=True, separators=(",", ":")) + "\n"
            os.write(self._fd, line.encode())

    def fence(self, partition: str, d: Any, applied: PartitionState) -> None:
        """`d`: an `impl.partition.fence.FenceDecision`."""
        self.write("fence", partition, {
            "term": d.term, "epoch": d.epoch, "admitted": d.admitted, "decision": d.kind,
            "window": None if d.window is None else list(d.window),
            "seen_before": encode_seen(d.seen_before), "seen_after": encode_seen(d.seen_after),
            "applied": encode_state(applied),
        })

    def apply(self, partition: str, ev: Any) -> None:
        """`ev`: an `impl.partition.statemachine.ApplyEvent`."""
        self.write("apply", partition, {
            "index": ev.index, "command": encode_command(ev.command),
            "accepted": None if ev.result is None else ev.result.accepted,
            "state": encode_state(ev.state),
        })

    def close(self) -> None:
        os.close(self._fd)


def broker_hooks(writer: TraceWriter, broker: Callable[[], Any]) -> Any:
    """Observer hooks for `impl.broker.broker.Broker` that write the trace. `broker()`
    returns the broker (created after its hooks), whose replica state a fence decided on."""
    from epochgc.impl.broker.broker import Hooks

    def incarnation(name: str) -> str:
        # A re-created partition is a new one (SPEC R35): its records get their own name,
        # `NAME@<creation revision>`, so the check replays each incarnation from the start.
        b = broker()
        if not b.controller.ever_deleted(name):
            return name
        return f"{name}@{b.replicas[name].info.creation_revision}"

    def on_fence(node: int, name: str, d: Any) -> None:
        writer.fence(incarnation(name), d, broker().replicas[name].sm.state)

    def on_apply(node: int, name: str, ev: Any) -> None:
        writer.apply(incarnation(name), ev)

    return Hooks(on_fence=on_fence, on_apply=on_apply)
