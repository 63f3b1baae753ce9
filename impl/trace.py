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

A write that fails (the trace's file system full, the file at the process's size limit)
stops the trace and nothing else (newuser18 U7: the OSError raised inside Raft's flush and
the fence, and the node stopped serving). The trace is an observation aid: the node logs one
line, cuts the torn record so the file ends with whole records (`epochgc check-trace` reads
it as a trace that ends early), and says it in its status answer (`cluster status`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from epochgc.impl.partition import commands as c
from epochgc.model.fence import SeenWindow
from epochgc.model.partition import PartitionState

VERSION = 1

log = logging.getLogger("epochgc.trace")

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


@dataclass(frozen=True)
class TraceStopped:
    """Why and where a node's trace stopped: `record` is its `seq` that could not be
    written (the file holds this node's records before it, whole)."""

    path: str
    record: int
    error: str  # the write's error in words ("File too large"), and a torn tail left, if any

    def doc(self) -> dict[str, object]:
        return {"path": self.path, "record": self.record, "error": self.error}


class TraceWriter:
    def __init__(self, path: str | os.PathLike[str], node: int) -> None:
        self.path = os.fspath(path)
        self.node = node
        self.run = f"{os.getpid()}-{time.time_ns()}"
        self.seq = 0
        self.stopped: TraceStopped | None = None
        self._lock = threading.Lock()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, kind: str, partition: str, body: dict[str, Any]) -> None:
        """Append one record; never raises for the file (a failed write stops the trace)."""
        with self._lock:
            if self.stopped is not None:
                return
            self.seq += 1
            rec = {"v": VERSION, "kind": kind, "node": self.node, "run": self.run,
                   "seq": self.seq, "partition": partition, **body}
            line = json.dumps(rec, sort_keys=True, separators=(",", ":")) + "\n"
            self._append(line.encode())

    def _append(self, data: bytes) -> None:
        """write(2): "The number of bytes written may be less than count if, for example,
        there is insufficient space on the underlying physical medium, or the RLIMIT_FSIZE
        resource limit is encountered"; the next write then fails: EFBIG ("exceeds ... the
        process's file size limit"; setrlimit(2): the error is returned when SIGXFSZ is
        caught or ignored, and CPython sets it to SIG_IGN at start-up) or ENOSPC ("no room
        for the data"). So a record can be torn: its first bytes in the file, the rest
        refused. O_APPEND places each write at the end and leaves the offset just past it,
        so the torn record's first byte is `lseek(fd, 0, SEEK_CUR) - written`, whatever
        other nodes appended before it."""
        written = 0
        start: int | None = None
        try:
            while written < len(data):
                n = os.write(self._fd, data[written:])
                if n == 0:  # no error and no progress: would loop for ever
                    raise OSError(errno.EIO, "write(2) took none of the record's bytes")
                if start is None:
                    start = os.lseek(self._fd, 0, os.SEEK_CUR) - n
                written += n
        except OSError as e:
            self._stop(e, start, written)

    def _stop(self, e: OSError, start: int | None, written: int) -> None:
        error = e.strerror or str(e)
        if start is not None and written:
            error += self._cut(start, start + written)
        self.stopped = TraceStopped(self.path, self.seq, error)
        # One line, at error: the trace asked for is incomplete from here on.
        log.error("trace stopped at record %d: %s (%s holds the records before it; the "
                  "node serves on)", self.seq, error, self.path,
                  extra={"trace": self.path, "record": self.seq})
        with contextlib.suppress(OSError):  # nothing more is written to it
            os.close(self._fd)
        self._fd = -1

    def _cut(self, start: int, end: int) -> str:
        """Cut the torn record [start, end) when it is the file's tail, so the trace ends
        with a whole record; "" when cut, else what is left where. Never cuts what another
        node appended after it (whole records of theirs: not this node's to delete)."""
        try:
            if os.fstat(self._fd).st_size != end:
                return f"; a torn record is left at byte {start:,} (another node wrote after it)"
            os.ftruncate(self._fd, start)
        except OSError as e:
            return f"; the torn record at byte {start:,} could not be cut: {e.strerror or e}"
        return ""

    def status(self) -> dict[str, object] | None:
        """For the node's status answer: None while the trace is written."""
        return None if self.stopped is None else self.stopped.doc()

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
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


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

    return Hooks(on_fence=on_fence, on_apply=on_apply, status=writer.status)

