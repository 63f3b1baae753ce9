"""One GC round with the model's decision (the non-Spark path): M from the published reports
via `impl.gc.reports` (which calls model.cluster.gc_epoch), then every L0 key checked with
model.keys.gc_eligible. Used by the simulator and the demo; the PySpark job is impl/gc."""

from __future__ import annotations

from dataclasses import dataclass, field

from epochgc.impl.gc.reports import read_cluster_view
from epochgc.impl.store.base import MAX_DELETE_BATCH, ObjectStore
from epochgc.model.keys import DATA_PREFIX, gc_eligible


@dataclass
class GcRound:
    M: int | None
    blocked: str | None
    listed: int = 0
    deleted: list[str] = field(default_factory=list)
    paused: bool = False  # refused: GC is paused on the store (issue 30)
    safety_blocked: bool = False  # blocked by the safety monitor or a missing report


def gc_round(
    store: ObjectStore, now: float, grace_s: float = 0.0, max_report_age_s: float = 60.0
) -> GcRound:
    view = read_cluster_view(store, now, max_report_age_s)
    ge = view.gc_epoch()
    out = GcRound(ge.M, ge.blocked)
    if ge.M is None:
        return out
    doomed: list[str] = []
    for info in store.list_all(DATA_PREFIX):
        out.listed += 1
        e = gc_eligible(info.key, info.age(now), ge.M, grace_s)
        if e.error is not None:
            raise ValueError(f"GC round refused: unparsable key {info.key!r}: {e.error}")
        if e.eligible:
            doomed.append(info.key)
    for i in range(0, len(doomed), MAX_DELETE_BATCH):
        batch = doomed[i : i + MAX_DELETE_BATCH]
        res = store.delete_batch(batch)
        out.deleted.extend(k for k in batch if k not in res.errors)
    return out
