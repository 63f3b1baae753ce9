"""The simulator's records: its seeded faults (`Faults`), a node's record (`SimNode`), what a
group made durable (`DurableMark`, `_mark`), what a Raft check compares (`replica_key`), a
refused restart (`RestartRefused`) and the event kinds of its queue. No behaviour: the parts
of the simulator (sim.py, simnet.py, simdisk.py) all read these."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from epochgc.impl.raft.host import Group, MultiRaftHost
from epochgc.impl.raft.invariants import InvariantViolation
from epochgc.impl.raft.node import RaftNode, Role
from epochgc.impl.raft.simapp import DigestStateMachine
from epochgc.impl.raft.storage import Storage

# Event kinds, in the heap as (time, seq, kind, a, b, c, payload).
_TICK, _DELIVER, _FLUSH = 0, 1, 2


class RestartRefused(InvariantViolation):
    """A node could not recover from its own disk (corruption reported, or a recovered log
    the core rejects): an outage Raft should never need."""


@dataclass
class Faults:
    drop: float = 0.0  # probability a message is lost
    duplicate: float = 0.0  # probability a message is delivered twice
    reorder: float = 0.0  # probability a message gets an extra random delay
    min_latency: int = 1  # time units (a tick is `Simulator.tick_interval` units)
    max_latency: int = 3
    reorder_window: int = 30
    crash_mid_write: float = 0.0  # probability a crash happens between write and sync
    replay: float = 0.0  # probability a send also re-delivers an old message, late
    replay_window: int = 200  # how late (time units) a replayed message arrives
    batch: float = 0.0  # probability a node waits for more inputs before its next Ready
    batch_window: int = 5  # how long (time units) a batch may gather inputs
    # On the disk log (under CrashFS): the probability that a node's process dies at each
    # file-system call it makes (a write dies after a random prefix of its bytes), then a
    # power loss or a plain process kill, one or the other at random; and the probability
    # that a write of the snapshot file fails with ENOSPC (the storage fails for good, the
    # node stops). The node stays down until the program restarts it.
    kill_at_call: float = 0.0
    enospc_snapshot: float = 0.0
    # The probability that a barrier (fsync, syncfs, the fsync of recovery's read) fails its
    # write-back with EIO under CrashFS's page-cache model: the bytes stay in the files (the
    # cache) but never reach the device; the node stops (StorageFailed) and, unless the
    # power goes too, is later restarted WITHOUT a reboot, reading the same files.
    eio_fsync: float = 0.0


class DurableMark(NamedTuple):  # a tuple: one is built per group per Ready batch
    """What one group of one node has made durable (as of its last completed Ready batch):
    a restart must recover at least this."""

    term: int
    vote: int
    stable: int  # every entry up to here was synced
    stable_term: int


@dataclass
class SimNode:
    id: int
    storages: dict[int, Storage]
    host: MultiRaftHost | None = None
    sms: dict[int, DigestStateMachine] = field(default_factory=dict)
    incarnation: int = 0
    flush_pending: bool = False  # a batched Ready is scheduled
    durable: dict[int, DurableMark] = field(default_factory=dict)
    removed: set[int] = field(default_factory=set)  # tombstones: survive crashes, as on disk

    @property
    def up(self) -> bool:
        return self.host is not None


def _mark(g: Group) -> DurableMark:
    n = g.node
    log = n.log
    return DurableMark(n.term, n.vote, log.stable, log.term(log.stable) or 0)


def replica_key(incarnation: int, n: RaftNode) -> tuple[int, RaftNode, Role, int, int]:
    """What `Simulator.check` compares to skip a replica whose checked state did not change:
    role and term read directly, the rest through the log's version (bumped by every change
    of its snapshot, entries or commit index)."""
    return (incarnation, n, n.role, n.term, n.log.version)
