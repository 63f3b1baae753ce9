"""A full disk or a failed fsync stops a RaftServer (real TCP, DiskStorage on CrashFS): it
raises StorageFailed out of its Ready loop, stops ticking and talking to peers, and never
acknowledges what it could not persist; the other two nodes carry on."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from epochgc.impl.ports import free_ports
from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.fileio import CrashFS
from epochgc.impl.raft.groupcommit import GroupCommit
from epochgc.impl.raft.kv import OP_PUT, KVStateMachine, encode_command
from epochgc.impl.raft.node import Config
from epochgc.impl.raft.server import RaftServer
from epochgc.impl.raft.storage import StorageFailed
from epochgc.impl.raft.transport import TransportConfig

CFG = Config(election_tick=10, heartbeat_tick=1)
LIVENESS_S = 60.0  # a bound for a hang, not a timing assumption (was 10 s)
GROUPS = (1, 2)


def make(tmp: Path, ports: list[int], nid: int, fs: CrashFS) -> RaftServer:
    peers = {i + 1: ("127.0.0.1", p) for i, p in enumerate(ports) if i + 1 != nid}
    data = str(tmp / f"n{nid}")
    gc = GroupCommit(data, fs)
    srv = RaftServer(
        TransportConfig(nid, "t", ports[nid - 1], peers),
        data,
        CFG,
        tick_interval=0.02,
        seed=nid,
        storage_factory=lambda d: DiskStorage(d, fs=fs, group_commit=gc),
    )
    for g in GROUPS:
        srv.add_group(g, KVStateMachine())
    return srv


async def _leader(servers: dict[int, RaftServer], g: int) -> int:
    for _ in range(500):
        for nid, s in servers.items():
            if s.is_leader(g) and s.failed is None:
                return nid
        await asyncio.sleep(0.02)
    raise TimeoutError


@pytest.mark.parametrize("fault", ["enospc", "fsync"])
def test_storage_failure_stops_the_node_and_acknowledges_nothing(
    tmp_path: Path, fault: str
) -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        seen: list[BaseException] = []
        loop.set_exception_handler(lambda lp, ctx: seen.append(ctx["exception"]))
        ports = free_ports(3)
        fss = {i: CrashFS() for i in (1, 2, 3)}
        servers = {i: make(tmp_path, ports, i, fss[i]) for i in (1, 2, 3)}
        for s in servers.values():
            await s.start()
        try:
            lead = await _leader(servers, 1)
            await asyncio.wait_for(
                servers[lead].propose(1, encode_command(OP_PUT, b"a", b"1")), LIVENESS_S)
            if fault == "enospc":
                fss[lead].space_left = 0
            else:
                fss[lead].fail_fsync = True
            fut = servers[lead].propose(1, encode_command(OP_PUT, b"b", b"2"))
            await asyncio.wait_for(servers[lead].stopped.wait(), LIVENESS_S)
            assert isinstance(servers[lead].failed, StorageFailed)
            assert any(isinstance(e, StorageFailed) for e in seen)
            # Even with the disk healthy again the node stays down and never acknowledges.
            fss[lead].space_left, fss[lead].fail_fsync = None, False
            await asyncio.sleep(0.5)
            assert not fut.done()
            # The survivors elect a new leader for the group and keep committing.
            rest = {i: s for i, s in servers.items() if i != lead}
            new = await _leader(rest, 1)
            await asyncio.wait_for(
                rest[new].propose(1, encode_command(OP_PUT, b"c", b"3")), LIVENESS_S)
        finally:
            for s in servers.values():
                await s.close()

    asyncio.run(body())
