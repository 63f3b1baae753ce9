"""The schedules the bounded checks follow: one tour that fires every action (reachability
witnesses), one shape per known production bug (F1-F5) and the liveness witnesses.

Each bug schedule names the variant that has the bug; the runner also runs it under
`reference`, where the solver must find no choice of numbers that breaks safety.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from epochgc.model.invariants import inv_floor, inv_safety
from epochgc.model.logic import Cond, neg
from epochgc.model.system import FAILED, FENCED, System, initial
from epochgc.model.variants import REFERENCE, Variant

Schedule = list[tuple[str, dict[str, Any]]]

# Template for the induction proofs: one partition on two replicas and one tracked write.
# Every other write is `other_write` / `late_land` (any epoch the assumptions allow), every
# other partition a `foreign` report chosen by the adversary (spec section P).
INDUCTION_TEMPLATE = initial(1, 2, [(0, 0)], 1)
# Template for the bounded traces: two tracked writes, so two fences can land out of order.
TRACE_TEMPLATE = initial(1, 2, [(0, 0), (1, 0)], 2)


def _mints(n: int) -> Schedule:
    return [("mint", {})] * n


# An object reference may delete along a bug's shape (issue 28: the "cannot break safety
# in reference" rows were vacuous, the final deletion never enabled): o1, stamped below
# the window, whose write the fence rejects (failed: not live), is below M(p0).
DELETABLE: Schedule = [("upload", {"o": 1}), ("fence_write", {"w": 1})]


def _gc_tail(foreign: tuple[Any, ...] = ()) -> Schedule:
    return [
        ("sync_replica", {"p": 0, "r": 0}),
        ("report", {"p": 0, "r": 0}),
        ("publish_snapshot", {}),
        ("gc_compute", {"foreign": foreign}),
        ("gc_delete", {}),
    ]


# Every action once, in an order where each can take effect.
TOUR: Schedule = [
    ("create_partition", {"p": 0}),
    ("mint", {}),
    ("mint", {}),
    ("publish_snapshot", {}),
    ("upload", {"o": 0}),
    ("fence_write", {"w": 0}),
    ("land_write", {"w": 0}),
    ("copy_to_l1", {"w": 0}),
    ("upload", {"o": 1}),
    ("fence_write", {"w": 1}),
    ("fail_replicate", {"w": 1}),
    ("mint", {}),
    ("other_write", {"p": 0}),
    ("late_land", {"p": 0}),
    ("mint", {}),
    ("phantom_fence", {"p": 0}),
    ("mint", {}),
    ("housekeep", {"p": 0}),
    ("give_up", {"w": 1}),
    ("reconcile", {"p": 0}),
    ("change_leader", {"p": 0}),
    ("restart", {"p": 0}),
    ("sync_replica", {"p": 0}),
    ("report", {"p": 0}),
    ("expire_report", {"p": 0}),
    ("report", {"p": 0}),
    ("gc_compute", {"foreign": ()}),
    ("gc_delete", {}),
    ("invalidate_caches", {}),
    ("barrier", {"p": 0}),
]


def changed(states: Sequence[System]) -> Cond:
    """The last step changed the state (for gc_delete: it deleted an object)."""
    return states[-1] != states[-2]


@dataclass(frozen=True)
class BugScenario:
    name: str  # the brief's label
    variant: str
    title: str
    schedule: Schedule
    invariant: str  # which invariant the solver must break
    # Under `reference` the schedule's final gc_delete can delete an object (so "cannot
    # break safety in reference" is not vacuous); False where the shape itself rules any
    # deletion out in reference (then that is what its row says, and proves).
    reference_deletes: bool = True
    why_no_deletion: str = ""

    def goal(self, v: Variant) -> Any:
        inv = {"safety": inv_safety, "floor": inv_floor}[self.invariant]
        return lambda states: neg(inv(states[-1], v))


BUGS: tuple[BugScenario, ...] = (
    BugScenario(
        "F1", "fence-only",
        "phantom bump: a slide whose replicate failed lets a write land below the window",
        [("create_partition", {"p": 0}), *_mints(5),
         ("other_write", {"p": 0}), ("phantom_fence", {"p": 0}),
         ("other_write", {"p": 0}), ("other_write", {"p": 0}),
         ("upload", {"o": 0}), ("fence_write", {"w": 0}), ("land_write", {"w": 0}),
         ("reconcile", {"p": 0}), *DELETABLE, *_gc_tail()],
        "safety",
    ),
    BugScenario(
        "F2", "untermed",
        "stale window across terms: a returning leader admits an epoch the log moved past",
        [("create_partition", {"p": 0}), *_mints(5),
         ("other_write", {"p": 0}), ("change_leader", {"p": 0, "r": 1}),
         ("other_write", {"p": 0}), ("other_write", {"p": 0}),
         ("change_leader", {"p": 0, "r": 0}),
         ("upload", {"o": 0}), ("fence_write", {"w": 0}), ("land_write", {"w": 0}),
         ("reconcile", {"p": 0}), *DELETABLE, *_gc_tail()],
        "safety",
    ),
    BugScenario(
        "F3", "fence-only",
        "out-of-order landing: two in-window fences land in the other order",
        [("create_partition", {"p": 0}), *_mints(5), ("other_write", {"p": 0}),
         ("upload", {"o": 0}), ("upload", {"o": 1}),
         ("fence_write", {"w": 0}), ("fence_write", {"w": 1}), ("land_write", {"w": 1}),
         ("other_write", {"p": 0}), ("land_write", {"w": 0}), ("copy_to_l1", {"w": 1}),
         ("reconcile", {"p": 0}), *_gc_tail()],
        "safety",
    ),
    BugScenario(
        "F4-missing", "skip-missing",
        "late partition: a partition without a report is skipped instead of blocking",
        [("mint", {}), ("create_partition", {"p": 0}), ("publish_snapshot", {}),
         ("upload", {"o": 0}), ("gc_compute", {}), ("gc_delete", {"o": 0})],
        "safety", False,
        "p0 is in the snapshot and never reported: reference blocks the round",
    ),
    BugScenario(
        "F4-uncapped", "uncapped",
        "late partition: M is not capped by the snapshot revision",
        [("mint", {}), ("publish_snapshot", {}), ("create_partition", {"p": 0}),
         ("upload", {"o": 0}), ("gc_compute", {}), ("gc_delete", {"o": 0})],
        "safety", False,
        "o0 feeds p0, created after the snapshot: its stamp is above every M reference "
        "computes",
    ),
    BugScenario(
        "F5", "watermark-from-max",
        "wrong watermark: M(p) from max_applied deletes unreconciled data",
        [("create_partition", {"p": 0}), *_mints(3),
         ("upload", {"o": 0}), ("fence_write", {"w": 0}), ("land_write", {"w": 0}),
         ("other_write", {"p": 0}), *DELETABLE, *_gc_tail()],
        "safety",
    ),
    # The epoch barrier (R36-R38) as production has it (no apply-time check of the
    # candidate): the drain counts a replicate of unknown outcome as answered, its
    # placeholder commits after the barrier's command, and the promoted epoch covers it.
    BugScenario(
        "B1", "barrier-prod",
        "barrier: a replicate of unknown outcome commits after advance_gc_epoch, below the "
        "promoted safe epoch",
        [("create_partition", {"p": 0}), *_mints(2),
         ("upload", {"o": 0}), ("fence_write", {"w": 0}), ("fail_replicate", {"w": 0}),
         ("mint", {}), ("invalidate_caches", {}), ("barrier", {"p": 0}),
         ("land_write", {"w": 0}), ("reconcile", {"p": 0}), *_gc_tail()],
        "safety",
    ),
)


@dataclass(frozen=True)
class LivenessScenario:
    name: str
    variant: str
    title: str
    schedule: Schedule
    write: int  # the write the variant rejects at its fence and `reference` admits

    def goal(self, v: Variant) -> Any:
        def g(states: Sequence[System]) -> Cond:
            return states[-1].writes[self.write].status == FAILED
        return g

    def reference_goal(self, states: Sequence[System], ref: Sequence[System]) -> Cond:
        return ref[-1].writes[self.write].status == FENCED

    def reference_admits(self, trace_params: Sequence[dict[str, Any]]) -> bool:
        from epochgc.model.actions import step

        s = TRACE_TEMPLATE
        for (action, _), p in zip(self.schedule, trace_params, strict=True):
            s = step(s, REFERENCE, action, **p)
        return s.writes[self.write].status == FENCED


LIVENESS: tuple[LivenessScenario, ...] = (
    LivenessScenario(
        "F6-strict", "strict",
        "a single accepted epoch rejects an in-flight write the window admits",
        [("create_partition", {"p": 0}), *_mints(3), ("other_write", {"p": 0}),
         ("upload", {"o": 0}), ("upload", {"o": 1}),
         ("fence_write", {"w": 1}), ("fence_write", {"w": 0})],
        0,
    ),
    LivenessScenario(
        "collapse", "collapse",
        "collapsing the seen window on a new term rejects a write the window admits",
        [("create_partition", {"p": 0}), *_mints(4), ("other_write", {"p": 0}),
         ("other_write", {"p": 0}), ("change_leader", {"p": 0, "r": 1}),
         ("upload", {"o": 0}), ("upload", {"o": 1}),
         ("fence_write", {"w": 1}), ("fence_write", {"w": 0})],
        0,
    ),
)

