"""The verifying produce workload: producers writing self-describing records
(`impl.cluster.payload`) to every partition in shared L0 objects; every acknowledgement is
kept as an AckedRun so the read-back can recompute each record's bytes."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

from epochgc.impl.broker.producer import ProduceError, Producer
from epochgc.impl.broker.raftport import thread_io
from epochgc.impl.chaos.history import History
from epochgc.impl.cluster.client import ProcClusterAccess
from epochgc.impl.cluster.demo_checks import InflightLog
from epochgc.impl.cluster.payload import AckedRun, make_record
from epochgc.impl.signals import checkpoint
from epochgc.impl.store.base import ObjectStore, StoreError

RECORDS_PER_PARTITION = 3
RECORD_SIZE = 40
PAUSE_S = 0.1


@dataclass
class Workload:
    access: ProcClusterAccess
    store: ObjectStore
    partitions: list[str]
    inflight: InflightLog
    history: History
    seed: int
    runs: list[AckedRun] = field(default_factory=list)
    producers: list[Producer] = field(default_factory=list)
    failed_batches: int = 0

    @property
    def acked(self) -> int:
        return sum(r.count for r in self.runs)

    async def produce_loop(self, w: int, stop: asyncio.Event) -> None:
        prod = Producer(self.access, self.store, thread_io, random.Random(self.seed * 1000 + w),
                        max_attempts=10, not_leader_wait=8.0)
        prod.on_attempt = self.inflight.note
        self.producers.append(prod)
        name = f"chaos{w}"
        seq = dict.fromkeys(self.partitions, 0)
        turn = 0
        while not stop.is_set():
            first = dict(seq)
            # Even producers write every partition in one L0 object; odd ones one partition
            # per object, in turn: a batch counts only when every partition acknowledged
            # it, so single-partition batches leave no acknowledged record uncounted.
            parts = self.partitions if w % 2 == 0 else [self.partitions[turn % len(
                self.partitions)]]
            turn += 1
            batch = {p: [make_record(name, p, seq[p] + i, RECORD_SIZE)
                         for i in range(RECORDS_PER_PARTITION)] for p in parts}
            for p in parts:  # seqs are never reused, even by a failed batch
                seq[p] += RECORDS_PER_PARTITION
            try:
                acks = await prod.produce(batch)
            except (ProduceError, ConnectionError, StoreError) as e:
                self.failed_batches += 1
                self.history("batch not acknowledged", producer=name, why=str(e)[:120])
                await asyncio.sleep(0.3)
                continue
            for p, a in acks.items():
                self.runs.append(AckedRun(p, a.base, a.count, name, first[p], RECORD_SIZE,
                                          a.epoch, a.key))
            checkpoint("work")  # the signal tests' point: mid-work
            await asyncio.sleep(PAUSE_S)
