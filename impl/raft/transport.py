"""asyncio TCP transport: one connection per pair of nodes carries every group's messages.

Frames are `u32 length | u8 kind | body`. The handshake (HELLO, then AUTH when a shared secret
is configured) carries the cluster id; a mismatch, an unknown node id or a bad HMAC closes the
connection. The node with the lower id dials (and re-dials with exponential backoff); the
other accepts. Outgoing messages wait in a bounded per-peer queue; when it is full the oldest
is dropped (Raft tolerates loss). A malformed frame closes only that connection.

Binding anything but a loopback address requires a shared secret.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import ipaddress
import logging
import os
import struct
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from epochgc.impl.raft.codec import CodecError, decode_message, encode_message
from epochgc.impl.raft.messages import Message

log = logging.getLogger("epochgc.raft.transport")

PROTOCOL_VERSION = 1
KIND_HELLO = 1
KIND_AUTH = 2
KIND_BATCH = 3
_LEN = struct.Struct(">I")
_HELLO = struct.Struct(">BQ16sH")  # version, node id, nonce, cluster id length
_ITEM = struct.Struct(">QI")  # group id, message length
HANDSHAKE_TIMEOUT = 5.0


class TransportError(Exception):
    pass


class MalformedFrame(TransportError):
    pass


class HandshakeRefused(TransportError):
    pass


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class TransportConfig:
    node_id: int
    cluster_id: str
    port: int
    peers: dict[int, tuple[str, int]]  # node id -> (host, port), self excluded
    host: str = "127.0.0.1"
    secret: bytes | None = None
    queue_limit: int = 8192  # messages per peer
    max_frame: int = 64 << 20
    max_batch_bytes: int = 1 << 20
    backoff_min: float = 0.02
    backoff_max: float = 1.0

    def __post_init__(self) -> None:
        if not is_loopback(self.host) and not self.secret:
            raise TransportError(
                f"refusing to bind {self.host}: a non-loopback address needs a shared secret"
            )


@dataclass
class _Peer:
    id: int
    queue: deque[tuple[int, bytes]] = field(default_factory=deque)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    writer: asyncio.StreamWriter | None = None
    dropped: int = 0


OnMessage = Callable[[int, int, Message], None]  # (from node, group id, message)


class Transport:
    def __init__(self, cfg: TransportConfig, on_message: OnMessage) -> None:
        self.cfg = cfg
        self.on_message = on_message
        self.peers = {pid: _Peer(pid) for pid in cfg.peers}
        self.malformed = 0
        self.refused = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False

    # ---- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.cfg.host, self.cfg.port)
        for pid in self.peers:
            if self.cfg.node_id < pid:
                self._spawn(self._dial_loop(pid))

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        self._closing = True
        if self._server is not None:
            self._server.close()
        for p in self.peers.values():
            if p.writer is not None:
                p.writer.close()
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        t: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    # ---- sending ---------------------------------------------------------------------------

    def send(self, to: int, group: int, msg: Message) -> None:
        p = self.peers.get(to)
        if p is None:
            return
        if len(p.queue) >= self.cfg.queue_limit:
            p.queue.popleft()  # drop the oldest: Raft retransmits what matters
            p.dropped += 1
        p.queue.append((group, encode_message(msg)))
        p.wake.set()

    async def _write_loop(self, p: _Peer, writer: asyncio.StreamWriter) -> None:
        while not writer.is_closing() and p.writer is writer:
            if not p.queue:
                p.wake.clear()
                await p.wake.wait()
                continue
            while p.queue and p.writer is writer:
                parts: list[bytes] = [bytes([KIND_BATCH])]
                size = 1
                while p.queue and size < self.cfg.max_batch_bytes:
                    group, payload = p.queue.popleft()
                    parts.append(_ITEM.pack(group, len(payload)))
                    parts.append(payload)
                    size += _ITEM.size + len(payload)
                writer.write(_LEN.pack(size))
                writer.writelines(parts)
                await writer.drain()

    # ---- connections -----------------------------------------------------------------------

    async def _dial_loop(self, pid: int) -> None:
        backoff = self.cfg.backoff_min
        host, port = self.cfg.peers[pid]
        while not self._closing:
            try:
                reader, writer = await asyncio.open_connection(host, port)
            except OSError:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.cfg.backoff_max)
                continue
            try:
                peer_id = await asyncio.wait_for(
                    self._handshake(reader, writer, expect=pid), HANDSHAKE_TIMEOUT
                )
                backoff = self.cfg.backoff_min
                await self._serve(peer_id, reader, writer)
            except asyncio.IncompleteReadError:
                log.info("node %d: connection to %d closed by peer", self.cfg.node_id, pid)
            except (TransportError, OSError, TimeoutError) as e:
                log.warning("node %d: connection to %d failed: %s", self.cfg.node_id, pid, e)
            finally:
                writer.close()
            if not self._closing:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.cfg.backoff_max)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            peer_id = await asyncio.wait_for(
                self._handshake(reader, writer, expect=None), HANDSHAKE_TIMEOUT
            )
            await self._serve(peer_id, reader, writer)
        except asyncio.IncompleteReadError:
            log.info("node %d: inbound connection closed by peer", self.cfg.node_id)
        except (TransportError, OSError, TimeoutError) as e:
            log.warning("node %d: inbound connection closed: %s", self.cfg.node_id, e)
        finally:
            writer.close()

    async def _serve(
        self, peer_id: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        p = self.peers[peer_id]
        if p.writer is not None:
            p.writer.close()  # a newer connection replaces the old one
        p.writer = writer
        p.wake.set()
        wtask = asyncio.ensure_future(self._write_loop(p, writer))
        try:
            await self._read_loop(peer_id, reader)
        finally:
            if p.writer is writer:
                p.writer = None
            wtask.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await wtask

    async def _read_frame(self, reader: asyncio.StreamReader) -> tuple[int, bytes]:
        (n,) = _LEN.unpack(await reader.readexactly(_LEN.size))
        if n == 0 or n > self.cfg.max_frame:
            raise MalformedFrame(f"bad frame length {n}")
        body = await reader.readexactly(n)
        return body[0], body[1:]

    async def _read_loop(self, peer_id: int, reader: asyncio.StreamReader) -> None:
        while True:
            try:
                kind, body = await self._read_frame(reader)
                if kind != KIND_BATCH:
                    raise MalformedFrame(f"unexpected frame kind {kind}")
                msgs = self._parse_batch(peer_id, body)
            except (MalformedFrame, CodecError, struct.error) as e:
                self.malformed += 1
                log.warning("node %d: malformed frame from %d: %s", self.cfg.node_id, peer_id, e)
                return
            for group, m in msgs:
                self.on_message(peer_id, group, m)

    @staticmethod
    def _parse_batch(peer_id: int, body: bytes) -> list[tuple[int, Message]]:
        out = []
        off = 0
        view = memoryview(body)
        while off < len(body):
            if off + _ITEM.size > len(body):
                raise MalformedFrame("truncated batch item")
            group, n = _ITEM.unpack_from(body, off)
            off += _ITEM.size
            if off + n > len(body):
                raise MalformedFrame("truncated message")
            m = decode_message(view[off : off + n])
            if m.frm != peer_id:
                raise MalformedFrame(f"message claims sender {m.frm}")
            out.append((group, m))
            off += n
        return out

    # ---- handshake -------------------------------------------------------------------------

    async def _handshake(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, expect: int | None
    ) -> int:
        cid = self.cfg.cluster_id.encode()
        nonce = os.urandom(16)
        hello = (
            bytes([KIND_HELLO])
            + _HELLO.pack(PROTOCOL_VERSION, self.cfg.node_id, nonce, len(cid))
            + cid
        )
        writer.write(_LEN.pack(len(hello)) + hello)
        await writer.drain()
        kind, body = await self._read_frame(reader)
        if kind != KIND_HELLO or len(body) < _HELLO.size:
            raise HandshakeRefused("expected HELLO")
        version, peer_id, peer_nonce, n = _HELLO.unpack_from(body, 0)
        peer_cid = body[_HELLO.size : _HELLO.size + n]
        if version != PROTOCOL_VERSION:
            raise HandshakeRefused(f"protocol version {version}")
        if peer_cid != cid:
            self.refused += 1
            raise HandshakeRefused(f"cluster id mismatch: {peer_cid!r}")
        if peer_id not in self.peers or (expect is not None and peer_id != expect):
            self.refused += 1
            raise HandshakeRefused(f"unexpected node id {peer_id}")
        if self.cfg.secret:
            mine = self._mac(peer_nonce, nonce, self.cfg.node_id)
            writer.write(_LEN.pack(1 + len(mine)) + bytes([KIND_AUTH]) + mine)
            await writer.drain()
            kind, proof = await self._read_frame(reader)
            want = self._mac(nonce, peer_nonce, peer_id)
            if kind != KIND_AUTH or not hmac.compare_digest(proof, want):
                self.refused += 1
                raise HandshakeRefused("authentication failed")
        return int(peer_id)

    def _mac(self, their_nonce: bytes, my_nonce: bytes, sender: int) -> bytes:
        assert self.cfg.secret is not None
        msg = b"epochgc-raft-auth" + their_nonce + my_nonce + struct.pack(">Q", sender)
        return hmac.new(
            self.cfg.secret, msg + self.cfg.cluster_id.encode(), hashlib.sha256
        ).digest()
