"""The model side of the conformance harness, independent of the implementation's state
machine: replay a partition's committed log through `model.partition`, check fence and apply
decisions with `model.fence` / `model.partition`, and map the simulated cluster onto a
`model.system.System` (an abstraction function) so the proven invariants can be evaluated
on it after every step.

Everything here raises `Divergence` (an AssertionError) with enough context to read the
failure without a debugger.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field

from epochgc.impl.partition import commands as c
from epochgc.impl.partition.statemachine import PartitionStateMachine
from epochgc.impl.raft.messages import Entry
from epochgc.model import partition as mp
from epochgc.model.cluster import GcEpoch, Report, gc_epoch
from epochgc.model.fence import fence
from epochgc.model.keys import gc_eligible
from epochgc.model.partition import PartitionState
from epochgc.model.variants import REFERENCE


class Divergence(AssertionError):
    """The implementation did something the model does not."""


@dataclass
class Placement:
    index: int
    accepted: bool


@dataclass
class Shadow:
    """The model's replay of one partition's committed log (global: every entry any replica
    applied, in index order; the Raft checker guarantees they agree at every index)."""

    name: str
    group: int
    done: int = 0  # last log index replayed
    indices: list[int] = field(default_factory=lambda: [0])
    states: list[PartitionState] = field(default_factory=lambda: [mp.INITIAL])
    decisions: dict[int, bool] = field(default_factory=dict)  # placeholder index -> accepted
    placements: dict[str, Placement] = field(default_factory=dict)  # L0 key -> where it landed
    # The implementation's state machine on the same log, never snapshotted nor restored:
    # what every replica that applied the whole log must equal, field for field.
    ref: PartitionStateMachine = field(default_factory=PartitionStateMachine)

    @property
    def state(self) -> PartitionState:
        return self.states[-1]

    def feed(self, index: int, data: bytes) -> None:
        cmd = c.decode(data)
        s = self.states[-1]
        if isinstance(cmd, c.Placeholder):
            r = mp.apply_placeholder(s, cmd.epoch, index, REFERENCE)
            new = r.state
            self.decisions[index] = r.accepted
            self.placements[cmd.key] = Placement(index, r.accepted)
        elif isinstance(cmd, c.AdvanceEpoch):
            new = mp.apply_advance_epoch(s, cmd.epoch, index, REFERENCE)
        elif isinstance(cmd, c.AdvanceReconciled):
            new = mp.apply_reconciled(s, cmd.lrlo, cmd.lro)
        elif isinstance(cmd, c.SetStartOffset):
            new = mp.apply_set_start_offset(s, cmd.start_offset)
        elif isinstance(cmd, c.AdvanceGcEpoch):  # the epoch barrier (R36)
            new = mp.apply_advance_gc_epoch(s, cmd.epoch, index)
        else:  # Barrier
            new = s
        if new != s:
            self.indices.append(index)
            self.states.append(new)
        self.done = index

    def advance(self, applied: dict[int, tuple[int, bytes]], upto: int) -> None:
        """Replay every recorded entry in (done, upto]; missing indices are Raft no-ops."""
        for i in range(self.done + 1, upto + 1):
            got = applied.get(i)
            if got is not None:
                self.feed(i, got[1])
                self.ref.apply(Entry(i, got[0], data=got[1]))
        self.done = max(self.done, upto)

    def state_at(self, index: int) -> PartitionState:
        if index > self.done:
            raise Divergence(f"{self.name}: no model state at index {index} (replayed {self.done})")
        return self.states[bisect.bisect_right(self.indices, index) - 1]

    def state_before(self, index: int) -> PartitionState:
        return self.state_at(index - 1)


def check_fence(node: int, name: str, d: object, applied: PartitionState) -> None:
    """A logged fence decision equals `model.fence.fence` on the logged inputs."""
    r = fence(d.seen_before, applied, d.term, d.epoch, REFERENCE)  # type: ignore[attr-defined]
    got = (d.admitted, d.window, d.seen_after)  # type: ignore[attr-defined]
    want = (r.admitted, r.window, r.seen)
    if got != want:
        raise Divergence(
            f"fence decision on node {node} for {name}: epoch {d.epoch} term {d.term}"  # type: ignore[attr-defined]
            f" seen {d.seen_before} applied window {mp.window(applied)}:"  # type: ignore[attr-defined]
            f" implementation (admitted, window, seen) = {got}, model = {want}"
        )


def check_apply(node: int, name: str, sh: Shadow, ev: object) -> None:
    """A logged apply decision equals the model's at the same index of the same log."""
    idx = ev.index  # type: ignore[attr-defined]
    want_state = sh.state_at(idx)
    if ev.state != want_state:  # type: ignore[attr-defined]
        raise Divergence(
            f"apply on node {node} for {name} at index {idx} ({ev.command}):"  # type: ignore[attr-defined]
            f" implementation state {ev.state}, model state {want_state}"  # type: ignore[attr-defined]
        )
    if isinstance(ev.command, c.Placeholder):  # type: ignore[attr-defined]
        want = sh.decisions.get(idx)
        res = ev.result  # type: ignore[attr-defined]
        got = None if res is None else res.accepted
        if got != want:
            raise Divergence(
                f"apply-time decision on node {node} for {name} at index {idx}: placeholder"
                f" epoch {ev.command.epoch} under window {mp.window(sh.state_before(idx))}:"  # type: ignore[attr-defined]
                f" implementation accepted={got}, model accepted={want}"
            )


# ---- GC decisions -------------------------------------------------------------------------


@dataclass(frozen=True)
class GcExpectation:
    """What the model says one GC round over the store must do."""

    error: str | None  # the round cannot run (no partition snapshot)
    decision: GcEpoch | None
    deletable: frozenset[str]
    listing: frozenset[str]
    revision: int | None
    partitions: tuple[str, ...]
    reports: tuple[Report, ...]


def model_gc(
    docs: dict[str, object], listing: Iterable[tuple[str, float]], now: float,
    max_report_age_s: float, grace_s: float,
) -> GcExpectation:
    """`docs`: the parsed `_cluster/` JSON documents by key; `listing`: (key, age) of every
    key under the data prefix before the round."""
    keys = frozenset(k for k, _ in listing)
    snap = docs.get("_cluster/partitions.json")
    if not isinstance(snap, dict):
        return GcExpectation("no partition snapshot", None, frozenset(), keys, None, (), ())
    rev = int(snap["revision"])
    parts = tuple(snap["partitions"])
    created = dict(snap["created"])
    reports: list[Report] = []
    for key, doc in sorted(docs.items()):
        if not key.startswith("_cluster/health/") or not isinstance(doc, dict):
            continue
        if now - float(doc["written_at"]) > max_report_age_s:
            continue  # stale: counts as absent
        for r in doc["replicas"]:
            if r["partition"] in created and r["created"] != created[r["partition"]]:
                continue  # another incarnation's report (R35): never counts for this one
            reports.append(Report(r["partition"], doc["node"], r["inactive_epoch"]))
    g = gc_epoch(rev, list(parts), reports, REFERENCE)
    if g.M is None:
        return GcExpectation(None, g, frozenset(), keys, rev, parts, tuple(reports))
    dele = frozenset(k for k, age in listing if gc_eligible(k, age, g.M, grace_s).eligible)
    return GcExpectation(None, g, dele, keys, rev, parts, tuple(reports))
