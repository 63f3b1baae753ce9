"""The project's own Raft: a pure protocol core, a durable log, a TCP transport, a multi-group
host and a deterministic simulator. See README.md in this directory.

Membership is static (the voter set is fixed when a group is created; 3 or 5 voters).
"""

from epochgc.impl.raft.host import (
    LeadershipLost,
    MultiRaftHost,
    Overwritten,
    Proposal,
    ProposalFailed,
    StateMachine,
)
from epochgc.impl.raft.messages import ENTRY_NOOP, ENTRY_NORMAL, Entry, HardState, Snapshot
from epochgc.impl.raft.node import (
    Config,
    NotLeader,
    ProposalRefused,
    RaftNode,
    Ready,
    Role,
    TermMismatch,
    TransferInProgress,
)
from epochgc.impl.raft.storage import MemStorage, Storage, StorageCorruption, StorageFailed

__all__ = [
    "ENTRY_NOOP",
    "ENTRY_NORMAL",
    "Config",
    "Entry",
    "HardState",
    "LeadershipLost",
    "MemStorage",
    "MultiRaftHost",
    "NotLeader",
    "Overwritten",
    "Proposal",
    "ProposalFailed",
    "ProposalRefused",
    "RaftNode",
    "Ready",
    "Role",
    "Snapshot",
    "StateMachine",
    "Storage",
    "StorageCorruption",
    "StorageFailed",
    "TermMismatch",
    "TransferInProgress",
]
