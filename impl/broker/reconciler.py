"""Reconciler (runs on a partition's leader): copy the accepted placeholders past LRLO out of
L0 into one per-partition L1 object, and only once that object is durable replicate
`advance_reconciled_offset` (LRO = last record copied, LRLO = log index of its placeholder).
Replicating first would let GC delete L0 bytes that exist nowhere else."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from epochgc.impl.broker.raftport import IoRunner
from epochgc.impl.partition.commands import AdvanceReconciled, decode_records, encode_records
from epochgc.impl.partition.fence import PartitionFence
from epochgc.impl.partition.statemachine import PartitionStateMachine
from epochgc.impl.store.base import ObjectStore


@dataclass(frozen=True)
class ReconcileResult:
    placeholders: int
    records: int
    l1_key: str | None


def l1_key(partition: str, base: int, last: int, term: int) -> str:
    topic, _, n = partition.rpartition("/")
    # The term makes a retried copy by a later leader a different object, never a rewrite.
    return f"level_one/{topic}/{int(n):06d}/{base:020d}-{last:020d}-t{term}"


def _fetch(store: ObjectStore, key: str, start: int, end: int) -> bytes:
    return store.get(key, start, end)


async def reconcile_once(
    partition: str,
    sm: PartitionStateMachine,
    fence: PartitionFence,
    store: ObjectStore,
    io: IoRunner,
    max_placeholders: int = 64,
) -> ReconcileResult:
    term = await fence.sync()  # leader of this term, applied state is current
    pending = sm.unreconciled()[:max_placeholders]
    if not pending:
        return ReconcileResult(0, 0, None)
    lro = sm.state.last_reconciled_offset
    if pending[0].base != lro + 1:
        raise RuntimeError(
            f"{partition}: first unreconciled record {pending[0].base} does not follow LRO {lro}"
        )
    records: list[bytes] = []
    for p in pending:
        blob = await io(functools.partial(_fetch, store, p.key, p.start, p.end))
        recs = decode_records(blob)
        if len(recs) != p.count:
            raise RuntimeError(f"{p.key}: expected {p.count} records, found {len(recs)}")
        records.extend(recs)
    base, last = pending[0].base, pending[-1].last
    key = l1_key(partition, base, last, term)
    await io(functools.partial(store.put, key, encode_records(records)))  # durable first
    await fence.replicate_command(
        AdvanceReconciled(last, pending[-1].log_index, key, base, last - base + 1)
    )
    return ReconcileResult(len(pending), len(records), key)
