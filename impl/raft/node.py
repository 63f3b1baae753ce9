"""RaftNode: the pure Raft protocol for one group (etcd-raft / raft-rs style, sans-IO).

The host drives it with `step` (a message arrived), `tick` (one logical clock unit),
`propose`, `transfer_leadership` and `compact`, then takes a `Ready`, persists its hard state,
snapshot and entries (one fsync), sends its messages, applies its committed entries and calls
`advance`. The node does no I/O, reads no clock and draws randomness only from the injected
`random.Random`.

Membership is static: the voter set is fixed at construction (3 or 5 voters in practice).
Membership changes are not supported.

The contract, in the manner of etcd-raft's `RawNode` (go.etcd.io/raft/v3 rawnode.go and
node.go, whose `Ready` documents the same persist-then-send order):

- One thread. A RaftNode is not thread-safe; every call below comes from the host's loop.
- Inputs (`tick`, `step`, `propose`, `transfer_leadership`, `compact`) only change memory
  and queue work; none of them does I/O or blocks.
- At most one Ready outstanding: after `ready()` the caller handles all of it and calls
  `advance(rd)` with that same Ready before the next `ready()`.
- Handling a Ready, in this order: write `snapshot`, `compacted`, `hard_state` and
  `entries` to stable storage and make them durable (one fsync or barrier for all of it);
  `early_messages` may be sent at any point, even before that barrier; only after it, send
  `messages`, restore the state machine from `snapshot`, apply `committed_entries` in order;
  then `advance(rd)`. A Ready whose writes failed is never advanced (the node must stop).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from enum import Enum

from epochgc.impl.raft.messages import (
    ENTRY_NOOP,
    ENTRY_NORMAL,
    NONE,
    Entry,
    HardState,
    InitialState,
    Message,
    MsgType,
    Snapshot,
)
from epochgc.impl.raft.progress import Progress, ProgressState
from epochgc.impl.raft.raftlog import RaftLog


class Role(Enum):
    FOLLOWER = "follower"
    PRE_CANDIDATE = "pre_candidate"
    CANDIDATE = "candidate"
    LEADER = "leader"


class ProposalRefused(Exception):
    """Base class: the node did not accept a proposal (nothing was appended)."""


class NotLeader(ProposalRefused):
    def __init__(self, leader_hint: int) -> None:
        super().__init__(f"not the leader (leader hint: {leader_hint or 'unknown'})")
        self.leader_hint = leader_hint


class TermMismatch(ProposalRefused):
    def __init__(self, expected: int, actual: int) -> None:
        super().__init__(f"expected term {expected}, current term {actual}")
        self.expected = expected
        self.actual = actual


class TransferInProgress(ProposalRefused):
    """Leadership is being handed over; proposals are refused until that settles."""


@dataclass(frozen=True, slots=True)
class Config:
    election_tick: int = 10  # base election timeout, in ticks; randomized in [e, 2e)
    heartbeat_tick: int = 1
    pre_vote: bool = True
    check_quorum: bool = True
    max_inflight: int = 64  # append messages in flight per follower (replicate state)
    max_msg_bytes: int = 1 << 20  # soft cap on entry payload per append message

    def __post_init__(self) -> None:
        if self.heartbeat_tick < 1 or self.election_tick <= self.heartbeat_tick:
            raise ValueError("need 1 <= heartbeat_tick < election_tick")
        if self.max_inflight < 1:
            raise ValueError("max_inflight must be >= 1")


@dataclass(slots=True)
class Ready:
    """Work for the host, handed out once by `RaftNode.ready` and returned by `advance`.

    Order: persist snapshot / compacted / hard state / entries, make them durable (one
    fsync), send `messages`, restore `snapshot` into the state machine, apply
    `committed_entries`, then `advance`. `early_messages` may go out before the fsync.
    Every field is read-only for the host."""

    # The node's (term, vote, commit) when any changed since the last Ready: to be durable
    # BEFORE `messages` are sent (a vote or an acknowledgement promises it). None: unchanged.
    hard_state: HardState | None = None
    # A snapshot received from the leader: it replaces the whole log. Persist it (with the
    # rest of this Ready) before `messages`; restore the state machine from it before
    # applying `committed_entries`, which follow it.
    snapshot: Snapshot | None = None
    # This node's own compaction (`compact`): persist it, then the log prefix up to its
    # index may be dropped; the state machine already holds that state.
    compacted: Snapshot | None = None
    # Entries to append to stable storage BEFORE `messages` are sent; one that starts at or
    # below the stored last index replaces the stored suffix from its index.
    entries: list[Entry] = field(default_factory=list)
    # Outbound messages, to be sent only AFTER this Ready's writes are durable (votes and
    # append acknowledgements are promises about what is on disk). Loss, duplication and
    # reordering are tolerated; the transport must not alter a message.
    messages: list[Message] = field(default_factory=list)
    # A leader's appends, heartbeats and snapshots: may go out before its own fsync (Raft
    # thesis 10.2.1), because the leader counts itself towards a commit only once `advance`
    # says its entries are durable. Empty on a follower or candidate.
    early_messages: list[Message] = field(default_factory=list)
    # (leader id or 0, role) when either changed since the last Ready; for observers, never
    # persisted.
    soft_state: tuple[int, Role] | None = None
    # Entries known committed, to apply in this order, each once, AFTER this Ready's writes
    # are durable (they may include entries of `entries`). Once handed out they are never
    # handed out again (`applied` moves past them at `ready`), even after a failed apply.
    committed_entries: list[Entry] = field(default_factory=list)

    @property
    def must_sync(self) -> bool:
        """Something must be written and made durable before `messages` go out and before
        `advance`; False: nothing to write (the messages may go at once)."""
        return bool(self.hard_state or self.snapshot or self.compacted or self.entries)


_EARLY = (MsgType.APP, MsgType.HEARTBEAT, MsgType.SNAP)


class RaftNode:
    """The Raft protocol for one group on one node: a state machine driven by its host.

    Not thread-safe. The host calls the inputs, then while `has_ready()`: `ready()`, handles
    the Ready (see `Ready`), `advance(rd)`. Nothing becomes durable, sent or applied except
    through a Ready."""

    def __init__(
        self,
        node_id: int,
        peers: list[int] | tuple[int, ...],
        storage_view: InitialState,
        rng: random.Random,
        config: Config | None = None,
    ) -> None:
        """Start as a follower from `storage_view`, what `Storage.load` recovered (hard state,
        snapshot, the entries after it). `peers` is the static voter set, this node
        included; every node of the group must be given the same one. `rng` is the node's
        only source of randomness (election timeouts): seeded, it makes the node
        deterministic. Raises ValueError for an id outside `peers` or duplicate peers."""
        if node_id == NONE or node_id not in peers:
            raise ValueError("node_id must be a non-zero member of peers")
        if len(set(peers)) != len(peers):
            raise ValueError("duplicate peer ids")
        self.id = node_id
        self.voters = tuple(sorted(peers))
        self.cfg = config or Config()
        self.rng = rng
        hs = storage_view.hard_state
        self.term = hs.term
        self.vote = hs.vote
        self.log = RaftLog(
            storage_view.snapshot, storage_view.entries, hs.commit, storage_view.origin
        )
        self.role = Role.FOLLOWER
        self.lead = NONE
        self.msgs: list[Message] = []
        self.prs: dict[int, Progress] = {}
        self.votes: dict[int, bool] = {}
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self.randomized_timeout = self.cfg.election_tick
        self.lead_transferee = NONE
        self._prev_hs = hs
        self._pending_install: Snapshot | None = None
        self._pending_compact: Snapshot | None = None
        self._need_bcast = False  # proposals since the last Ready: one append per follower
        self._prev_soft: tuple[int, Role] = (NONE, Role.FOLLOWER)
        self._reset_timeout()

    # ---- public queries -----------------------------------------------------------------

    @property
    def quorum(self) -> int:
        """Votes or acknowledgements needed: a majority of the voters."""
        return len(self.voters) // 2 + 1

    def is_leader(self) -> bool:
        """This node leads its current term. It may already be deposed without knowing it
        (a newer term elsewhere): not enough to serve a read (`MultiRaftHost.reads_current`)."""
        return self.role is Role.LEADER

    def hard_state(self) -> HardState:
        """(term, vote, commit) in memory now; durable only once a Ready carrying it is."""
        return HardState(self.term, self.vote, self.log.committed)

    # ---- host inputs --------------------------------------------------------------------

    def tick(self) -> None:
        """One unit of the node's logical clock; the host calls it at a steady rate (the
        same on every node). A follower or candidate that hears no leader for its election
        timeout (randomized in [election_tick, 2 * election_tick) ticks) starts a
        (pre-)campaign; a leader sends heartbeats every `heartbeat_tick` ticks and, with
        check_quorum, steps down after `election_tick` ticks without hearing a quorum. Its
        effects come out in the next Ready."""
        self.election_elapsed += 1
        if self.role is Role.LEADER:
            self.heartbeat_elapsed += 1
            if self.election_elapsed >= self.cfg.election_tick:
                self.election_elapsed = 0
                if self.cfg.check_quorum and not self._quorum_active():
                    self._become_follower(self.term, NONE)
                    return
                self.lead_transferee = NONE  # a transfer must finish within one timeout
            if self.heartbeat_elapsed >= self.cfg.heartbeat_tick:
                self.heartbeat_elapsed = 0
                self._bcast_heartbeat()
        elif self.election_elapsed >= self.randomized_timeout:
            self.election_elapsed = 0
            self._campaign(pre=self.cfg.pre_vote, force=False)

    def propose(
        self, data: bytes, entry_type: int = ENTRY_NORMAL, expected_term: int | None = None
    ) -> tuple[int, int]:
        """Append one entry as leader; returns (index, term). Raises ProposalRefused.

        The entry is in the log when this returns, at the index after the last one: the
        proposals a leader accepts in one term take consecutive indexes in call order, and a
        leader never truncates its own log (`RaftLog.append` truncates on a follower only).
        The partition fence's release at enqueue relies on this (`GroupRaft.propose`).

        Appended is not durable and not committed: the entry reaches disk and followers
        through later Readies. Its fate is known only when an entry at `index` is applied:
        with `term` it is this one; with another term, another leader's entry replaced it.
        Refused (NotLeader with a leader hint, TermMismatch when `expected_term` is not the
        current term, TransferInProgress during a leadership transfer), nothing is
        appended. ValueError for an `entry_type` outside [1, 2**32) (0 is the no-op)."""
        if self.role is not Role.LEADER:
            raise NotLeader(self.lead)
        if expected_term is not None and expected_term != self.term:
            raise TermMismatch(expected_term, self.term)
        if self.lead_transferee != NONE:
            raise TransferInProgress(f"transferring leadership to {self.lead_transferee}")
        if entry_type == ENTRY_NOOP or not 0 < entry_type < 1 << 32:
            raise ValueError("entry_type must be in [1, 2**32)")
        return self._append_as_leader(data, entry_type)

    def transfer_leadership(self, target: int) -> None:
        """Ask the leader to hand over to `target`: it catches `target` up, then tells it to
        campaign at once. Proposals are refused until the transfer settles (this node steps
        down) or an election timeout passes without it. Nothing is promised: `target` may
        lose the election. NotLeader if this node does not lead; ValueError for a target
        outside the voters; a transfer to itself does nothing."""
        if self.role is not Role.LEADER:
            raise NotLeader(self.lead)
        if target not in self.voters:
            raise ValueError(f"{target} is not a voter")
        if target == self.id:
            return
        self.lead_transferee = target
        self.election_elapsed = 0
        pr = self.prs[target]
        if pr.match == self.log.last_index():
            self._send(MsgType.TIMEOUT_NOW, target)
        else:
            self._send_append(target, send_if_empty=True)

    def compact(self, index: int, data: bytes) -> None:
        """The application's state as of applied index `index` is `data`: drop the log up to
        it. Persisted through the next Ready's `compacted`.

        The caller must pass the state machine's state after applying exactly the entries up
        to `index`, and `index` must have been handed out in a Ready's `committed_entries`
        (ValueError otherwise). An `index` at or below the current snapshot does nothing.
        Followers behind the new first index are sent this snapshot instead of entries."""
        term = self.log.term(index)
        if index <= self.log.snapshot.index:
            return
        if term is None or index > self.log.applied:
            raise ValueError(f"cannot compact to {index} (applied {self.log.applied})")
        snap = Snapshot(index, term, data)
        self.log.compact(snap)
        self._pending_compact = snap

    def step(self, m: Message) -> None:
        """Deliver one message from a peer. Any order, duplicates, stale terms and losses are
        tolerated (Raft's own assumptions); a message not addressed to this node, or from
        outside the voters or from itself, is dropped. The transport must deliver messages
        unaltered (its checksums and authentication): step trusts their content. Replies and
        state changes come out in the next Ready."""
        if m.to != self.id or m.frm not in self.voters or m.frm == self.id:
            return  # misrouted or from outside the static membership
        if m.term > self.term:
            if m.type in (MsgType.VOTE, MsgType.PRE_VOTE):
                in_lease = (
                    self.cfg.check_quorum
                    and self.lead != NONE
                    and self.election_elapsed < self.cfg.election_tick
                )
                if in_lease and not m.force:
                    return  # a healthy leader exists: do not let a rejoining node disrupt it
            if m.type is MsgType.PRE_VOTE:
                pass  # a pre-vote never changes our term
            elif m.type is MsgType.PRE_VOTE_RESP and not m.reject:
                pass  # granted pre-votes carry the future term; counted below
            elif m.type in (MsgType.APP, MsgType.HEARTBEAT, MsgType.SNAP):
                self._become_follower(m.term, m.frm)
            else:
                self._become_follower(m.term, NONE)
        elif m.term < self.term:
            if m.type in (MsgType.APP, MsgType.HEARTBEAT) and (
                self.cfg.check_quorum or self.cfg.pre_vote
            ):
                # Tell a stale leader about the newer term so it steps down.
                self._send(MsgType.APP_RESP, m.frm)
            elif m.type is MsgType.PRE_VOTE:
                self._send(MsgType.PRE_VOTE_RESP, m.frm, reject=True)
            return

        if m.type in (MsgType.VOTE, MsgType.PRE_VOTE):
            self._handle_vote_request(m)
            return
        if self.role is Role.LEADER:
            self._step_leader(m)
        elif self.role is Role.FOLLOWER:
            self._step_follower(m)
        else:
            self._step_candidate(m)

    # ---- ready / advance ----------------------------------------------------------------

    def has_ready(self) -> bool:
        """False: `ready()` would return an empty Ready, so the host may skip it. True may
        still yield an empty one (e.g. a coalesced broadcast of a node no longer leader)."""
        return bool(
            self._need_bcast
            or self.msgs
            or self._pending_install
            or self._pending_compact
            or self.log.unstable_from <= self.log.last_index()
            or self.log.committed > self.log.applied
            or self.term != self._prev_hs.term
            or self.vote != self._prev_hs.vote
            or self.log.committed != self._prev_hs.commit
            or self.lead != self._prev_soft[0]
            or self.role is not self._prev_soft[1]
        )

    def ready(self) -> Ready:
        """The work accumulated since the last Ready, handed out once: its entries,
        messages and committed entries will not be in a later Ready. The caller must handle
        all of it (see `Ready`) and pass it to `advance` before calling `ready` again."""
        if self._need_bcast:
            self._need_bcast = False
            if self.role is Role.LEADER:
                self._bcast_append()
        rd = Ready()
        prev = self._prev_hs
        if (self.term != prev.term or self.vote != prev.vote
                or self.log.committed != prev.commit):
            rd.hard_state = self._prev_hs = self.hard_state()
        soft = (self.lead, self.role)
        if soft != self._prev_soft:
            rd.soft_state = soft
            self._prev_soft = soft
        rd.snapshot, self._pending_install = self._pending_install, None
        rd.compacted, self._pending_compact = self._pending_compact, None
        rd.entries = self.log.unstable_entries()
        self.log.unstable_from = self.log.last_index() + 1
        if self.role is Role.LEADER:
            early, late = rd.early_messages, rd.messages
            for m in self.msgs:
                (early if m.type in _EARLY else late).append(m)
        else:
            rd.messages = self.msgs
        self.msgs = []
        rd.committed_entries = self.log.next_committed()
        if rd.committed_entries:
            self.log.applied = rd.committed_entries[-1].index
        return rd

    def advance(self, rd: Ready) -> None:
        """`rd`'s writes are durable and its messages sent (or dropped): call it only after
        the fsync, once per Ready, in the order the Readies were handed out. A leader now
        counts its own entries towards a commit (they are on its disk), which may commit
        entries and queue appends for the next Ready. Never call it for a Ready whose writes
        failed: the node would count entries that are not durable."""
        if rd.snapshot is not None:
            self.log.stable_to(rd.snapshot.index, rd.snapshot.term)
        if rd.entries:
            last = rd.entries[-1]
            self.log.stable_to(last.index, last.term)
        if self.role is Role.LEADER:
            # The leader counts itself only for entries it has made durable.
            self.prs[self.id].maybe_update(self.log.stable)
            if self._maybe_commit():
                self._bcast_append()

    # ---- roles --------------------------------------------------------------------------

    def _reset(self, term: int) -> None:
        if term != self.term:
            self.term = term
            self.vote = NONE
        self.lead = NONE
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self._reset_timeout()
        self.votes = {}
        self.lead_transferee = NONE
        self.prs = {}

    def _reset_timeout(self) -> None:
        e = self.cfg.election_tick
        self.randomized_timeout = e + self.rng.randrange(e)

    def _become_follower(self, term: int, lead: int) -> None:
        self._reset(term)
        self.role = Role.FOLLOWER
        self.lead = lead

    def _become_pre_candidate(self) -> None:
        # Term and vote stay unchanged: a pre-campaign that fails leaves no trace.
        self.role = Role.PRE_CANDIDATE
        self.votes = {}
        self.lead = NONE
        self.prs = {}

    def _become_candidate(self) -> None:
        self._reset(self.term + 1)
        self.vote = self.id
        self.role = Role.CANDIDATE

    def _become_leader(self) -> None:
        self._reset(self.term)
        self.role = Role.LEADER
        self.lead = self.id
        nxt = self.log.last_index() + 1
        for v in self.voters:
            pr = Progress(nxt, self.cfg.max_inflight)
            pr.recent_active = True
            self.prs[v] = pr
        me = self.prs[self.id]
        me.match = self.log.stable
        me.become_replicate()
        me.next = nxt
        # A no-op of the new term lets earlier-term entries commit (Raft section 5.4.2).
        self._append_as_leader(b"", ENTRY_NOOP)

    def _campaign(self, pre: bool, force: bool) -> None:
        if pre:
            self._become_pre_candidate()
            vote_type, term = MsgType.PRE_VOTE, self.term + 1
        else:
            self._become_candidate()
            vote_type, term = MsgType.VOTE, self.term
        self.votes[self.id] = True
        if self._tally() == 1:
            self._won_vote(pre)
            return
        for v in self.voters:
            if v != self.id:
                self.msgs.append(
                    Message(
                        vote_type,
                        v,
                        self.id,
                        term,
                        log_term=self.log.last_term(),
                        index=self.log.last_index(),
                        force=force,
                    )
                )

    def _won_vote(self, pre: bool) -> None:
        if pre:
            self._campaign(pre=False, force=False)
        else:
            self._become_leader()

    def _tally(self) -> int:
        """1 = won, -1 = lost, 0 = pending."""
        granted = sum(1 for g in self.votes.values() if g)
        rejected = len(self.votes) - granted
        if granted >= self.quorum:
            return 1
        if rejected >= self.quorum:
            return -1
        return 0

    # ---- message handlers ---------------------------------------------------------------

    def _handle_vote_request(self, m: Message) -> None:
        resp = MsgType.PRE_VOTE_RESP if m.type is MsgType.PRE_VOTE else MsgType.VOTE_RESP
        can_vote = (
            self.vote == m.frm
            or (self.vote == NONE and self.lead == NONE)
            or (m.type is MsgType.PRE_VOTE and m.term > self.term)
        )
        if can_vote and self.log.is_up_to_date(m.index, m.log_term):
            self.msgs.append(Message(resp, m.frm, self.id, m.term))
            if m.type is MsgType.VOTE:
                self.election_elapsed = 0
                self.vote = m.frm
        else:
            self._send(resp, m.frm, reject=True)

    def _step_follower(self, m: Message) -> None:
        if m.type is MsgType.APP:
            self.election_elapsed = 0
            self.lead = m.frm
            self._handle_append(m)
        elif m.type is MsgType.HEARTBEAT:
            self.election_elapsed = 0
            self.lead = m.frm
            self.log.commit_to(min(m.commit, self.log.last_index()))
            self._send(MsgType.HEARTBEAT_RESP, m.frm)
        elif m.type is MsgType.SNAP:
            self.election_elapsed = 0
            self.lead = m.frm
            self._handle_snapshot(m)
        elif m.type is MsgType.TIMEOUT_NOW:
            # The leader asks us to take over: skip pre-vote and the lease check.
            self._campaign(pre=False, force=True)

    def _step_candidate(self, m: Message) -> None:
        if m.type in (MsgType.APP, MsgType.HEARTBEAT, MsgType.SNAP):
            self._become_follower(m.term, m.frm)
            self._step_follower(m)
            return
        pre = self.role is Role.PRE_CANDIDATE
        expected = MsgType.PRE_VOTE_RESP if pre else MsgType.VOTE_RESP
        if m.type is not expected:
            return
        self.votes.setdefault(m.frm, not m.reject)
        result = self._tally()
        if result == 1:
            self._won_vote(pre)
        elif result == -1:
            self._become_follower(self.term, NONE)

    def _handle_append(self, m: Message) -> None:
        if m.index < self.log.committed:
            self._send(MsgType.APP_RESP, m.frm, index=self.log.committed)
            return
        last_new = self.log.maybe_append(m.index, m.log_term, m.commit, m.entries)
        if last_new is not None:
            self._send(MsgType.APP_RESP, m.frm, index=last_new)
        else:
            self._send(
                MsgType.APP_RESP,
                m.frm,
                index=m.index,
                reject=True,
                reject_hint=self.log.last_index(),
            )

    def _handle_snapshot(self, m: Message) -> None:
        snap = m.snapshot
        if snap is None or snap.index <= self.log.committed:
            self._send(MsgType.APP_RESP, m.frm, index=self.log.committed)
            return
        if self.log.match_term(snap.index, snap.term):
            # We already hold the snapshot's last entry: just fast-forward the commit.
            self.log.commit_to(snap.index)
            self._send(MsgType.APP_RESP, m.frm, index=self.log.committed)
            return
        self.log.restore(snap)
        self._pending_install = snap
        self._pending_compact = None
        self._send(MsgType.APP_RESP, m.frm, index=snap.index)

    def _step_leader(self, m: Message) -> None:
        pr = self.prs.get(m.frm)
        if pr is None:
            return
        if m.type is MsgType.APP_RESP:
            pr.recent_active = True
            if m.reject:
                if pr.maybe_decr_to(m.index, m.reject_hint):
                    if pr.state is ProgressState.REPLICATE:
                        pr.become_probe()
                    self._send_append(m.frm, send_if_empty=True)
                return
            was_paused = pr.is_paused()
            if not pr.maybe_update(m.index):
                return
            if pr.state is ProgressState.PROBE:
                pr.become_replicate()
            elif pr.state is ProgressState.SNAPSHOT and pr.match >= pr.pending_snapshot:
                pr.become_probe()
                pr.become_replicate()
            else:
                pr.free_inflight_le(m.index)
            if self._maybe_commit():
                self._bcast_append()
            elif was_paused:
                self._send_append(m.frm, send_if_empty=False)
            while self._send_append(m.frm, send_if_empty=False):
                pass  # keep the pipeline full
            if m.frm == self.lead_transferee and pr.match == self.log.last_index():
                self._send(MsgType.TIMEOUT_NOW, m.frm)
        elif m.type is MsgType.HEARTBEAT_RESP:
            pr.recent_active = True
            pr.probe_sent = False
            if pr.state is ProgressState.SNAPSHOT:
                pr.become_probe()  # the snapshot may have been lost: retry from a probe
            elif pr.state is ProgressState.REPLICATE and len(pr.inflight) >= pr.max_inflight:
                pr.inflight.popleft()  # a lost append must not stall the pipeline forever
            if pr.match < self.log.last_index():
                self._send_append(m.frm, send_if_empty=True)

    # ---- leader helpers -----------------------------------------------------------------

    def _append_as_leader(self, data: bytes, entry_type: int) -> tuple[int, int]:
        index = self.log.last_index() + 1
        self.log.append([Entry(index, self.term, entry_type, data)])
        self._need_bcast = True  # coalesced: sent when the host next asks for a Ready
        return index, self.term

    def _maybe_commit(self) -> bool:
        matches = sorted((pr.match for pr in self.prs.values()), reverse=True)
        return self.log.maybe_commit(matches[self.quorum - 1], self.term)

    def _quorum_active(self) -> bool:
        active = 0
        for v, pr in self.prs.items():
            if v == self.id or pr.recent_active:
                active += 1
            pr.recent_active = False
        return active >= self.quorum

    def _bcast_append(self) -> None:
        for v in self.voters:
            if v != self.id and self._send_append(v, send_if_empty=True):
                while self._send_append(v, send_if_empty=False):
                    pass  # fill the pipeline up to max_inflight

    def _bcast_heartbeat(self) -> None:
        for v in self.voters:
            if v != self.id:
                # Never tell a follower to commit past what it is known to hold.
                commit = min(self.prs[v].match, self.log.committed)
                self.msgs.append(Message(MsgType.HEARTBEAT, v, self.id, self.term, commit=commit))

    def _send_append(self, to: int, send_if_empty: bool) -> bool:
        """Send one append (or the snapshot) to `to`; True if something was sent."""
        pr = self.prs[to]
        if pr.is_paused():
            return False
        prev = pr.next - 1
        prev_term = self.log.term(prev)
        last = self.log.last_index()
        if prev_term is None or pr.next < self.log.first_index:
            if not pr.recent_active:
                return False
            snap = self.log.snapshot
            self.msgs.append(Message(MsgType.SNAP, to, self.id, self.term, snapshot=snap))
            pr.become_snapshot(snap.index)
            return True
        ents = self.log.slice(pr.next, last + 1, self.cfg.max_msg_bytes) if pr.next <= last else []
        if not ents and not send_if_empty:
            return False
        self.msgs.append(
            Message(
                MsgType.APP,
                to,
                self.id,
                self.term,
                log_term=prev_term,
                index=prev,
                entries=tuple(ents),
                commit=self.log.committed,
            )
        )
        if ents:
            pr.sent_entries(ents[-1].index)
        if pr.state is ProgressState.PROBE:
            pr.probe_sent = True
        return True

    def _send(
        self,
        typ: MsgType,
        to: int,
        *,
        index: int = 0,
        reject: bool = False,
        reject_hint: int = 0,
    ) -> None:
        self.msgs.append(
            Message(
                typ, to, self.id, self.term, index=index, reject=reject, reject_hint=reject_hint
            )
        )
