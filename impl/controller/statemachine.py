"""The controller's state machine: one number line for epochs and revisions.

Every applied controller command advances `revision` by one. A minted epoch IS the revision
of its mint command, and a partition's creation revision IS the revision of its create
command, so a partition created after a published snapshot (read at revision r) has a
creation revision > r, and its objects (stamped >= creation revision) are never <= M <= r.

Deleting a partition (SPEC R32) is a command too, with its own revision: the partition
leaves the table and goes to `deleted` (keyed by its creation revision, hence by its Raft
group: each incarnation has its own). Re-creating the name is a new incarnation whose
creation revision is its create command's, above the deletion's (R35).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from epochgc.impl.raft.messages import Entry, Snapshot

VERSION = 1
MINT = 1
CREATE_PARTITION = 2
DELETE_PARTITION = 3
# The epoch barrier (SPEC R36): mint a new epoch E+1 and make every broker invalidate its
# epoch cache on applying it; the barrier's candidate is E = the revision before it.
MINT_BARRIER = 4

PARTITION_GROUP_BASE = 1000  # group id of a partition = base + its creation revision

_HEAD = struct.Struct(">BB")
_STR = struct.Struct(">H")
_SNAP_MAGIC = b"CSM1"


class ControllerCommandError(ValueError):
    pass


def encode_mint() -> bytes:
    return _HEAD.pack(VERSION, MINT)


def encode_mint_barrier() -> bytes:
    return _HEAD.pack(VERSION, MINT_BARRIER)


def encode_create(name: str) -> bytes:
    return _encode_named(CREATE_PARTITION, name)


def encode_delete(name: str) -> bytes:
    return _encode_named(DELETE_PARTITION, name)


def _encode_named(kind: int, name: str) -> bytes:
    check_partition_name(name)
    b = name.encode()
    return _HEAD.pack(VERSION, kind) + _STR.pack(len(b)) + b


def check_partition_name(name: str) -> str:
    topic, sep, n = name.rpartition("/")
    if not sep or not topic or "/" in topic or any(ch.isspace() for ch in topic) or not n.isdigit():
        raise ControllerCommandError(f"partition name must be 'topic/N', got {name!r}")
    return name


def decode(data: bytes) -> tuple[int, str]:
    if len(data) < _HEAD.size:
        raise ControllerCommandError("controller entry shorter than its header")
    version, kind = _HEAD.unpack_from(data)
    if version != VERSION:
        raise ControllerCommandError(f"unknown controller command version {version}")
    if kind in (MINT, MINT_BARRIER):
        if len(data) != _HEAD.size:
            raise ControllerCommandError("trailing bytes after a controller command")
        return kind, ""
    if kind in (CREATE_PARTITION, DELETE_PARTITION):
        what = "create" if kind == CREATE_PARTITION else "delete"
        if len(data) < _HEAD.size + _STR.size:
            raise ControllerCommandError(f"truncated {what} command")
        (n,) = _STR.unpack_from(data, _HEAD.size)
        body = data[_HEAD.size + _STR.size :]
        if len(body) != n:
            raise ControllerCommandError(f"bad {what} command length")
        return kind, check_partition_name(body.decode())
    raise ControllerCommandError(f"unknown controller command kind {kind}")


@dataclass(frozen=True)
class PartitionInfo:
    name: str
    creation_revision: int

    @property
    def group(self) -> int:
        return PARTITION_GROUP_BASE + self.creation_revision


@dataclass(frozen=True)
class DeletedPartition:
    """One deleted incarnation: its name, creation revision (hence group) and the revision
    of the delete command."""

    name: str
    creation_revision: int
    deletion_revision: int

    @property
    def group(self) -> int:
        return PARTITION_GROUP_BASE + self.creation_revision


@dataclass
class ControllerStateMachine:
    revision: int = 0
    epoch: int = 0  # the latest minted epoch (0 before the first mint)
    partitions: dict[str, PartitionInfo] = field(default_factory=dict)
    deleted: dict[int, DeletedPartition] = field(default_factory=dict)  # by creation revision
    last_index: int = 0
    # The latest barrier's candidate (R36): every partition leader writes
    # advance_gc_epoch(barrier_candidate) to its partitions; 0 before the first barrier.
    barrier_candidate: int = 0
    on_change: Callable[[], None] | None = None  # the broker adds groups for new partitions
    # The broker invalidates its epoch cache (a barrier mint was applied).
    on_barrier: Callable[[int], None] | None = None

    def apply(self, entry: Entry) -> int:
        """Returns the revision of the command (the minted epoch / creation revision)."""
        kind, name = decode(entry.data)
        self.last_index = entry.index
        self.revision += 1
        if kind == MINT:
            self.epoch = self.revision
        elif kind == MINT_BARRIER:
            self.epoch = self.revision
            self.barrier_candidate = self.revision - 1
            if self.on_barrier is not None:
                self.on_barrier(self.barrier_candidate)
        elif kind == CREATE_PARTITION:
            if name not in self.partitions:  # creating an existing partition is a no-op
                self.partitions[name] = PartitionInfo(name, self.revision)
        else:
            info = self.partitions.pop(name, None)  # deleting an absent one is a no-op
            if info is not None:
                self.deleted[info.creation_revision] = DeletedPartition(
                    name, info.creation_revision, self.revision)
        if self.on_change is not None:
            self.on_change()
        return self.revision

    def snapshot(self) -> bytes:
        doc = {
            "revision": self.revision,
            "epoch": self.epoch,
            "partitions": {n: p.creation_revision for n, p in sorted(self.partitions.items())},
            "deleted": [[d.name, d.creation_revision, d.deletion_revision]
                        for _, d in sorted(self.deleted.items())],
            "last_index": self.last_index,
            "barrier_candidate": self.barrier_candidate,
        }
        return _SNAP_MAGIC + json.dumps(doc, sort_keys=True).encode()

    def restore(self, snapshot: Snapshot) -> None:
        if snapshot.index == 0:
            self.revision, self.epoch, self.partitions, self.last_index = 0, 0, {}, 0
            self.deleted = {}
            self.barrier_candidate = 0
            return
        if not snapshot.data.startswith(_SNAP_MAGIC):
            raise ValueError(f"controller snapshot at index {snapshot.index}: bad magic")
        doc = json.loads(snapshot.data[len(_SNAP_MAGIC) :])
        self.revision = int(doc["revision"])
        self.epoch = int(doc["epoch"])
        self.partitions = {n: PartitionInfo(n, int(r)) for n, r in doc["partitions"].items()}
        self.deleted = {int(c): DeletedPartition(str(n), int(c), int(d))
                        for n, c, d in doc.get("deleted", [])}  # absent before issue 13
        self.last_index = int(doc["last_index"])
        self.barrier_candidate = int(doc.get("barrier_candidate", 0))  # absent before R36
        if self.on_change is not None:
            self.on_change()

    def ever_deleted(self, name: str) -> bool:
        return any(d.name == name for d in self.deleted.values())

    def last_deletion(self, name: str) -> DeletedPartition | None:
        """The latest deleted incarnation of `name`, if any."""
        found = [d for d in self.deleted.values() if d.name == name]
        return max(found, key=lambda d: d.deletion_revision) if found else None

    def table(self) -> tuple[int, list[str]]:
        """(revision, partition names) read together: what `_cluster/partitions.json` holds."""
        return self.revision, sorted(self.partitions)
