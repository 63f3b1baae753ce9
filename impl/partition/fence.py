"""The leader's fence for one partition (the design gist's windowed fence).

Protocol, in order: sync with the log (a barrier entry of the current term must have been
applied, so the applied window includes every earlier term's entries); decide with
`model.fence.fence` on the term-scoped seen window; in-window => shared lock; above-window =>
exclusive lock, slide the seen window, downgrade; below => `StaleEpoch` with the window.
The shared lock is held until the placeholder is queued into the partition's Raft log
(`release_at_enqueue`, the default; production since its PR #31386) or, with it off, until the
replicate completes or fails. Either way the replicate is proposed with the fence's term
(expected-term), so a leadership change aborts it.

Why releasing at enqueue keeps the lock's ordering: the lock exists so that every placeholder
admitted under a window precedes, in the log, the placeholder of the slide that replaces that
window (a slide takes the exclusive lock, so it waits for every shared holder). What the slide
needs is the holders' log positions, not their outcomes: once `GroupRaft.propose` has
returned, the holder's entry is in the leader's log at an index that no later proposal of the
same term can precede (the contract on `GroupRaft.propose`). The slide proposes later, with
its own fence's term: the same term, so at a higher index (in any log that holds the slide's
entry the holder's entry comes first: Raft's log matching, an (index, term) pair fixes every
entry before it; if the holder's entry is lost to a new leader, so is the slide's), or a later
term, whose fence first syncs (its barrier applies after every surviving earlier-term entry).
What changes is only what a slide's decision sees: the applied state may not yet include the
released holders' entries. The decision reads the applied window only through
`max(seen, applied)` bounds (`model.fence.effective_window`); after the sync every entry of a
term that moves the window is a slide through this fence (a placeholder, or the housekeeper's
advance_epoch), proposed with no await after its decision, so a lagging applied window is
never wider than the seen one and the decision is the same at any lag. With the lock held
through the replicate, a shared holder's decision could see such a lag anyway.

The seen window only decides early admission (liveness): the state machine re-checks the
window at apply time (`model.partition.apply_placeholder`), which is where safety lives.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from epochgc.impl.partition import commands as c
from epochgc.impl.partition.rwlock import EXCLUSIVE, SHARED, RWLock
from epochgc.impl.partition.statemachine import PartitionStateMachine, PlaceholderResult
from epochgc.model.fence import SeenWindow, fence
from epochgc.model.partition import PartitionState, window
from epochgc.model.variants import REFERENCE, Variant


class GroupRaft(Protocol):
    """The Raft operations a partition leader needs, for one group (both worlds)."""

    def propose(self, data: bytes, expected_term: int | None) -> asyncio.Future[Any]:
        """Queue `data` into the group's Raft log and return the future of its apply result.

        Contract the fence's release at enqueue relies on (in-term queue order = log order):
        when this returns, the entry is already appended to this leader's in-memory log, in
        term `expected_term`, at the index after every entry appended before it; a later
        call that also returns (same term) gets a higher index. It either appends now or
        raises `ProposalRefused` having appended nothing: no queue in front of the log, no
        re-queue, no retry that could put an entry behind a later one. Both worlds provide
        this through `MultiRaftHost.propose` -> `RaftNode.propose` (`_append_as_leader`:
        index = last index + 1, synchronously); a leader's log only grows during its term
        (only a follower truncates, `RaftLog.append`), and group commit and pipelined
        appends change when entries become durable and are sent, never their indexes."""
        ...

    def term(self) -> int: ...

    def is_leader(self) -> bool: ...

    def leader(self) -> int: ...


class FenceError(Exception):
    pass


class StaleEpoch(FenceError):
    """Rejected below the window, at the fence or at apply time (`at`)."""

    def __init__(self, epoch: int, window: tuple[int, int] | None, at: str) -> None:
        # A partition with nothing applied yet has no window (newuser8 I7: "below window
        # None", a Python None in an operator's message).
        where = f"below window {window}" if window is not None else "refused (no window yet)"
        super().__init__(f"stale_cluster_epoch: epoch {epoch} {where} ({at})")
        self.epoch = epoch
        self.window = window
        self.at = at


class NotLeaderError(FenceError):
    """`leader_hint` 0: no leader known (node ids start at 1); `reason`: why none was
    reached (newuser12 P13: "not the leader (leader hint 0)" named a node that is not)."""

    def __init__(self, leader_hint: int, reason: str | None = None) -> None:
        if reason:
            words = f"no leader reached ({reason})"
        elif leader_hint:
            words = f"not the leader (node {leader_hint} is)"
        else:
            words = "not the leader, and no leader known (no quorum, or an election)"
        super().__init__(words)
        self.leader_hint = leader_hint


class PartitionDeleted(FenceError):
    """The partition was deleted (R34): refused at the fence or at apply time (`at`); the
    write was not and will never be acknowledged."""

    def __init__(self, partition: str, at: str) -> None:
        super().__init__(f"partition_deleted: partition {partition!r} was deleted; the write "
                         f"was refused ({at}) and not acknowledged")
        self.partition = partition
        self.at = at


class ReplicateFailed(FenceError):
    """The placeholder's fate is unknown or negative (leadership lost, overwritten, fault)."""


@dataclass(frozen=True)
class FenceDecision:
    term: int
    epoch: int
    admitted: bool
    kind: str  # "in_window" | "above_window" | "below_window"
    window: tuple[int, int] | None
    seen_before: SeenWindow | None
    seen_after: SeenWindow | None

    @property
    def slid(self) -> bool:
        return self.seen_before != self.seen_after


@dataclass(frozen=True)
class _LastDecision:
    """The inputs (by identity) and the result of a fence's last decision."""

    seen: SeenWindow | None
    state: PartitionState
    decision: FenceDecision


class PartitionFence:
    def __init__(
        self,
        raft: GroupRaft,
        sm: PartitionStateMachine,
        variant: Variant = REFERENCE,
        on_decision: Callable[[FenceDecision], None] | None = None,
        on_admitted: Callable[[c.Placeholder, int], None] | None = None,
        name: str = "",
        release_at_enqueue: bool = True,
    ) -> None:
        self.name = name  # the partition's name, for errors
        # True: a placeholder's shared lock is released once its proposal is in the Raft
        # log; False: held until its replicate completes or fails (the design notes' rule).
        self.release_at_enqueue = release_at_enqueue
        self.raft = raft
        self.sm = sm
        self.variant = variant
        self.on_decision = on_decision
        # Observer (conformance harness): the placeholder a fence admitted, with the term it
        # was admitted in, so the term of the entry that lands can be checked against it.
        self.on_admitted = on_admitted
        self.seen: SeenWindow | None = None
        self.lock = RWLock()
        self.synced_term: int | None = None
        self._barrier: tuple[int, asyncio.Future[Any]] | None = None
        self._last: _LastDecision | None = None
        # Fault injection (harness): return True to fail this replicate after its fence.
        self.fail_replicate: Callable[[int], bool] | None = None
        # Delay injection (harness): awaited between the fence and the propose, as a slow
        # caller would be; the lock is held throughout (it is released only once the
        # placeholder is queued), which is what orders the log.
        self.before_propose: Callable[[int], Awaitable[None]] | None = None

    def on_leadership(self, term: int, is_leader: bool) -> None:
        """Leadership changed: the sync is per term; with a term-scoped variant the seen
        window of an old term is useless, so it is forgotten (the model ignores it anyway)."""
        if not is_leader or term != self.synced_term:
            self.synced_term = None
        if self.variant.term_scoped_seen and (
            not is_leader or (self.seen is not None and self.seen.term != term)
        ):
            self.seen = None

    async def sync(self) -> int:
        """Return the current term once this leader has applied its own barrier of it."""
        if not self.raft.is_leader():
            raise NotLeaderError(self.raft.leader())
        term = self.raft.term()
        if self.synced_term == term:
            return term
        if self._barrier is None or self._barrier[0] != term or (self._barrier[1].done() and (
            self._barrier[1].cancelled() or self._barrier[1].exception() is not None
        )):
            try:
                fut = self.raft.propose(c.encode(c.Barrier()), term)
            except Exception as e:  # refused at once: not leader / term moved / transfer
                raise NotLeaderError(self.raft.leader()) from e
            self._barrier = (term, fut)
        fut = self._barrier[1]
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            raise NotLeaderError(self.raft.leader()) from e
        if self.raft.term() == term and self.raft.is_leader():
            self.synced_term = term
            return term
        raise NotLeaderError(self.raft.leader())

    def _decide(self, term: int, epoch: int) -> FenceDecision:
        """`model.fence.fence` on the seen window, the applied state, the term and the
        epoch. The model's function is pure and both windows are immutable values, so the
        last decision is reused while all four are the very same (a stream of writes at one
        epoch, the usual case, decides once per change of window)."""
        before, state = self.seen, self.sm.state
        last = self._last
        if (last is not None and last.seen is before and last.state is state
                and last.decision.term == term and last.decision.epoch == epoch):
            return last.decision
        r = fence(before, self.sm.state, term, epoch, self.variant)  # (state is self.sm.state)
        if not r.admitted:
            kind = "below_window"
        elif r.seen != before:
            kind = "above_window"
        else:
            kind = "in_window"
        d = FenceDecision(term, epoch, r.admitted, kind, r.window, before, r.seen)
        self._last = _LastDecision(before, state, d)
        return d

    def _report(self, d: FenceDecision) -> None:
        if self.on_decision is not None:
            self.on_decision(d)

    async def admit(self, epoch: int) -> int:
        """Fence `epoch`; on return this caller holds the shared lock for term (returned)."""
        while True:
            if self.sm.deleted:
                raise PartitionDeleted(self.name, "fence")
            term = await self.sync()
            d = self._decide(term, epoch)
            if not d.admitted:
                self._report(d)
                raise StaleEpoch(epoch, d.window, "fence")
            if epoch < self.sm.creation_revision:  # A2; e.g. an earlier incarnation's write
                raise StaleEpoch(epoch, window(self.sm.state), "fence: below the partition's "
                                 f"creation revision {self.sm.creation_revision}")
            mode = SHARED if d.kind == "in_window" else EXCLUSIVE
            waited = not self.lock.try_acquire(mode)
            if waited:
                await self.lock.acquire(mode)
            # Re-check under the lock: the term may have moved or the partition been deleted
            # while this fence synced or waited.
            if self.raft.term() != term or not self.raft.is_leader():
                self.lock.release(mode)
                continue
            if self.sm.deleted:
                self.lock.release(mode)
                raise PartitionDeleted(self.name, "fence")
            if waited:  # the window may have moved while waiting: decide again
                d = self._decide(term, epoch)
            # Not waited: nothing ran between the decision and the grant (no await), so the
            # decision stands (a second `_decide` was a sixth of the fence's CPU per write).
            if not d.admitted:
                self.lock.release(mode)
                self._report(d)
                raise StaleEpoch(epoch, d.window, "fence")
            if epoch <= self.sm.state.barrier_epoch:
                # R37 (issue 30): at or below the epoch barrier's candidate it would be
                # refused at apply; decided under the lock, which the barrier's command
                # holds exclusively until it is applied here.
                self.lock.release(mode)
                raise StaleEpoch(epoch, window(self.sm.state), "fence: at or below the "
                                 f"epoch barrier {self.sm.state.barrier_epoch}")
            if d.kind == "above_window" and mode == SHARED:
                self.lock.release(mode)  # it must slide now: queue for the exclusive lock
                continue
            if mode == EXCLUSIVE:
                self.seen = d.seen_after
                self.lock.downgrade()
            self._report(d)
            return term

    async def replicate_placeholder(self, ph: c.Placeholder) -> PlaceholderResult:
        """Fence and replicate; returns the apply result of an accepted placeholder.

        Raises StaleEpoch (below the window at the fence, or rejected at apply),
        PartitionDeleted, NotLeaderError (at the fence) or ReplicateFailed (the proposal was
        refused, or its fate is unknown or negative). The shared lock taken by the fence is
        released once the placeholder is in the Raft log (`release_at_enqueue`) or once the
        replicate is over; on every path it is released exactly once."""
        term = await self.admit(ph.epoch)
        if self.on_admitted is not None:
            self.on_admitted(ph, term)
        held = True
        try:
            if self.before_propose is not None:
                await self.before_propose(ph.epoch)
            if self.fail_replicate is not None and self.fail_replicate(ph.epoch):
                raise ReplicateFailed("injected replicate failure after the fence")
            try:
                fut = self.raft.propose(c.encode(ph), term)
            except Exception as e:
                if self.sm.deleted:
                    raise PartitionDeleted(self.name, "fence") from e
                raise ReplicateFailed(f"proposal refused: {e}") from e
            if self.release_at_enqueue:
                # Queued: its index is fixed before any later proposal of this term, so a
                # slide may now proceed (module docstring; GroupRaft.propose's contract).
                held = False
                self.lock.release(SHARED)
            try:
                res = await fut
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if self.sm.deleted:  # the group was removed under it: refused for good
                    raise PartitionDeleted(self.name, "apply") from e
                raise ReplicateFailed(f"replicate failed: {e}") from e
        finally:
            if held:
                self.lock.release(SHARED)
        assert isinstance(res, PlaceholderResult)
        if res.deleted:
            raise PartitionDeleted(self.name, "apply")
        if not res.accepted:
            raise StaleEpoch(ph.epoch, res.window, "apply")
        return res

    async def replicate_command(self, cmd: c.Command) -> Any:
        """A non-placeholder command (advance_epoch, reconciled, start offset) of this term."""
        term = await self.sync()
        try:
            fut = self.raft.propose(c.encode(cmd), term)
        except Exception as e:
            raise ReplicateFailed(f"proposal refused: {e}") from e
        try:
            return await fut
        except asyncio.CancelledError:
            raise
        except Exception as e:
            raise ReplicateFailed(f"replicate failed: {e}") from e
