"""MultiRaftHost: runs many Raft groups of one node, sans-IO.

It owns, per group, a RaftNode, a Storage and the application's StateMachine, and turns each
Ready into: storage write + one sync per batch, messages handed to `send` (only after the
sync), snapshot restore, apply in log order, proposal completion, and `advance`.
The asyncio server (`server.py`) and the simulator (`sim.py`) both drive this same class, so
the code path tested in the simulator is the one that runs over TCP.

The contract (the host is to its caller what etcd-raft's `Node` is to an application):

- One thread: every method, and every callback the host makes (`send`, the state
  machine, `Proposal.on_done`, `on_leader_change`, `on_applied`), runs in the thread that
  calls into the host. Callbacks must not call back into the host.
- The caller feeds inputs (`tick`, `receive`, `propose`, ...) and then calls
  `process_ready` while `has_work()`; inputs only queue work, `process_ready` does the I/O.
- In one `process_ready`: every group's writes, then one durability barrier for all of
  them, then (only then) the messages that depend on them, the applies and the proposals'
  outcomes. Nothing is acknowledged, by a message or a Proposal, before it is durable.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from epochgc.impl.raft.messages import ENTRY_NOOP, ENTRY_NORMAL, Entry, Message, Snapshot
from epochgc.impl.raft.node import Config, RaftNode, Ready, Role
from epochgc.impl.raft.storage import Storage, StorageFailed, sync_all


class StateMachine(Protocol):
    """The application side of one group. `apply` sees every committed non-no-op entry once,
    in log order (after a restart: replayed from the last snapshot).

    Its state must be a function of the snapshot it was restored from and the entries it
    applied since, and nothing else: after a crash the host restores the last snapshot
    and applies the later entries again, so an `apply` that acted outside its state (wrote
    a file, sent a message) acts again."""

    def apply(self, entry: Entry) -> Any:
        """Apply one committed entry (durable on a quorum and on this node's disk). The
        return value becomes the result of the Proposal that proposed it, on its leader."""
        ...

    def snapshot(self) -> bytes:
        """The state as of the last applied entry, as opaque bytes."""
        ...

    def restore(self, snapshot: Snapshot) -> None:
        """Replace the state by a snapshot (index 0 means: the empty initial state)."""
        ...


class ProposalFailed(Exception):
    """The proposal's fate is unknown or negative: leadership was lost before it applied,
    or another leader's entry took its index."""


class LeadershipLost(ProposalFailed):
    """Unknown fate: this node stopped leading (or a snapshot replaced the log) before the
    entry applied here. The entry may still commit under a later leader: a caller must not
    take this as "not applied" (retry idempotently, or read back)."""


class Overwritten(ProposalFailed):
    """Not applied: another leader's entry took the proposal's index (a different term at
    that index was applied, or the index was proposed again in a later term)."""


class GroupRemoved(ProposalFailed):
    """The group was removed (its partition deleted) before the proposal applied."""


@dataclass(slots=True)
class Proposal:
    """A handle on one proposal; `on_done` callbacks run when it applies or fails.

    Done with `error` None: the entry committed and this node's state machine applied it
    (`result` is what `apply` returned). Done with an error: a ProposalFailed (see each
    kind for what it says about the entry). A Proposal is done at most once; callbacks run
    inside `MultiRaftHost.process_ready` (or `remove_group`, or the `propose` that reuses
    its index), in the host's thread."""

    group: int
    index: int
    term: int
    done: bool = False
    result: Any = None
    error: Exception | None = None
    callbacks: list[Callable[[Proposal], None]] = field(default_factory=list)

    def on_done(self, cb: Callable[[Proposal], None]) -> None:
        """Call `cb(self)` when done; at once if already done."""
        if self.done:
            cb(self)
        else:
            self.callbacks.append(cb)

    def _finish(self, result: Any, error: Exception | None) -> None:
        self.done, self.result, self.error = True, result, error
        for cb in self.callbacks:
            cb(self)
        self.callbacks.clear()


@dataclass(slots=True)
class Group:
    id: int
    node: RaftNode
    storage: Storage
    sm: StateMachine
    pending: dict[int, Proposal] = field(default_factory=dict)
    lead_term: int = 0  # the term the pending proposals were accepted in
    applied: int = 0  # what the state machine holds (the core's `applied` runs ahead of it)


SendFn = Callable[[int, int, Message], None]  # (to node, group id, message)
# (group id, term, leader id or 0, this node leads) after any change of leader or role
LeaderChangeFn = Callable[[int, int, int, bool], None]


class MultiRaftHost:
    """The Raft groups of one node and the I/O their Readies ask for (see the module's
    contract). `send(to, group, message)` must only queue the message (the transport's
    or the simulator's queue): it may drop it (Raft retransmits) but must not block, alter
    it, or call back into the host."""

    def __init__(
        self,
        node_id: int,
        send: SendFn,
        rng: random.Random,
        config: Config | None = None,
        snapshot_interval: int = 0,
    ) -> None:
        self.node_id = node_id
        self.send = send
        self.rng = rng
        self.config = config or Config()
        self.snapshot_interval = snapshot_interval  # 0: the application compacts itself
        self.groups: dict[int, Group] = {}
        self._dirty: set[int] = set()
        self.on_leader_change: LeaderChangeFn | None = None
        # Observer of every applied non-no-op entry (group id, entry), after the state machine.
        self.on_applied: Callable[[int, Entry], None] | None = None
        # A storage failure (disk full, failed fsync) is fatal: the host refuses to go on.
        self.failed: StorageFailed | None = None

    # ---- groups ----------------------------------------------------------------------------

    def add_group(
        self, group_id: int, peers: list[int], storage: Storage, sm: StateMachine
    ) -> RaftNode:
        """Recover the group from storage (restoring the state machine from its snapshot).

        `storage` must be this group's own and not used by anything else; `peers` the
        group's static voters, the same on every node. Committed entries after the snapshot
        are applied again, through `process_ready`, as the group learns its commit index.
        ValueError if the group is already there."""
        if group_id in self.groups:
            raise ValueError(f"group {group_id} already exists")
        init = storage.load()
        sm.restore(init.snapshot)
        node = RaftNode(
            self.node_id, peers, init, random.Random(self.rng.getrandbits(64)), self.config
        )
        self.groups[group_id] = Group(group_id, node, storage, sm, applied=init.snapshot.index)
        self._dirty.add(group_id)
        return node

    def remove_group(self, group_id: int) -> Storage | None:
        """Stop a group (its partition was deleted): its pending proposals fail with
        GroupRemoved, its messages are dropped from now on; returns its storage (closed) so
        the caller can remove it from disk."""
        g = self.groups.pop(group_id, None)
        self._dirty.discard(group_id)
        if g is None:
            return None
        pending, g.pending = g.pending, {}
        for p in pending.values():
            p._finish(None, GroupRemoved(f"group {group_id} removed"))
        if self.failed is None:
            g.storage.close()
        return g.storage

    def close(self) -> None:
        """Close every group's storage; the host is not used afterwards."""
        for g in self.groups.values():
            g.storage.close()

    # ---- inputs ----------------------------------------------------------------------------

    def tick(self) -> None:
        """One logical clock unit for every group (`RaftNode.tick`), at a steady rate."""
        for gid, g in self.groups.items():
            g.node.tick()
            self._dirty.add(gid)

    def receive(self, group_id: int, msg: Message) -> None:
        """One message from the transport (`RaftNode.step`); for an unknown or removed group
        it is dropped, as a lost message would be."""
        g = self.groups.get(group_id)
        if g is None:
            return  # unknown group: Raft tolerates loss
        g.node.step(msg)
        self._dirty.add(group_id)

    def propose(
        self,
        group_id: int,
        data: bytes,
        entry_type: int = ENTRY_NORMAL,
        expected_term: int | None = None,
    ) -> Proposal:
        """Raises ProposalRefused (NotLeader, TermMismatch, ...) if nothing was appended;
        otherwise the entry is already in the group's log (`RaftNode.propose`: in-term call
        order is log order), and Ready processing, group commit and retransmission only
        persist and send it at that index.

        The returned Proposal completes in a later `process_ready`: applied (committed and
        applied here) or failed (see ProposalFailed). KeyError for an unknown group."""
        g = self.groups[group_id]
        index, term = g.node.propose(data, entry_type, expected_term)
        p = Proposal(group_id, index, term)
        old = g.pending.pop(index, None)
        if old is not None:
            old._finish(None, Overwritten(f"index {index} reused in term {term}"))
        g.pending[index] = p
        g.lead_term = term
        self._dirty.add(group_id)
        return p

    def transfer_leadership(self, group_id: int, target: int) -> None:
        """`RaftNode.transfer_leadership` for the group: a request, not a promise."""
        self.groups[group_id].node.transfer_leadership(target)
        self._dirty.add(group_id)

    def compact(self, group_id: int, index: int, data: bytes) -> None:
        """`RaftNode.compact`: `data` is the state machine's state at applied index `index`
        (at most `applied_index`); durable after the next `process_ready`."""
        self.groups[group_id].node.compact(index, data)
        self._dirty.add(group_id)

    # ---- queries ---------------------------------------------------------------------------

    def leader(self, group_id: int) -> int:
        """The leader this node knows of for the group (0 if unknown or removed)."""
        g = self.groups.get(group_id)
        return 0 if g is None else g.node.lead

    def is_leader(self, group_id: int) -> bool:
        """This node leads the group's current term as far as it knows (it may be deposed
        without knowing: use `reads_current` before serving a read)."""
        g = self.groups.get(group_id)
        return g is not None and g.node.is_leader()

    def term(self, group_id: int) -> int:
        """This node's current term for the group (0 if unknown or removed)."""
        g = self.groups.get(group_id)
        return 0 if g is None else g.node.term

    def reads_current(self, group_id: int) -> bool:
        """May this node serve a read of the group's state machine as the leader? Only once
        it has committed an entry of its own term and applied up to its commit index: a new
        leader's commit index can lag entries an earlier leader committed (Raft section 8),
        so its state machine may be behind what was already read elsewhere."""
        g = self.groups.get(group_id)
        if g is None or not g.node.is_leader():
            return False
        log = g.node.log
        return log.term(log.committed) == g.node.term and g.applied >= log.committed

    def applied_index(self, group_id: int) -> int:
        """The index the state machine has applied (a received snapshot counts only once the
        state machine has been restored from it)."""
        return self.groups[group_id].applied

    def has_work(self) -> bool:
        """Some group got an input since its last Ready: call `process_ready`."""
        return bool(self._dirty)

    # ---- the Ready loop --------------------------------------------------------------------

    def process_ready(self, crash_before_sync: bool = False) -> int:
        """Handle every group with work; returns how many Readies were processed.
        `crash_before_sync` (simulator only) writes the batch and stops before the fsync.
        Raises StorageFailed (then and on every later call) if a write or sync failed:
        nothing of that batch that depends on its durability is sent (votes,
        acknowledgements), applied or acknowledged to a proposer; a leader's appends and
        heartbeats of that batch may already be out, which is safe (`Ready.early_messages`).
        The node must then stop: the host refuses all further processing.

        Per batch: each group's Ready is written (snapshot, compaction, hard state, entries)
        and its early messages sent; one barrier makes all the writes durable (group
        commit, `sync_all`); then per group, in group order: its messages, the snapshot
        restore and the applies (each completing its Proposal), `advance`, the failure of
        the proposals of a deposed leader, `on_leader_change`. A group whose handling
        produced new work is marked again: the caller loops while `has_work()`."""
        if self.failed is not None:
            raise self.failed
        try:
            return self._process_ready(crash_before_sync)
        except StorageFailed as e:
            self.failed = e
            raise

    def _process_ready(self, crash_before_sync: bool) -> int:
        dirty, groups, send = self._dirty, self.groups, self.send
        if not dirty:
            return 0
        todo = []
        for gid in sorted(dirty) if len(dirty) > 1 else dirty:
            g = groups.get(gid)
            if g is not None and g.node.has_ready():
                todo.append(g)
        dirty.clear()
        batch: list[tuple[Group, Ready]] = []
        to_sync: dict[int, Storage] = {}
        for g in todo:
            rd = g.node.ready()
            if rd.must_sync:
                g.storage.write(rd.hard_state, rd.snapshot, rd.entries, rd.compacted)
                to_sync[id(g.storage)] = g.storage
            for m in rd.early_messages:
                send(m.to, g.id, m)
            batch.append((g, rd))
        if crash_before_sync:
            return len(batch)
        # Group commit: one barrier per batch for all storages that share one (a node's
        # DiskStorages on a GroupCommit), else one sync per storage.
        if to_sync:
            sync_all(list(to_sync.values()))
        for g, rd in batch:
            for m in rd.messages:
                send(m.to, g.id, m)
            self._apply(g, rd)
            g.node.advance(rd)
            self._fail_if_deposed(g)
            if rd.soft_state is not None and self.on_leader_change is not None:
                n = g.node
                self.on_leader_change(g.id, n.term, n.lead, n.role is Role.LEADER)
            if g.node.has_ready():
                self._dirty.add(g.id)
        return len(batch)

    def _apply(self, g: Group, rd: Ready) -> None:
        if rd.snapshot is not None:
            g.sm.restore(rd.snapshot)
            g.applied = rd.snapshot.index
            for idx in [i for i in g.pending if i <= rd.snapshot.index]:
                g.pending.pop(idx)._finish(None, LeadershipLost("replaced by a snapshot"))
        for e in rd.committed_entries:
            result = None
            if e.type != ENTRY_NOOP:
                result = g.sm.apply(e)
                if self.on_applied is not None:
                    self.on_applied(g.id, e)
            g.applied = e.index
            p = g.pending.pop(e.index, None)
            if p is not None:
                if p.term == e.term:
                    p._finish(result, None)
                else:
                    p._finish(None, Overwritten(f"index {e.index} holds term {e.term}"))
        n = g.node
        if (
            self.snapshot_interval
            and rd.committed_entries
            and n.log.applied - n.log.snapshot.index >= self.snapshot_interval
        ):
            n.compact(n.log.applied, g.sm.snapshot())

    def _fail_if_deposed(self, g: Group) -> None:
        n = g.node
        if not g.pending or (n.role is Role.LEADER and n.term == g.lead_term):
            return
        pending, g.pending = g.pending, {}
        for p in pending.values():
            p._finish(None, LeadershipLost(f"no longer leader of term {p.term}"))
