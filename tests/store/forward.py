"""Plumbing of the review tests' hand-made HTTP fronts (tests/store/test_rev38z*.py): a
request forwarded whole to an upstream server, and its answer's status line and headers
relayed; a front server on a loopback port (`FrontServer`, `serving`) whose handler
(`FrontHandler`) forwards every request but the DeleteObjects it answers its own way."""

from __future__ import annotations

import contextlib
import http.client
import random
import threading
from collections.abc import Iterator
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TypeVar

from epochgc.impl.store.retry import Backoff, Retrier

# Hop-by-hop headers and the length (set again from the body actually relayed).
HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection"}


def forward(host: str, port: int, command: str, path: str, headers: Message,
            body: bytes) -> tuple[http.client.HTTPResponse, bytes]:
    """Send the request to host:port on a connection of its own; its answer and body."""
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.request(command, path, body=body or None,
                     headers={k: v for k, v in headers.items() if k.lower() not in HOP})
        resp = conn.getresponse()
        return resp, resp.read()
    finally:
        conn.close()


def relay_head(handler: BaseHTTPRequestHandler, resp: http.client.HTTPResponse,
               data: bytes, drop: frozenset[str] = frozenset()) -> None:
    """The answer's status line and headers (less those named, lower case, in `drop`),
    with the length of `data` (not its body)."""
    handler.send_response(resp.status)
    for k, v in resp.getheaders():
        if k.lower() not in HOP | {"server", "date"} | drop:
            handler.send_header(k, v)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()


def error_body(code: str, message: str, request_id: str) -> bytes:
    """S3's error response body (API reference, "Error responses": ErrorResponses.html)."""
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>{message}</Message><RequestId>{request_id}</RequestId></Error>"
            ).encode()


def no_key_retry() -> Retrier:
    """Two attempts a key, no backoff."""
    return Retrier(Backoff(attempts=2, base_s=0.0, cap_s=0.0), random.Random(1),
                   lambda s: None)


def is_delete_objects(command: str, path: str) -> bool:
    """A DeleteObjects request: POST with the `delete` subresource in its query."""
    return command == "POST" and "delete" in path.partition("?")[2].split("&")


class FrontServer(ThreadingHTTPServer):
    """A front on a loopback port for the S3 server at `upstream` (http://host:port),
    counting the DeleteObjects and HEADs it saw."""

    daemon_threads = True

    def __init__(self, upstream: str, handler: type[BaseHTTPRequestHandler]) -> None:
        self.deletes = 0  # DeleteObjects requests seen
        self.heads = 0  # HEADs seen
        self.lock = threading.Lock()
        host, _, port = upstream.removeprefix("http://").partition(":")
        self.upstream = (host, int(port))
        super().__init__(("127.0.0.1", 0), handler)

    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that gave up on a connection the front closed is not news


class HoldingServer(FrontServer):
    """A front that may take a request and not carry it out yet (`held`: its handler
    appends it, under `lock`): the test carries it out later (`apply`), as a server that
    got a request may up to `stage.SENT_APPLIED_S` after (the project's model, `bounds.py`
    item 3)."""

    def __init__(self, upstream: str, handler: type[BaseHTTPRequestHandler]) -> None:
        self.held: list[tuple[str, str, Message, bytes]] = []
        super().__init__(upstream, handler)

    def apply(self) -> None:
        with self.lock:
            held, self.held = self.held, []
        for command, path, headers, body in held:
            forward(*self.upstream, command, path, headers, body)


class FrontHandler(BaseHTTPRequestHandler):
    """Counts, then forwards each request whole and relays its answer, but a DeleteObjects,
    which `answer_delete` answers (a subclass's)."""

    protocol_version = "HTTP/1.1"
    server: FrontServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def answer_delete(self, body: bytes) -> None:
        raise NotImplementedError

    def read_body(self) -> bytes:
        """The request's body (by its Content-Length)."""
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def send_xml(self, status: int, data: bytes) -> None:
        """An answer of the front's own: `status`, the XML body `data`."""
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _go(self) -> None:
        body = self.read_body()
        delete = is_delete_objects(self.command, self.path)
        with self.server.lock:
            self.server.heads += self.command == "HEAD"
            self.server.deletes += delete
        if delete:
            self.answer_delete(body)
            return
        resp, data = forward(*self.server.upstream, self.command, self.path, self.headers,
                             body)
        relay_head(self, resp, data)
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _go


S = TypeVar("S", bound=ThreadingHTTPServer)


@contextlib.contextmanager
def serving(server: S) -> Iterator[S]:
    """`server` serving on a thread of its own until the block ends."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
