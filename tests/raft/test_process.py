"""Three node processes on loopback: SIGKILL the leader while proposals are in flight; every
acknowledged proposal must be read back (through the log) after restarts."""

from __future__ import annotations

import asyncio
from pathlib import Path

from epochgc.impl.raft.kv import OP_GET, OP_PUT, ST_OK, KVClient
from epochgc.impl.raft.proc_cluster import ProcCluster


async def read_back(c: ProcCluster, acked: dict[bytes, bytes]) -> None:
    for _attempt in range(50):
        lead = await c.find_leader(timeout=120)  # a hang bound: elections are slow under load
        cl = await KVClient.connect("127.0.0.1", c.client_ports[lead])
        try:
            keys = sorted(acked)
            res = await asyncio.wait_for(asyncio.gather(*(cl.request(OP_GET, k) for k in keys)), 30)
        except (ConnectionError, TimeoutError):
            await asyncio.sleep(0.2)
            continue
        finally:
            await cl.close()
        if any(status != ST_OK for status, _, _ in res):
            await asyncio.sleep(0.2)  # leadership moved while reading; try again
            continue
        for k, (_, _, value) in zip(keys, res, strict=True):
            assert value == acked[k], f"acknowledged {k!r} lost or changed"
        return
    raise AssertionError("could not read back")


def test_sigkill_leader_with_proposals_in_flight(tmp_path: Path) -> None:
    async def body() -> None:
        c = ProcCluster(str(tmp_path), extra=["--snapshot-interval", "300"])
        c.start_all()
        try:
            lead = await c.find_leader()
            cl = await KVClient.connect("127.0.0.1", c.client_ports[lead])
            acked: dict[bytes, bytes] = {}
            futs = {}
            for i in range(1500):
                k = b"k%05d" % i
                futs[k] = cl.request(OP_PUT, k, b"v%d-" % i * 20)
                if i == 700:
                    # Let a good part commit, then kill the leader with the rest in flight.
                    while sum(f.done() for f in futs.values()) < 300:
                        await asyncio.sleep(0.005)
                    c.kill(lead)
            for k, f in futs.items():
                try:
                    status, _, _ = await f
                except ConnectionError:
                    continue
                if status == ST_OK:
                    acked[k] = b"v%d-" % int(k[1:]) * 20
            await cl.close()
            assert len(acked) >= 300
            assert len(acked) < 1500  # some proposals really were in flight
            await read_back(c, acked)
            c.start(lead)
            await read_back(c, acked)
            # Kill everyone and restart from disk only.
            for nid in list(c.procs):
                c.kill(nid)
            c.start_all()
            await read_back(c, acked)
        finally:
            c.stop_all()

    asyncio.run(body())
