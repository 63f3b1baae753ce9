"""Plumbing of the review tests' hand-made HTTP fronts (tests/store/test_rev38z*.py): a
request forwarded whole to an upstream server, and its answer's status line and headers
relayed. Each front decides what it does with the answer's body."""

from __future__ import annotations

import http.client
import random
from email.message import Message
from http.server import BaseHTTPRequestHandler

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
               data: bytes) -> None:
    """The answer's status line and headers, with the length of `data` (not its body)."""
    handler.send_response(resp.status)
    for k, v in resp.getheaders():
        if k.lower() not in HOP | {"server", "date"}:
            handler.send_header(k, v)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()


def no_key_retry() -> Retrier:
    """Two attempts a key, no backoff."""
    return Retrier(Backoff(attempts=2, base_s=0.0, cap_s=0.0), random.Random(1),
                   lambda s: None)
