"""Identity across a partition's lifecycle (issue 13, SPEC R32-R35): which incarnation a
write or report is of, the acknowledged records of the current one, and the lifecycle
checks (R32/R34 on every broker, an incarnation replaced only through its deletion)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from epochgc.impl.controller.statemachine import PARTITION_GROUP_BASE
from tests.conformance.deployment import ALL_PARTITIONS, STATS
from tests.conformance.shadow import Divergence
from tests.conformance.state import HarnessState


def incarnation_at(deleted: Iterable[tuple[int, int]], ctl: Any, p: str,
                   epoch: int) -> tuple[int, bool]:
    """(group, deleted) of p's latest incarnation created at or below `epoch`, from the
    (creation revision, group) of p's deleted incarnations and `ctl`'s live table;
    (-1, False) if none was."""
    cands = [(c, g, True) for c, g in deleted if c <= epoch]
    info = ctl.partitions.get(p)
    if info is not None and info.creation_revision <= epoch:
        cands.append((info.creation_revision, info.group, False))
    if not cands:
        return (-1, False)
    _, g, gone = max(cands)
    return g, gone

class Incarnations(HarnessState):
    def _current_group(self, p: str) -> int | None:
        info = self._controller_sm().partitions.get(p)
        return None if info is None else info.group

    def _incarnation(self, p: str, epoch: int, ctl: Any = None) -> tuple[int, bool]:
        """(group, deleted) of the incarnation of p a write stamped `epoch` was for: the
        latest created at or below the epoch (a producer stamps at least its target's
        creation revision, and below any later deletion's revision: R35's revision line).
        `ctl`: the controller state machine to read (default: the most advanced)."""
        if ctl is None:
            ctl = self._controller_sm()
        return incarnation_at(self._deleted_of(ctl).get(p, ()), ctl, p, epoch)

    def _deleted_of(self, ctl: Any) -> dict[str, list[tuple[int, int]]]:
        """name -> (creation revision, group) of each deleted incarnation in `ctl.deleted`,
        built once per version of that dict: `_incarnation` runs ~17 times a step and
        scanning every deleted incarnation each time was ~2% of a step. A controller state
        machine only adds to its `deleted` (keyed by creation revision, whose name and
        group never change) or replaces the whole dict on restore, so the same dict object
        with the same length has the same entries; the cache holds the dict, so its id is
        not reused while cached."""
        d = ctl.deleted
        hit = self._deleted_index.get(id(d))
        if hit is not None and hit[0] is d and hit[1] == len(d):
            return hit[2]
        index: dict[str, list[tuple[int, int]]] = {}
        for x in d.values():
            index.setdefault(x.name, []).append((x.creation_revision, x.group))
        if len(self._deleted_index) >= 64:
            self._deleted_index.clear()
        self._deleted_index[id(d)] = (d, len(d), index)
        return index

    def _expected_for(self, p: str) -> dict[int, bytes]:
        """The acknowledged records of p's current incarnation (reset when it changes)."""
        cur = self._current_group(p)
        if self._expected_group.get(p, "unset") != cur:
            self.expected[p] = {}
            self._expected_group[p] = cur
        return self.expected[p]

    def _check_lifecycle(self) -> None:
        """R32/R34 on every live broker: a replica of an incarnation its own controller
        deleted refuses writes at once; once the broker's deferred sync ran, the group is
        gone from its Raft host and its replica table; health reports name only partitions
        that exist. Read-back expectations follow the current incarnations."""
        for p in ALL_PARTITIONS:
            self._expected_for(p)
        for nid, b in sorted(self.c.brokers.items()):
            ctl = b.controller
            for name, rep in b.replicas.items():
                cur = ctl.partitions.get(name)
                if (cur is None or cur.group != rep.info.group) and not rep.sm.deleted:
                    raise Divergence(f"R34: node {nid}'s controller deleted {name} (group"
                                     f" {rep.info.group}) but its replica still takes writes")
            if not b._sync_scheduled:
                for d in ctl.deleted.values():
                    held = b.replicas.get(d.name)
                    if d.group in b.port.host.groups or (held and held.info.group == d.group):
                        raise Divergence(f"R32: node {nid} still runs deleted {d.name}'s"
                                         f" group {d.group}")
            for r in b.health_replicas():
                if r.partition not in ctl.partitions:
                    raise Divergence(f"R32: node {nid} reports deleted {r.partition}")
        ctl = self._controller_sm()
        if self.snapshot is not None:  # R32: a snapshot never lists a partition deleted by it
            srev, names = self.snapshot
            for d in ctl.deleted.values():
                again = ctl.partitions.get(d.name)
                back = again is not None and again.creation_revision <= srev
                later = [e for e in ctl.deleted.values() if e.name == d.name
                         and d.deletion_revision < e.creation_revision <= srev]
                if d.name in names and d.deletion_revision <= srev and not back and not later:
                    raise Divergence(f"R32: the snapshot at revision {srev} lists {d.name},"
                                     f" deleted at revision {d.deletion_revision}")
        self._check_incarnations()
        for g in ctl.deleted:
            if g + PARTITION_GROUP_BASE not in self.deletions_seen:
                self.deletions_seen.add(g + PARTITION_GROUP_BASE)
                STATS["lifecycle.deletions_applied"] += 1
                self.readback_dirty = True

    def _check_incarnations(self) -> None:
        """A live partition's incarnation changes only through its deletion: a create of an
        existing name (duplicate, retried) is a no-op, never a replacement."""
        ctl = self.committed_controller() if self.c.brokers else None
        if ctl is None or ctl.revision < self._incarnations_rev:
            return
        for name, crev in self._incarnations.items():
            info = ctl.partitions.get(name)
            if info is not None and info.creation_revision != crev and crev not in ctl.deleted:
                raise Divergence(
                    f"{name}'s incarnation created at revision {crev} was replaced by one"
                    f" created at {info.creation_revision} without being deleted (a"
                    f" duplicate or retried create applied as a new partition)")
        self._incarnations = {n: i.creation_revision for n, i in ctl.partitions.items()}
        self._incarnations_rev = ctl.revision
