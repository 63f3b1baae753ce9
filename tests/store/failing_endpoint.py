"""An endpoint that answers every request at once with `500 InternalError` (issue 41,
newuser9 K4: a broken gateway in front of the store, an S3 service in trouble). A real
HTTP server on 127.0.0.1 (a free port), so the client's retries and their count are its
own: every request it sends is one this server answered, and `requests` keeps them in
order (method, path) so a test can say what the command tried to read or write.

The error body is S3's (`Error` with `Code` InternalError: AWS S3 API Reference, "Error
responses", https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html; code
InternalError is HTTP 500, "We encountered an internal error. Please try again.")."""

from __future__ import annotations

import contextlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_BODY = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InternalError</Code>'
         b"<Message>We encountered an internal error. Please try again.</Message>"
         b"<RequestId>0</RequestId></Error>")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as S3 and botocore's pool use
    server: _Server

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)  # the request's body (a PUT's) is read and dropped
        with self.server.lock:
            self.server.requests.append((self.command, self.path))
        self.send_response(500, "Internal Server Error")
        self.send_header("Content-Type", "application/xml")
        body = b"" if self.command == "HEAD" else _BODY  # a HEAD reply has no body
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass  # the requests are kept in `requests`, not printed


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str]] = []


class FailingEndpoint:
    """Serves from a daemon thread until `close`."""

    def __init__(self) -> None:
        self._server = _Server()
        self.port = int(self._server.server_address[1])
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def requests(self) -> list[tuple[str, str]]:
        with self._server.lock:
            return list(self._server.requests)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def failing_endpoint() -> contextlib.closing[FailingEndpoint]:
    return contextlib.closing(FailingEndpoint())
