"""newuser16 S12: a node stopping on StorageFailed (any stop with a client connected) left
`{"level": "error", "logger": "asyncio", "msg": "Exception in callback
StreamReaderProtocol.connection_made...", "exc": "Traceback ... in serve_client"}` in its
log after its one "stopping: Raft storage: ..." line: asyncio.run cancels the connection's
task, and Python 3.11's stream callback calls `task.exception()` on it, which raises. Here
the stop is the same (the loop ends with a client's connection open, real sockets on
loopback); the loop's exception handler must see nothing. Old code: one context, its
exception a CancelledError."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from epochgc.impl.cluster.rpc import serve_client


def test_a_connection_open_when_the_node_stops_logs_nothing() -> None:
    seen: list[dict[str, Any]] = []
    kept: list[object] = []  # the client's streams, alive until the loop has ended

    async def node() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _lp, ctx: seen.append(ctx))
        serving = asyncio.Event()

        async def client_connected(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            serving.set()
            await serve_client(cast(Any, None), r, w)  # no request comes: no broker needed

        srv = await asyncio.start_server(client_connected, "127.0.0.1", 0)
        kept.append(srv)
        kept.append(await asyncio.open_connection("127.0.0.1",
                                                  srv.sockets[0].getsockname()[1]))
        await serving.wait()  # the connection's task waits for a request; the node stops

    asyncio.run(node())
    assert seen == [], seen
