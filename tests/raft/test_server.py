"""RaftServer in-process over real TCP: three nodes, several groups, futures, expected term,
leadership transfer, snapshots, restart from disk."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from epochgc.impl.ports import free_ports
from epochgc.impl.raft.host import LeadershipLost
from epochgc.impl.raft.kv import OP_GET, OP_PUT, KVStateMachine, encode_command
from epochgc.impl.raft.node import Config, NotLeader, TermMismatch
from epochgc.impl.raft.server import RaftServer
from epochgc.impl.raft.transport import TransportConfig

GROUPS = (1, 2, 3, 4)
CFG = Config(election_tick=10, heartbeat_tick=1)
LIVENESS_S = 60.0  # a bound for a hang, not a timing assumption (was 10 s)


def make(tmp: Path, ports: list[int], nid: int) -> tuple[RaftServer, dict[int, KVStateMachine]]:
    peers = {i + 1: ("127.0.0.1", p) for i, p in enumerate(ports) if i + 1 != nid}
    tcfg = TransportConfig(nid, "test", ports[nid - 1], peers)
    srv = RaftServer(
        tcfg, str(tmp / f"n{nid}"), CFG, tick_interval=0.02, snapshot_interval=20, seed=nid
    )
    sms = {g: KVStateMachine() for g in GROUPS}
    for g in GROUPS:
        srv.add_group(g, sms[g])
    return srv, sms


async def leader_of(servers: dict[int, RaftServer], g: int, timeout: float = 10) -> int:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end:
        for nid, s in servers.items():
            if s.is_leader(g):
                return nid
        await asyncio.sleep(0.02)
    raise TimeoutError(f"no leader for group {g}")


def test_multi_group_servers_over_tcp(tmp_path: Path) -> None:
    async def body() -> None:
        ports = free_ports(3)
        nodes = {i: make(tmp_path, ports, i) for i in (1, 2, 3)}
        servers = {i: s for i, (s, _) in nodes.items()}
        for s in servers.values():
            await s.start()
        try:
            for g in GROUPS:
                lead = await leader_of(servers, g)
                s = servers[lead]
                follower = next(i for i in servers if i != lead)
                with pytest.raises(NotLeader):
                    servers[follower].propose(g, encode_command(OP_PUT, b"k", b"x"))
                with pytest.raises(TermMismatch):
                    s.propose(g, encode_command(OP_PUT, b"k", b"x"), expected_term=s.term(g) + 5)
                futs = [
                    s.propose(
                        g, encode_command(OP_PUT, b"k%d" % i, b"g%d" % g), expected_term=s.term(g)
                    )
                    for i in range(50)
                ]
                await asyncio.wait_for(asyncio.gather(*futs), LIVENESS_S)
                got = await asyncio.wait_for(
                    s.propose(g, encode_command(OP_GET, b"k7")), LIVENESS_S)
                assert got == b"g%d" % g
            # Leadership transfer in group 1; an in-flight proposal of the old term fails or
            # commits, never hangs.
            lead = await leader_of(servers, 1)
            target = next(i for i in servers if i != lead)
            servers[lead].transfer_leadership(1, target)
            for _ in range(200):
                if servers[target].is_leader(1):
                    break
                await asyncio.sleep(0.02)
            assert servers[target].is_leader(1)

            # Snapshots were taken (interval 20) and followers converge on the same state.
            def converged() -> bool:
                return all(
                    nodes[1][1][g].data == nodes[2][1][g].data == nodes[3][1][g].data
                    and len(nodes[1][1][g].data) == 50
                    for g in GROUPS
                )

            for _ in range(500):
                if converged():
                    break
                await asyncio.sleep(0.02)
            assert converged()
        finally:
            for s in servers.values():
                await s.close()
        # Restart every node from disk: state is rebuilt from snapshot + log.
        nodes = {i: make(tmp_path, ports, i) for i in (1, 2, 3)}
        servers = {i: s for i, (s, _) in nodes.items()}
        for s in servers.values():
            await s.start()
        try:
            for g in GROUPS:
                lead = await leader_of(servers, g)
                got = await asyncio.wait_for(
                    servers[lead].propose(g, encode_command(OP_GET, b"k49")), 10
                )
                assert got == b"g%d" % g
        finally:
            for s in servers.values():
                await s.close()

    asyncio.run(body())


def test_proposal_future_fails_when_leader_is_cut_off(tmp_path: Path) -> None:
    async def body() -> None:
        ports = free_ports(3)
        servers = {i: make(tmp_path, ports, i)[0] for i in (1, 2, 3)}
        for s in servers.values():
            await s.start()
        try:
            lead = await leader_of(servers, 1)
            for i, s in servers.items():
                if i != lead:
                    await s.close()
            fut = servers[lead].propose(1, encode_command(OP_PUT, b"a", b"b"))
            with pytest.raises(LeadershipLost):
                await asyncio.wait_for(fut, LIVENESS_S)  # check-quorum steps the leader down
        finally:
            await servers[lead].close()

    asyncio.run(body())
