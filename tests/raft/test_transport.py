"""TCP transport: multiplexing, handshake refusal, authentication, malformed frames, reconnect."""

from __future__ import annotations

import asyncio
import os
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from epochgc.impl.ports import free_ports
from epochgc.impl.raft.messages import Message, MsgType
from epochgc.impl.raft.transport import (
    _HELLO,
    KIND_BATCH,
    KIND_HELLO,
    PROTOCOL_VERSION,
    Transport,
    TransportConfig,
    TransportError,
)

Got = list[tuple[int, int, Message]]


def pair(
    cid_a: str = "c",
    cid_b: str = "c",
    secret_a: bytes | None = None,
    secret_b: bytes | None = None,
) -> tuple[Transport, Transport, Got, Got]:
    pa, pb = free_ports(2)
    got_a: Got = []
    got_b: Got = []
    a = Transport(
        TransportConfig(1, cid_a, pa, {2: ("127.0.0.1", pb)}, secret=secret_a),
        lambda f, g, m: got_a.append((f, g, m)),
    )
    b = Transport(
        TransportConfig(2, cid_b, pb, {1: ("127.0.0.1", pa)}, secret=secret_b),
        lambda f, g, m: got_b.append((f, g, m)),
    )
    return a, b, got_a, got_b


def hb(frm: int, to: int, term: int = 1) -> Message:
    return Message(MsgType.HEARTBEAT, to, frm, term, commit=term)


async def wait_for(pred: Callable[[], bool], timeout: float = 60.0) -> bool:
    """Whether `pred()` came true; every caller expects it to: `timeout` is a bound for a
    hang, not a timing assumption (5 s was one, on a loaded machine)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end:
        if pred():
            return True
        await asyncio.sleep(0.01)
    return pred()


def run(coro: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(coro())  # type: ignore[arg-type]


def test_groups_are_multiplexed_over_one_connection_both_ways() -> None:
    async def body() -> None:
        a, b, got_a, got_b = pair()
        await a.start()
        await b.start()
        try:
            for g in (1, 2, 3):
                a.send(2, g, hb(1, 2, g))
                b.send(1, g, hb(2, 1, g))
            assert await wait_for(lambda: len(got_a) == 3 and len(got_b) == 3)
            assert sorted(g for _, g, _ in got_b) == [1, 2, 3]
            assert all(f == 1 and m.commit == g for f, g, m in got_b)
            assert a.peers[2].writer is not None and b.peers[1].writer is not None
            # One TCP connection: a's local port is b's remote port.
            la = a.peers[2].writer.get_extra_info("sockname")
            rb = b.peers[1].writer.get_extra_info("peername")
            assert la == rb
        finally:
            await a.close()
            await b.close()

    run(body)


def test_cluster_id_mismatch_is_refused() -> None:
    async def body() -> None:
        a, b, _got_a, got_b = pair("alpha", "beta")
        await a.start()
        await b.start()
        try:
            a.send(2, 1, hb(1, 2))
            assert await wait_for(lambda: a.refused > 0 and b.refused > 0)
            await asyncio.sleep(0.1)
            assert got_b == [] and b.peers[1].writer is None
        finally:
            await a.close()
            await b.close()

    run(body)


def test_non_loopback_bind_requires_a_secret() -> None:
    with pytest.raises(TransportError, match="shared secret"):
        TransportConfig(1, "c", 0, {}, host="0.0.0.0")
    with pytest.raises(TransportError):
        TransportConfig(1, "c", 0, {}, host="10.1.2.3", secret=b"")
    TransportConfig(1, "c", 0, {}, host="0.0.0.0", secret=b"s3cret")
    TransportConfig(1, "c", 0, {}, host="::1")


def test_shared_secret_authenticates_and_a_wrong_secret_is_refused() -> None:
    async def ok() -> None:
        a, b, _, got_b = pair(secret_a=b"k", secret_b=b"k")
        await a.start()
        await b.start()
        try:
            a.send(2, 1, hb(1, 2))
            assert await wait_for(lambda: len(got_b) == 1)
        finally:
            await a.close()
            await b.close()

    async def bad() -> None:
        a, b, _, got_b = pair(secret_a=b"k", secret_b=b"other")
        await a.start()
        await b.start()
        try:
            a.send(2, 1, hb(1, 2))
            assert await wait_for(lambda: a.refused > 0 or b.refused > 0)
            await asyncio.sleep(0.1)
            assert got_b == []
        finally:
            await a.close()
            await b.close()

    run(ok)
    run(bad)


async def raw_handshake(
    port: int, node_id: int, cid: bytes = b"c"
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    hello = (
        bytes([KIND_HELLO]) + _HELLO.pack(PROTOCOL_VERSION, node_id, os.urandom(16), len(cid)) + cid
    )
    writer.write(struct.pack(">I", len(hello)) + hello)
    (n,) = struct.unpack(">I", await reader.readexactly(4))
    await reader.readexactly(n)
    return reader, writer


@pytest.mark.parametrize(
    "garbage",
    [
        bytes([KIND_BATCH]) + b"\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x05hello",
        bytes([77]) + b"unknown kind",
        bytes([KIND_BATCH]) + b"\x00\x00\x00",
    ],
)
def test_malformed_frame_closes_only_that_connection(garbage: bytes) -> None:
    async def body() -> None:
        a, b, _, got_b = pair()
        await b.start()  # a is not started yet: the raw client plays node 1
        try:
            reader, writer = await raw_handshake(b.port, 1)
            writer.write(struct.pack(">I", len(garbage)) + garbage)
            assert await reader.read() == b""  # b closed the connection
            assert b.malformed == 1
            writer.close()
            # b keeps running: the real node 1 connects and is served.
            await a.start()
            a.send(2, 7, hb(1, 2))
            assert await wait_for(lambda: len(got_b) == 1)
        finally:
            await a.close()
            await b.close()

    run(body)


def test_impersonated_sender_is_malformed() -> None:
    async def body() -> None:
        _, b, _, got_b = pair()
        await b.start()
        try:
            from epochgc.impl.raft.codec import encode_message

            reader, writer = await raw_handshake(b.port, 1)
            payload = encode_message(hb(3, 2))  # claims to come from node 3
            body_ = bytes([KIND_BATCH]) + struct.pack(">QI", 1, len(payload)) + payload
            writer.write(struct.pack(">I", len(body_)) + body_)
            assert await reader.read() == b""
            assert b.malformed == 1 and got_b == []
            writer.close()
        finally:
            await b.close()

    run(body)


def test_reconnects_after_peer_restart_and_bounds_its_queue() -> None:
    async def body() -> None:
        a, b, _, got_b = pair()
        await a.start()
        await b.start()
        try:
            a.send(2, 1, hb(1, 2))
            assert await wait_for(lambda: len(got_b) == 1)
            await b.close()
            assert await wait_for(lambda: a.peers[2].writer is None)
            cfg = b.cfg
            a.cfg.queue_limit = 5
            for i in range(20):
                a.send(2, 1, hb(1, 2, i + 2))
            assert len(a.peers[2].queue) <= 5 and a.peers[2].dropped >= 15
            got2: Got = []
            b2 = Transport(cfg, lambda f, g, m: got2.append((f, g, m)))
            await b2.start()
            try:
                assert await wait_for(lambda: len(got2) >= 1)
                assert got2[-1][2].term == 21  # the newest messages survived
            finally:
                await b2.close()
        finally:
            await a.close()

    run(body)


def test_node_process_refuses_non_loopback_bind_without_secret(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {k: v for k, v in os.environ.items() if k != "EPOCHGC_RAFT_SECRET"}
    env["PYTHONPATH"] = root
    port = free_ports(1)[0]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "epochgc.impl.raft.node_main",
            "--id",
            "1",
            "--peers",
            f"1=0.0.0.0:{port},2=127.0.0.1:1,3=127.0.0.1:2",
            "--data-dir",
            str(tmp_path),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0
    assert "shared secret" in out.stderr
