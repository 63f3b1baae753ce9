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
    sm: PartitionStateMachine, store: ObjectStore, offset: int, max_records: int = 1000,
    max_bytes: int | None = None,
) -> list[tuple[int, bytes]]:
    """Up to `max_records` records from `offset`, stopping at the first gap, and (with
    `max_bytes`) before the record that would take the page's bodies past `max_bytes`; the
    first record always (a page is never empty while there is one to read). Issue 41
    (i41o's follow-up): a page was bounded in records only, so 500 records of `--size`
    200,000 made one answer of ~133 MB, past what a client takes (`rpc.ANSWER_LIMIT`)."""
    out: list[tuple[int, bytes]] = []
    size = 0
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
            size += len(recs[i])
            if out and max_bytes is not None and size > max_bytes:
                return out
            out.append((base + i, recs[i]))
            if len(out) == max_records:
                break
        offset = out[-1][0] + 1
    return out
