"""Housekeeper for idle partitions: advance_epoch to max(current cluster epoch, creation
revision) (the max with the creation revision is what the model proves safe), then move LRLO
over command entries up to, never past, the next unreconciled placeholder, so an idle
partition's M(p) keeps rising and does not block GC."""

from __future__ import annotations

from dataclasses import dataclass

from epochgc.impl.partition.commands import AdvanceEpoch, AdvanceReconciled
from epochgc.impl.partition.fence import PartitionFence, StaleEpoch
from epochgc.impl.partition.rwlock import SHARED
from epochgc.impl.partition.statemachine import PartitionStateMachine


@dataclass(frozen=True)
class HousekeepResult:
    advanced_to: int | None
    lrlo: int | None


async def housekeep_once(
    sm: PartitionStateMachine,
    fence: PartitionFence,
    cluster_epoch: int,
    creation_revision: int,
) -> HousekeepResult:
    target = max(cluster_epoch, creation_revision)
    advanced: int | None = None
    cur = sm.state.max_applied_epoch
    if cur is None or target > cur:
        # Through the fence like a placeholder: the exclusive lock waits for in-flight
        # placeholders of the old window, and the seen window slides with the log.
        try:
            term = await fence.admit(target)
        except StaleEpoch:
            term = None
        if term is not None:
            try:
                await fence.replicate_command(AdvanceEpoch(target))
                advanced = target
            finally:
                fence.lock.release(SHARED)
    lrlo = sm.housekeeping_lrlo()
    moved: int | None = None
    if lrlo > sm.state.last_reconciled_log_offset:
        await fence.replicate_command(AdvanceReconciled(sm.state.last_reconciled_offset, lrlo))
        moved = lrlo
    return HousekeepResult(advanced, moved)
