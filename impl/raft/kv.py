"""A tiny replicated key-value application and its client protocol, used by the node process
(`node_main`), the multi-process tests and the benchmark.

Commands (entry data): u8 op | u32 key length | key | value.  PUT stores, GET reads through
the log (so a read after a restart is linearizable without read leases).
Client frames: u32 length | body.
  request  = u32 request id | u8 op | u32 group | u32 key length | key | value
  response = u32 request id | u8 status | u64 leader hint | value
Requests may be pipelined; responses carry the request id.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from typing import Any

from epochgc.impl.raft.messages import Entry, Snapshot

OP_PUT = 1
OP_GET = 2
OP_LEADER = 3  # which node leads the group (answered locally, not through the log)

ST_OK = 0
ST_NOT_LEADER = 1
ST_FAILED = 2  # outcome unknown (leadership lost) or refused
ST_ERROR = 3

_CMD = struct.Struct(">BI")
_REQ = struct.Struct(">IBII")
_RESP = struct.Struct(">IBQ")
_LEN = struct.Struct(">I")
_KV = struct.Struct(">II")


def encode_command(op: int, key: bytes, value: bytes = b"") -> bytes:
    return _CMD.pack(op, len(key)) + key + value


def decode_command(data: bytes) -> tuple[int, bytes, bytes]:
    op, n = _CMD.unpack_from(data, 0)
    key = data[_CMD.size : _CMD.size + n]
    return op, key, data[_CMD.size + n :]


class KVStateMachine:
    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self.applied = 0

    def apply(self, entry: Entry) -> Any:
        self.applied = entry.index
        op, key, value = decode_command(entry.data)
        if op == OP_PUT:
            self.data[key] = value
            return b""
        if op == OP_GET:
            return self.data.get(key, b"")
        return b""

    def snapshot(self) -> bytes:
        parts = [struct.pack(">QI", self.applied, len(self.data))]
        for k, v in sorted(self.data.items()):
            parts.append(_KV.pack(len(k), len(v)) + k + v)
        return b"".join(parts)

    def restore(self, snapshot: Snapshot) -> None:
        self.data = {}
        self.applied = snapshot.index
        if snapshot.index == 0:
            return
        buf = snapshot.data
        _, count = struct.unpack_from(">QI", buf, 0)
        off = 12
        for _ in range(count):
            kn, vn = _KV.unpack_from(buf, off)
            off += _KV.size
            self.data[buf[off : off + kn]] = buf[off + kn : off + kn + vn]
            off += kn + vn


def encode_request(req_id: int, op: int, group: int, key: bytes, value: bytes = b"") -> bytes:
    body = _REQ.pack(req_id, op, group, len(key)) + key + value
    return _LEN.pack(len(body)) + body


def decode_request(body: bytes) -> tuple[int, int, int, bytes, bytes]:
    req_id, op, group, n = _REQ.unpack_from(body, 0)
    key = body[_REQ.size : _REQ.size + n]
    return req_id, op, group, key, body[_REQ.size + n :]


def encode_response(req_id: int, status: int, leader: int, value: bytes = b"") -> bytes:
    body = _RESP.pack(req_id, status, leader) + value
    return _LEN.pack(len(body)) + body


class KVClient:
    """Pipelining client for one node's client port."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._next = 0
        self._waiting: dict[int, asyncio.Future[tuple[int, int, bytes]]] = {}
        self._task = asyncio.ensure_future(self._read_loop())

    @classmethod
    async def connect(cls, host: str, port: int) -> KVClient:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    async def close(self) -> None:
        self.writer.close()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task

    def request(
        self, op: int, key: bytes, value: bytes = b"", group: int = 1
    ) -> asyncio.Future[tuple[int, int, bytes]]:
        """Send a request; the future gives (status, leader hint, value)."""
        self._next += 1
        fut: asyncio.Future[tuple[int, int, bytes]] = asyncio.get_running_loop().create_future()
        if self._task.done() or self.writer.is_closing():
            fut.set_exception(ConnectionError("connection closed"))
            return fut
        self._waiting[self._next] = fut
        self.writer.write(encode_request(self._next, op, group, key, value))
        return fut

    async def _read_loop(self) -> None:
        try:
            while True:
                (n,) = _LEN.unpack(await self.reader.readexactly(4))
                body = await self.reader.readexactly(n)
                req_id, status, leader = _RESP.unpack_from(body, 0)
                fut = self._waiting.pop(req_id, None)
                if fut is not None and not fut.done():
                    fut.set_result((status, leader, body[_RESP.size :]))
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as e:
            for fut in self._waiting.values():
                if not fut.done():
                    fut.set_exception(ConnectionError(f"connection lost: {e}"))
            self._waiting.clear()
