"""Three broker processes on loopback (RaftServer over TCP, DiskStorage): SIGKILL a partition
leader while producing; every acknowledged record is read back afterwards."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from epochgc.impl.broker.producer import Ack, ProduceError, Producer
from epochgc.impl.broker.raftport import thread_io
from epochgc.impl.cluster.client import ProcClusterAccess
from epochgc.impl.cluster.local import LocalCluster
from epochgc.impl.store.local import LocalStore

PARTS = ["t/0", "t/1", "t/2", "t/3"]


async def wait_leaders(access: ProcClusterAccess, timeout: float = 120.0) -> dict[str, int]:
    """Every partition's leader; `timeout` is a hang bound (elections of real node
    processes on a loaded machine), not a timing the test checks."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        try:
            meta = await access.any_call(op="meta")
            leaders = {p: int(i["leader"]) for p, i in meta["partitions"].items()}
            if set(PARTS) <= set(leaders) and all(leaders[p] for p in PARTS):
                return leaders
        except ConnectionError:
            pass
        await asyncio.sleep(0.2)
    raise TimeoutError("partitions have no leaders")


@pytest.mark.slow
def test_sigkill_leader_every_acked_record_read_back(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    store = LocalStore(store_dir, create=True)
    lc = LocalCluster(tmp_path / "cluster")
    lc.init(3, str(store_dir), PARTS, mint_interval=1.0)
    for n in lc.ids:
        lc.start(n)

    async def body() -> None:
        access = ProcClusterAccess(lc.client_addrs())
        prod = Producer(access, store, thread_io, random.Random(1), max_attempts=20)
        acked: list[tuple[Ack, list[bytes]]] = []
        try:
            leaders = await wait_leaders(access)
            victim = leaders["t/0"]
            for i in range(40):
                batch = {p: [f"{p}:{i}:{j}".encode() for j in range(3)] for p in PARTS}
                if i == 15:
                    lc.kill(victim)  # SIGKILL, possibly with placeholders in flight
                if i == 30:
                    lc.start(victim)
                try:
                    acks = await prod.produce(batch)
                except ProduceError:
                    continue  # not acknowledged: nothing to check
                acked.extend((a, batch[p]) for p, a in acks.items())
            assert len(acked) >= 100
            got = {p: await access.read_partition(p) for p in PARTS}
            for ack, recs in acked:
                have = dict(got[ack.partition])
                assert [have.get(ack.base + k) for k in range(ack.count)] == recs, ack
        finally:
            await access.close()

    try:
        asyncio.run(body())
    finally:
        lc.stop_all()
