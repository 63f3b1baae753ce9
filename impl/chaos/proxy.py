"""Fault-injecting TCP proxies on loopback (asyncio, no privileges).

`LinkProxy` sits on one pair of brokers' Raft connection (the transport opens one connection
per pair, dialled by the lower id, carrying both directions). It forwards whole frames
(`u32 length | body`, the transport's framing) and drops every frame of a direction that is
cut, so a one-way cut loses messages in that direction only and never corrupts the stream.
Handshake frames are frames too: a cut direction also stops a new connection from forming.

`HttpProxy` sits in front of an S3-protocol server: `slow` delays every request, `fail`
answers each request 503 without forwarding it, `down` closes every connection at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Coroutine
from typing import Any

_LEN = struct.Struct(">I")
MAX_FRAME = 64 << 20


async def _close(w: asyncio.StreamWriter) -> None:
    w.close()
    with contextlib.suppress(Exception):
        await w.wait_closed()


async def _splice(there: Coroutine[Any, Any, None], back: Coroutine[Any, Any, None],
                  sw: asyncio.StreamWriter, cw: asyncio.StreamWriter) -> None:
    """Runs both directions of a proxied connection until either ends, then ends the
    other and closes both sockets."""
    pumps = [asyncio.create_task(there), asyncio.create_task(back)]
    try:
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for p in pumps:
            p.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)
        await _close(sw)
        await _close(cw)


class _Proxy:
    """A loopback listener on a fresh port whose connections a subclass's `_handle` serves;
    `close()` ends the listener and every connection it still has."""

    def __init__(self) -> None:
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in list(self._conns):
            t.cancel()
        await asyncio.gather(*self._conns, return_exceptions=True)

    async def _accept(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        # close() cancels this handler; ending quietly keeps asyncio's start_server callback
        # from logging the cancellation as an error.
        with contextlib.suppress(asyncio.CancelledError):
            await self._handle(cr, cw, task)

    async def _handle(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter,
                      task: asyncio.Task[None]) -> None:
        raise NotImplementedError


class LinkProxy(_Proxy):
    """Listens on a fresh loopback port, forwards to `target_port`; `lo`/`hi`: the dialling
    and the accepting node's ids."""

    def __init__(self, lo: int, hi: int, target_port: int) -> None:
        self.lo, self.hi = lo, hi
        self.target_port = target_port
        self.cut: set[tuple[int, int]] = set()  # directions (src, dst) whose frames are dropped
        self.dropped = 0
        self.forwarded = 0
        super().__init__()

    async def _handle(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter,
                      task: asyncio.Task[None]) -> None:
        try:
            try:
                sr, sw = await asyncio.open_connection("127.0.0.1", self.target_port)
            except OSError:
                await _close(cw)
                return
            await _splice(self._pump(cr, sw, (self.lo, self.hi)),
                          self._pump(sr, cw, (self.hi, self.lo)), sw, cw)
        finally:
            self._conns.discard(task)

    async def _pump(self, r: asyncio.StreamReader, w: asyncio.StreamWriter,
                    direction: tuple[int, int]) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = await r.readexactly(_LEN.size)
                (n,) = _LEN.unpack(head)
                if n > MAX_FRAME:
                    return  # not the transport's framing: end the connection
                body = await r.readexactly(n)
                if direction in self.cut:
                    self.dropped += 1
                    continue
                self.forwarded += 1
                w.write(head + body)
                await w.drain()


class HttpProxy(_Proxy):
    """In front of an HTTP server on `target_port` (one request per connection is not
    assumed: bytes are relayed as they come, the mode is read per chunk)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.mode: str | None = None  # None | "slow" | "fail" | "down"
        self.delay = 0.5
        self.refused = 0
        super().__init__()

    async def _handle(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter,
                      task: asyncio.Task[None]) -> None:
        try:
            if self.mode == "down":
                self.refused += 1
                await _close(cw)
                return
            if self.mode == "fail":
                await self._answer_503(cr, cw)
                return
            try:
                sr, sw = await asyncio.open_connection("127.0.0.1", self.target_port)
            except OSError:
                await _close(cw)
                return
            await _splice(self._relay(cr, sw), self._relay(sr, cw), sw, cw)
        finally:
            self._conns.discard(task)

    async def _answer_503(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        self.refused += 1
        with contextlib.suppress(Exception):
            async with asyncio.timeout(5.0):  # not wait_for: it can lose a cancel (rpc.py)
                await r.readuntil(b"\r\n\r\n")
            body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
                    b"<Message>injected</Message></Error>")
            w.write(b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                    b"Connection: close\r\nContent-Length: " + str(len(body)).encode()
                    + b"\r\n\r\n" + body)
            await w.drain()
        await _close(w)

    async def _relay(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while True:
                chunk = await r.read(65536)
                if not chunk:
                    return
                if self.mode == "slow":
                    await asyncio.sleep(self.delay)
                elif self.mode is not None:  # failing or down mid-connection: cut it
                    return
                w.write(chunk)
                await w.drain()
