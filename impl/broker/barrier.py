"""The epoch barrier on a partition's leader (SPEC R36-R38).

The controller's barrier mint (`MINT_BARRIER`) moves the epoch service past the candidate
E and makes every broker invalidate its epoch cache as it applies it. Then each partition
leader, for every partition it leads whose applied barrier epoch is below E:

1. drains: takes the fence's exclusive lock, which waits for every placeholder admitted
   before it (each holds the shared lock until its replicate returns, or until it is queued
   into Raft: either way its entry is before ours in the log);
2. writes `advance_gc_epoch(E)` in its term, releasing the lock once it is applied;
3. moves LRLO over command entries up to, never past, the next unreconciled placeholder
   (the housekeeper's rule, R28), so an idle partition's pending epoch is promoted at once.

A placeholder stamped at or below E that reaches the log after the command anyway (a
producer that read the old epoch before the invalidation, or a replicate whose outcome its
producer never learned) is refused at apply (R37): the drain buys fewer rejections, the
apply-time check buys safety.
"""

from __future__ import annotations

from dataclasses import dataclass

from epochgc.impl.partition.commands import AdvanceGcEpoch, AdvanceReconciled
from epochgc.impl.partition.fence import PartitionFence
from epochgc.impl.partition.rwlock import EXCLUSIVE
from epochgc.impl.partition.statemachine import PartitionStateMachine


@dataclass(frozen=True)
class BarrierStep:
    """What one partition's barrier round did: `written` when this leader wrote the
    command (False: the partition already had a barrier epoch at or above the candidate);
    `lrlo` the LRLO it moved to, if it moved it."""

    partition: str
    candidate: int
    written: bool
    lrlo: int | None


def needs_barrier(sm: PartitionStateMachine, candidate: int) -> bool:
    """Has this partition not yet applied a barrier epoch at or above `candidate` (and
    is the candidate at least its creation revision - 1)?"""
    cur = sm.state.barrier_epoch
    # A partition created after the barrier's mint accepts nothing at or below its creation
    # revision (A2): a lower candidate would pull its M(p) below an earlier snapshot's M.
    return candidate > 0 and candidate + 1 >= sm.creation_revision and cur < candidate


def promotable(sm: PartitionStateMachine) -> bool:
    """Is a pending barrier epoch waiting only for LRLO to move over command entries (no
    unreconciled placeholder before its command)?"""
    off = sm.state.barrier_offset
    lrlo = sm.state.last_reconciled_log_offset
    return lrlo < off <= sm.housekeeping_lrlo()  # none: -1 is never above LRLO


async def advance_gc_epoch_once(partition: str, sm: PartitionStateMachine,
                                fence: PartitionFence, candidate: int) -> BarrierStep:
    """Drain, write advance_gc_epoch(candidate), move LRLO over command entries (leader
    only: NotLeaderError / ReplicateFailed from the fence otherwise; retried next round)."""
    written = False
    if needs_barrier(sm, candidate):
        await fence.sync()
        await fence.lock.acquire(EXCLUSIVE)  # the drain
        try:
            if needs_barrier(sm, candidate):  # another round may have written it meanwhile
                await fence.replicate_command(AdvanceGcEpoch(candidate))
                written = True
        finally:
            fence.lock.release(EXCLUSIVE)
    lrlo = sm.housekeeping_lrlo()
    moved: int | None = None
    if promotable(sm):
        await fence.replicate_command(AdvanceReconciled(sm.state.last_reconciled_offset, lrlo))
        moved = lrlo
    return BarrierStep(partition, candidate, written, moved)
