"""The abstraction function (the cluster as a `model.system.System`) and the model's proven
invariants on it after every step, and its transition invariants between steps."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from epochgc.model import invariants
from epochgc.model import partition as mp
from epochgc.model import system as ms
from tests.conformance.deployment import ALL_PARTITIONS, NODES
from tests.conformance.shadow import Divergence
from tests.conformance.state import HarnessState


class Abstraction(HarnessState):
    def abstract(self) -> ms.System:
        """The abstraction function: the cluster as a `model.system.System`."""
        # The committed controller state (deep run, seeds 353, 357: a snapshot published by a
        # leader that crashed before its followers learnt the commit of its delete).
        ctl = self.committed_controller()
        self.max_revision = max(self.max_revision, ctl.revision)
        snap_rev, snap_parts = self.snapshot if self.snapshot is not None else (0, ())
        parts = []
        index = {p: i for i, p in enumerate(ALL_PARTITIONS)}
        for p in ALL_PARTITIONS:
            info = ctl.partitions.get(p)
            sh = self.shadows.get(p)
            if info is None or sh is None or sh.group != info.group:
                parts.append(ms.Partition(replicas=tuple(ms.Replica() for _ in NODES)))
                continue
            truth = mp.inactive_epoch(sh.state)
            reps = []
            for nid in NODES:
                b = self.c.brokers.get(nid)
                seen = b.replicas[p].fence.seen if b is not None and p in b.replicas else None
                # A report of an earlier incarnation is not this one's (the model drops a
                # deleted partition's reports; see `_check_lifecycle` for the impl's side).
                mine = self.health_group.get(nid, {}).get(p) == info.group
                reps.append(self._intern(ms.Replica, seen, truth,
                                         self.health.get(nid, {}).get(p) if mine else None))
            parts.append(ms.Partition(
                created=True, creation_revision=info.creation_revision, state=sh.state,
                log_end=sh.done + 1, replicas=tuple(reps),
                # a snapshot lists the incarnation created by its revision, not a later one
                in_snapshot=p in snap_parts and info.creation_revision <= snap_rev,
            ))
        objects, writes = [], []
        # Many objects share (partition, epoch): resolve each pair once per abstraction.
        incs: dict[tuple[str, int], tuple[int, bool]] = {}
        memo, deleted, shadows = self._interned, self.deleted, self.all_shadows
        Obj, Write = ms.Obj, ms.Write  # the model's classes, interned inline
        for key, (epoch, targets) in self.objects.items():
            o = len(objects)
            k: tuple[Any, ...] = (Obj, ms.DELETED if key in deleted else ms.STORED, epoch)
            v = memo.get(k)
            if v is None:
                v = memo[k] = Obj(*k[1:])
            objects.append(v)
            for p in targets:
                inc = incs.get((p, epoch))
                if inc is None:
                    inc = incs[(p, epoch)] = self._incarnation(p, epoch, ctl)
                g, gone = inc
                if gone:  # R33: every write to a deleted incarnation is orphaned
                    k = (Write, o, index[p], ms.ORPHANED)
                else:
                    sh = shadows.get(g)
                    pl = sh.placements.get(key) if sh is not None else None
                    if pl is None:
                        k = (Write, o, index[p], ms.FENCED)
                    else:
                        # R27's ghost: the reconciler copies a placeholder to L1 before LRLO
                        # passes it, so what LRLO passed is what the harness knows is in L1.
                        lrlo = shadows[g].state.last_reconciled_log_offset
                        k = (Write, o, index[p], ms.ACCEPTED if pl.accepted else ms.REJECTED,
                             pl.index, pl.accepted and pl.index <= lrlo)
                v = memo.get(k)
                if v is None:
                    v = memo[k] = Write(*k[1:])
                writes.append(v)
        return ms.System(
            revision=self.max_revision, cluster_epoch=ctl.epoch, snapshot_revision=snap_rev,
            partitions=tuple(parts), objects=tuple(objects), writes=tuple(writes),
        )

    def _intern(self, cls: Callable[..., Any], *fields: Any) -> Any:
        """`cls(*fields)`, one object per distinct value (the model's frozen dataclasses)."""
        k = (cls, *fields)
        v = self._interned.get(k)
        if v is None:
            v = self._interned[k] = cls(*fields)
        return v

    def _check_model_invariants(self) -> None:
        s = self.abstract()
        # Most steps leave the abstraction as it was (~3 in 4): the invariants, pure
        # functions of it, held on the equal previous one; the transition from it to itself
        # is checked once per run of equal abstractions.
        if self.prev_system is not None and s == self.prev_system:
            if not self._repeat_checked:
                self._check_transitions(self.prev_system, s)
                self._repeat_checked = True
            self.prev_system = s
            return
        self._repeat_checked = False
        for name, inv in invariants.INVARIANTS.items():
            if not inv(s, ms.REFERENCE):
                raise Divergence(f"model invariant {name} fails on the cluster's abstraction:"
                                 f" {_explain(name, s)}")
        if self.prev_system is not None:
            self._check_transitions(self.prev_system, s)
        self.prev_system = s

    def _check_transitions(self, prev: ms.System, s: ms.System) -> None:
        # A partition deleted and created again within one harness step: the model's
        # steps between are delete (no state) then create; compare from the former.
        prev = replace(prev, partitions=tuple(
            ms.Partition(replicas=tuple(ms.Replica() for _ in NODES))
            if a.created and b.created and a.creation_revision != b.creation_revision
            else a for a, b in zip(prev.partitions, s.partitions, strict=True)))
        for name, tinv in invariants.TRANSITION_INVARIANTS.items():
            if not tinv(prev, s, ms.REFERENCE):
                raise Divergence(
                    f"transition invariant {name} fails: before"
                    f" {[q.state for q in prev.partitions]} M={invariants.fresh_m(prev)}, after"
                    f" {[q.state for q in s.partitions]} M={invariants.fresh_m(s)}"
                )

def _explain(name: str, s: ms.System) -> str:
    if name == "safety":
        bad = [
            (w, s.objects[w.obj]) for w in s.writes
            if invariants.live(s, w) and s.objects[w.obj].status == ms.DELETED
        ]
        return f"live placeholders whose object was deleted: {bad[:3]}"
    if name == "reports":
        return str([(q.state.min_epoch_lower_bound, [r.reported for r in q.replicas])
                    for q in s.partitions])
    return str(replace(s, objects=s.objects[:5], writes=s.writes[:5]))
