"""Checks on the implementation's own state (issue 16), run by `Harness.check_step`:

- restore(snapshot()) == state for every partition and controller state machine, and every
  replica that has applied the whole committed log equals a reference state machine that
  applied the same log and was never snapshotted or restored (so a restart from a snapshot
  that lost the floor or the unreconciled placeholders is caught at once, not when GC
  finally deletes something);
- the Raft term of every applied placeholder is a term its fence admitted it in;
- an apply-time rejection of a placeholder admitted in the same term is a divergence unless
  an injected fault explains it (the window slid around the fence's lock, or an in-window
  admission in a leader's term where a failed replicate left a phantom slide: F1);
- the model's assumptions on the running cluster: A2 (placeholder epoch >= the partition's
  creation revision), A3 (no broker's cached epoch leads the controller's), A4 (LRLO never
  passes an unreconciled placeholder).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from epochgc.impl.controller.statemachine import ControllerStateMachine
from epochgc.impl.partition import commands as c
from epochgc.impl.partition.statemachine import PartitionStateMachine
from epochgc.impl.raft.messages import Snapshot
from tests.conformance.shadow import Divergence


def sm_state(sm: PartitionStateMachine) -> tuple[Any, ...]:
    """The whole state of a partition state machine (everything a snapshot must keep)."""
    return (sm.state, tuple(sm.placeholders), tuple(sm.l1), sm.next_offset, sm.last_index)


def controller_state(sm: ControllerStateMachine) -> tuple[Any, ...]:
    # The deleted incarnations too (issue 31): a restore that loses them would let a broker
    # keep, or re-add, a deleted partition's group.
    return (sm.revision, sm.epoch, tuple(sorted(sm.partitions.items())),
            tuple(sorted(sm.deleted.items())), sm.last_index)


# (variant, index, snapshot bytes) -> the state `restore` made of them. Restore is a function
# of those alone, and the replicas of a partition snapshot the same bytes at the same
# index: one restore serves them all (the restores were ~1% of a harness step).
_RESTORED: dict[tuple[Any, int, bytes], tuple[Any, ...]] = {}


def check_restore_roundtrip(where: str, sm: PartitionStateMachine) -> None:
    snap = sm.snapshot()
    k = (sm.variant, sm.last_index, snap)
    restored = _RESTORED.get(k)
    if restored is None:
        again = PartitionStateMachine(sm.variant)
        again.restore(Snapshot(sm.last_index, 0, snap))
        restored = sm_state(again)
        if len(_RESTORED) >= 4096:
            _RESTORED.clear()
        _RESTORED[k] = restored
    if restored != sm_state(sm):
        raise Divergence(
            f"restore(snapshot()) != state for {where}:\n state    {sm_state(sm)}\n"
            f" restored {restored}"
        )


def check_controller_roundtrip(where: str, sm: ControllerStateMachine) -> None:
    again = ControllerStateMachine()
    again.restore(Snapshot(sm.last_index, 0, sm.snapshot()))
    if controller_state(again) != controller_state(sm):
        raise Divergence(
            f"controller restore(snapshot()) != state on {where}: {controller_state(sm)}"
            f" restored as {controller_state(again)}"
        )


def check_matches_reference(where: str, sm: PartitionStateMachine,
                            ref: PartitionStateMachine) -> None:
    if sm_state(sm) != sm_state(ref):
        raise Divergence(
            f"{where}: the whole state differs from a replica that applied the same committed"
            f" log without snapshots or restarts:\n replica   {sm_state(sm)}\n reference"
            f" {sm_state(ref)}"
        )


def check_a4(where: str, sm: PartitionStateMachine) -> None:
    """A4: LRLO never passes an accepted placeholder whose records are not reconciled."""
    lrlo, lro = sm.state.last_reconciled_log_offset, sm.state.last_reconciled_offset
    for p in sm.placeholders:
        if p.log_index <= lrlo and p.last > lro:
            raise Divergence(
                f"A4 on {where}: LRLO {lrlo} passed the unreconciled placeholder at log index"
                f" {p.log_index} (records {p.base}..{p.last}, LRO {lro}, key {p.key})"
            )


def check_a3(nid: int, cached: int | None, controller_epoch: int) -> None:
    """A3: a broker's cached epoch never leads the controller's (the highest applied)."""
    if cached is not None and cached > controller_epoch:
        raise Divergence(
            f"A3 on node {nid}: cached cluster epoch {cached} leads the controller's"
            f" {controller_epoch}"
        )


@dataclass
class LandedChecks:
    """Per-placeholder checks at apply: A2, the landed term, the rejection divergence.
    `admitted[(partition, key)]` holds the terms fences admitted that placeholder in."""

    admitted: dict[tuple[str, str], set[int]]
    explained: set[tuple[str, str]]  # placeholders whose rejection an injected fault explains
    done: set[tuple[str, int]]  # (partition, index) already checked (every replica applies)

    def check(self, node: int, partition: str, creation_revision: int, index: int,
              entry_term: int, cmd: c.Placeholder, accepted: bool) -> str | None:
        """Raises Divergence; returns a counter name for what was checked."""
        if (partition, index) in self.done:
            return None
        self.done.add((partition, index))
        if cmd.epoch < creation_revision:
            raise Divergence(
                f"A2 on {partition}: placeholder at index {index} (key {cmd.key}) has epoch"
                f" {cmd.epoch} below the partition's creation revision {creation_revision}"
            )
        terms = self.admitted.get((partition, cmd.key), set())
        if entry_term not in terms:
            raise Divergence(
                f"placeholder {cmd.key} of {partition} landed at index {index} in term"
                f" {entry_term}, but its fence admitted it in terms {sorted(terms)} (a"
                f" placeholder must be proposed with its fence's term)"
            )
        if not accepted and (partition, cmd.key) not in self.explained:
            raise Divergence(
                f"apply-time rejection on node {node} of {partition}'s placeholder {cmd.key}"
                f" (epoch {cmd.epoch}, index {index}) that the fence admitted in the same term"
                f" {entry_term}, with no injected fault to explain it"
            )
        return "check.landed_placeholders"
