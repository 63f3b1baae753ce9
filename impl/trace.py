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
it as a trace that ends early), and says it in its status answer (`cluster status`). One
case is not cut: another node appended after the torn bytes (in the moment between the
failed write and the cut's lock, `TraceWriter._append`). Its whole record is not this node's
to delete, so the torn bytes stay, glued to its line, the status says "a torn record is left
at byte B", and `epochgc check-trace` refuses that line (65), saying it is a torn record and
whose record follows it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
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
        other nodes appended before it.

        The nodes share the file, so each write holds flock(2)'s LOCK_SH (writers never
        wait for each other), and a torn record is finished or cut under LOCK_EX ("Only one
        process may hold an exclusive lock for a given file at a given time"): no other
        node appends between the check that the file still ends with it and the write of
        its rest or the ftruncate (review41a R6: another node's record, appended between an
        unlocked check and the cut, was cut). flock(2): a lock belongs to the open file
        description, and each node opens the file itself, so the nodes' locks conflict."""
        try:
            with self._locked(fcntl.LOCK_SH):
                n = self._write(data)
        except OSError as e:
            self._stop(e, "")  # nothing of it was written
            return
        if n < len(data):
            self._torn(data, os.lseek(self._fd, 0, os.SEEK_CUR) - n, n)

    def _torn(self, data: bytes, start: int, written: int) -> None:
        """A short write left [start, start + written) of the record: under LOCK_EX, write
        its rest if the file still ends with it (so no other record lands inside it), else
        leave it and say so; cut it if its rest cannot be written. The trace stops (its
        file closed) after the lock is released."""
        failed: OSError | None = None
        try:
            with self._locked(fcntl.LOCK_EX):
                if os.fstat(self._fd).st_size != start + written:
                    torn = (f"; a torn record is left at byte {start:,} (another node wrote "
                            "after it; `epochgc check-trace` refuses its line)")
                else:
                    try:
                        while written < len(data):
                            written += self._write(data[written:])
                        return  # whole after all
                    except OSError as e:
                        failed, torn = e, self._cut(start)
        except OSError as e:  # the lock (ENOLCK) or the fstat: nothing is cut unchecked
            torn = (f"; a torn record is left at byte {start:,} (the file could not be "
                    f"locked and checked to cut it: {e.strerror or e})")
        self._stop(failed, torn)

    def _write(self, data: bytes) -> int:
        """One write(2) of `data`: the bytes it took, at least one (no error and no
        progress would loop for ever: EIO)."""
        n = os.write(self._fd, data)
        if n == 0:
            raise OSError(errno.EIO, "write(2) took none of the record's bytes")
        return n

    @contextlib.contextmanager
    def _locked(self, how: int) -> Iterator[None]:
        fcntl.flock(self._fd, how)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _stop(self, e: OSError | None, torn: str) -> None:
        error = ("write(2) wrote part of a record" if e is None else e.strerror or str(e)) + torn
        self.stopped = TraceStopped(self.path, self.seq, error)
        # One line, at error: the trace asked for is incomplete from here on.
        log.error("trace stopped at record %d: %s (%s holds the records before it; the "
                  "node serves on)", self.seq, error, self.path,
                  extra={"trace": self.path, "record": self.seq})
        with contextlib.suppress(OSError):  # nothing more is written to it (nor locked)
            os.close(self._fd)
        self._fd = -1

    def _cut(self, start: int) -> str:
        """Cut the torn record at `start`, the file's tail (checked under the caller's
        LOCK_EX), so the trace ends with a whole record: "" when cut, else why not."""
        try:
            os.ftruncate(self._fd, start)
        except OSError as e:
            return (f"; the torn record at byte {start:,} could not be cut: {e.strerror or e} "
                    "(`epochgc check-trace` refuses its line)")
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

