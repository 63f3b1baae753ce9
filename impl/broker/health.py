"""Health reports: per hosted replica, partition id, term, inactive epoch M(p) and the
creation revision of the incarnation it belongs to (R35: the GC reader ignores a report of
another incarnation than the published snapshot's), written
to `_cluster/health/{node}.json` with the store's atomic put in the format
`impl.gc.reports.parse_health` reads."""

from __future__ import annotations

import json
from dataclasses import dataclass

from epochgc.impl.gc.reports import HEALTH_PREFIX


@dataclass(frozen=True)
class ReplicaReport:
    partition: str
    term: int
    inactive_epoch: int | None
    created: int  # the incarnation's creation revision


def health_key(node: str) -> str:
    return f"{HEALTH_PREFIX}{node}.json"


def health_document(node: str, written_at: float, replicas: list[ReplicaReport]) -> bytes:
    doc = {
        "node": node,
        "written_at": written_at,
        "replicas": [
            {
                "partition": r.partition,
                "term": r.term,
                "inactive_epoch": r.inactive_epoch,
                "created": r.created,
            }
            for r in sorted(replicas, key=lambda r: r.partition)
        ],
    }
    return json.dumps(doc, sort_keys=True).encode()
