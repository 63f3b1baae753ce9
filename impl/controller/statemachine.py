"""The controller's state machine: one number line for epochs and revisions.

Every applied controller command advances `revision` by one. A minted epoch IS the revision
of its mint command, and a partition's creation revision IS the revision of its create
command, so a partition created after a published snapshot (read at revision r) has a
creation revision > r, and its objects (stamped >= creation revision) are never <= M <= r.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from impl.raft.messages import Entry, Snapshot

VERSION = 1
MINT = 1
CREATE_PARTITION = 2

PARTITION_GROUP_BASE = 1000  # group id of a partition = base + its creation revision

_HEAD = struct.Struct(">BB")
_STR = struct.Struct(">H")
_SNAP_MAGIC = b"CSM1"


class ControllerCommandError(ValueError):
    pass


def encode_mint() -> bytes:
    return _HEAD.pack(VERSION, MINT)


def encode_create(name: str) -> bytes:
    check_partition_name(name)
    b = name.encode()
    return _HEAD.pack(VERSION, CREATE_PARTITION) + _STR.pack(len(b)) + b


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
    if kind == MINT:
        if len(data) != _HEAD.size:
            raise ControllerCommandError("trailing bytes after a controller command")
        return kind, ""
    if kind == CREATE_PARTITION:
        if len(data) < _HEAD.size + _STR.size:
            raise ControllerCommandError("truncated create command")
        (n,) = _STR.unpack_from(data, _HEAD.size)
        body = data[_HEAD.size + _STR.size :]
        if len(body) != n:
            raise ControllerCommandError("bad create command length")
        return kind, check_partition_name(body.decode())
    raise ControllerCommandError(f"unknown controller command kind {kind}")


@dataclass(frozen=True)
class PartitionInfo:
    name: str
    creation_revision: int

    @property
    def group(self) -> int:
        return PARTITION_GROUP_BASE + self.creation_revision


@dataclass
class ControllerStateMachine:
    revision: int = 0
    epoch: int = 0  # the latest minted epoch (0 before the first mint)
    partitions: dict[str, PartitionInfo] = field(default_factory=dict)
    last_index: int = 0
    on_change: Callable[[], None] | None = None  # the broker adds groups for new partitions

    def apply(self, entry: Entry) -> int:
        """Returns the revision of the command (the minted epoch / creation revision)."""
        kind, name = decode(entry.data)
        self.last_index = entry.index
        self.revision += 1
        if kind == MINT:
            self.epoch = self.revision
        elif name not in self.partitions:  # creating an existing partition is a no-op
            self.partitions[name] = PartitionInfo(name, self.revision)
        if self.on_change is not None:
            self.on_change()
        return self.revision

    def snapshot(self) -> bytes:
        doc = {
            "revision": self.revision,
            "epoch": self.epoch,
            "partitions": {n: p.creation_revision for n, p in sorted(self.partitions.items())},
            "last_index": self.last_index,
        }
        return _SNAP_MAGIC + json.dumps(doc, sort_keys=True).encode()

    def restore(self, snapshot: Snapshot) -> None:
        if snapshot.index == 0:
            self.revision, self.epoch, self.partitions, self.last_index = 0, 0, {}, 0
            return
        if not snapshot.data.startswith(_SNAP_MAGIC):
            raise ValueError(f"controller snapshot at index {snapshot.index}: bad magic")
        doc = json.loads(snapshot.data[len(_SNAP_MAGIC) :])
        self.revision = int(doc["revision"])
        self.epoch = int(doc["epoch"])
        self.partitions = {n: PartitionInfo(n, int(r)) for n, r in doc["partitions"].items()}
        self.last_index = int(doc["last_index"])
        if self.on_change is not None:
            self.on_change()

    def table(self) -> tuple[int, list[str]]:
        """(revision, partition names) read together: what `_cluster/partitions.json` holds."""
        return self.revision, sorted(self.partitions)
