"""Reads: records below LRO come from L1 objects, above it from the L0 byte ranges the
accepted placeholders point at."""

from __future__ import annotations

from epochgc.impl.partition.commands import decode_records
from epochgc.impl.partition.statemachine import (
    AcceptedPlaceholder,
    L1Segment,
    PartitionStateMachine,
)
from epochgc.impl.store.base import ObjectStore


def read_records(
    sm: PartitionStateMachine, store: ObjectStore, offset: int, max_records: int = 1000
) -> list[tuple[int, bytes]]:
    """Up to `max_records` records from `offset`, stopping at the first gap."""
    out: list[tuple[int, bytes]] = []
    while len(out) < max_records:
        where = sm.locate(offset)
        if where is None:
            break
        kind, seg = where
        if kind == "l1":
            assert isinstance(seg, L1Segment)
            recs = decode_records(store.get(seg.key))
            base = seg.base
        else:
            assert isinstance(seg, AcceptedPlaceholder)
            recs = decode_records(store.get(seg.key, seg.start, seg.end))
            base = seg.base
        if len(recs) != seg.count:
            raise ValueError(f"{seg.key}: expected {seg.count} records, found {len(recs)}")
        for i in range(offset - base, len(recs)):
            out.append((base + i, recs[i]))
            if len(out) == max_records:
                break
        offset = out[-1][0] + 1
    return out
