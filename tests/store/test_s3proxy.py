"""The latency proxy itself: it must not turn a server's idle-connection close into a
failed request (found by the S3 benchmark: SeaweedFS closed kept-alive connections that sat
idle through the injected latency, and each such request failed and was retried by boto3)."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.store.s3proxy import s3_proxy


class _ClosesIdle(BaseHTTPRequestHandler):
    """Answers, keeps the connection open as HTTP/1.1 allows, then closes it unannounced
    (as a server does when its idle timeout passes)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
        self.close_connection = True  # no "Connection: close" header: the proxy cannot know


@pytest.fixture
def upstream() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ClosesIdle)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_connection_the_server_closed_while_idle_is_replaced(upstream: str) -> None:
    with s3_proxy(upstream, latency_s=0.05) as proxy:
        port = int(proxy.endpoint.rsplit(":", 1)[1])
        client = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            for _ in range(3):  # one client connection: the proxy reuses its upstream one
                client.request("GET", "/bucket/key")
                resp = client.getresponse()
                assert (resp.status, resp.read()) == (200, b"ok")
        finally:
            client.close()
