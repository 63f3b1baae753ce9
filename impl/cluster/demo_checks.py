"""The demo's independent checks, separate from the code they check:

- `InflightLog`: when each L0 object was an in-flight write (from just before its upload
  until every placeholder of that attempt had an outcome), from the producer's hook.
- `in_use_keys`: the L0 keys the partitions' committed state still references (accepted,
  unreconciled placeholders), per partition from the replica that has applied the most.
- `LeaderWatch`: leadership changes seen by polling every live broker.
- Deleted keys are observed by listing the store before and after each GC round, not taken
  from the GC job's own report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from epochgc.impl.cluster.client import ProcClusterAccess


@dataclass
class InflightLog:
    clock: Callable[[], float]
    open: dict[str, float] = field(default_factory=dict)
    closed: dict[str, tuple[float, float]] = field(default_factory=dict)
    stored: set[str] = field(default_factory=set)  # puts that completed

    def note(self, key: str, phase: str) -> None:
        now = self.clock()
        if phase == "upload":
            self.open[key] = now
        elif phase == "stored":
            self.stored.add(key)
        else:
            self.closed[key] = (self.open.pop(key, now), now)

    def overlaps(self, key: str, start: float, end: float) -> bool:
        """Was `key` in flight at any time in [start, end]?"""
        if key in self.open:
            return self.open[key] <= end
        span = self.closed.get(key)
        return span is not None and span[0] <= end and span[1] >= start


async def in_use_keys(access: ProcClusterAccess, nodes: list[int]) -> dict[str, set[str]]:
    """Per partition, the referenced L0 keys of the most advanced live replica."""
    best: dict[str, tuple[int, set[str]]] = {}
    for n in nodes:
        r = await access.call(n, op="in_use")
        if r.get("status") != "ok":
            continue  # a dead node: the others hold the committed state
        for part, info in r["partitions"].items():
            applied = int(info["applied"])
            if part not in best or applied > best[part][0]:
                best[part] = (applied, set(info["keys"]))
    return {p: keys for p, (_, keys) in best.items()}


@dataclass
class LeaderWatch:
    last: dict[str, tuple[int, int]] = field(default_factory=dict)  # partition -> term, leader
    changes: int = 0

    async def poll(self, access: ProcClusterAccess, nodes: list[int]) -> dict[str, int]:
        """Record changes; returns the current leader per partition (0 when unknown)."""
        seen: dict[str, tuple[int, int]] = {}
        for n in nodes:
            r = await access.call(n, op="meta")
            if r.get("status") != "ok":
                continue
            for part, info in r["partitions"].items():
                term, leader = int(info.get("term", -1)), int(info["leader"])
                if leader and (part not in seen or term > seen[part][0]):
                    seen[part] = (term, leader)
        for part, (term, leader) in seen.items():
            old = self.last.get(part)
            if old is not None and term > old[0] and leader != old[1]:
                self.changes += 1
            if old is None or term >= old[0]:
                self.last[part] = (term, leader)
        return {p: seen.get(p, (0, 0))[1] for p in self.last}

