"""A loopback HTTP proxy in front of the S3-protocol server, for faults and latency.

- `latency_s`: every request waits this long before it is forwarded (a far-away endpoint).
- `fail(key, attempt) -> code | None`: a DeleteObjects key for which it returns a code is
  NOT forwarded (so it is really not deleted) and comes back as a per-key `<Error>` inside
  a 200 reply, as S3 does under load (`SlowDown`, `InternalError`). `attempt` counts the
  DeleteObjects requests that named the key so far (0 for the first).
- `faults`: the fault model of S3 (issue 38), each fault as S3's documentation allows it
  (see `Fault`); `fail_applied(key, attempt) -> code | None` like `fail`, but the key IS
  forwarded (deleted) and still reported as a per-key error (S3: a request answered
  InternalError "might not have processed", so it may also have); `stale_lists`: a key
  deleted through the proxy is still listed by the next N listings that cover it.

It also counts the TCP connections it accepted (a client whose pool is too small opens and
discards connections) and the DeleteObjects requests per key, and records each request's
span (kind, path, arrival, answer, on `time.monotonic`): a benchmark times the deleting
apart from the listing before it, a test checks which reads overlapped, and `in_flight`
says what the proxy holds right now (a stalled run shows what it waits for).
"""

from __future__ import annotations

import base64
import contextlib
import enum
import hashlib
import http.client
import os
import re
import socket
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit
from xml.sax.saxutils import escape

_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
ET.register_namespace("", _NS[1:-1])  # re-serialise as the default namespace, like S3
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection"}

FailFn = Callable[[str, int], str | None]


class Fault(enum.Enum):
    """What the proxy does to one request, each a behaviour S3 documents:

    APPLIED_THEN_500: forwarded (the server applies it), answered 500 InternalError. S3:
      "Requests that receive an InternalError response might not have processed. For
      example, if a PUT request returns InternalError, a subsequent GET might retrieve the
      old value or the updated value." (Amazon S3 error best practices,
      https://docs.aws.amazon.com/AmazonS3/latest/userguide/ErrorBestPractices.html)
    APPLIED_THEN_RESET: forwarded and applied, then the connection is closed with no
      answer: what a client sees of a timeout or a reset after its request was sent.
    NOT_APPLIED_500: not forwarded; 500 InternalError (the other reading of the same
      answer: the request was not processed).
    SLOW_DOWN: not forwarded; 503 SlowDown (S3 throttling: "reduce your request rate",
      same page; botocore retries it).
    CONFLICT: not forwarded; 409 ConditionalRequestConflict, S3's answer to a conditional
      write that a concurrent request on the key overtook ("retry", PutObject reference:
      https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html).
    IGNORE_CONDITIONS: forwarded without If-Match / If-None-Match: a server that does not
      implement conditional writes (AWS S3 before 2024, some S3-compatible servers).
    NEVER_ANSWER: not forwarded; the request is read and never answered (the connection
      is held until the proxy stops): an endpoint, load balancer or VPN that goes silent
      (issue 41, newuser10 L4/L5); the client's wait is its own timeout's.
    A 412 is never injected: the server answers it itself when a concurrent writer changed
    the object (the lease tests' interleavings), which is the only way S3 gives one.
    """

    APPLIED_THEN_500 = "applied-then-500"
    APPLIED_THEN_RESET = "applied-then-reset"
    NOT_APPLIED_500 = "not-applied-500"
    SLOW_DOWN = "slow-down"
    CONFLICT = "conflict"
    IGNORE_CONDITIONS = "ignore-conditions"
    NEVER_ANSWER = "never-answer"


@dataclass(frozen=True)
class Call:
    """One request as a fault plan sees it."""

    kind: str  # request_kind(): "list", "get", "put", "head", "delete" (DeleteObjects), ...
    method: str
    key: str  # the path without the query: /bucket/key (or /bucket)
    conditional: bool  # it carries If-Match or If-None-Match
    attempt: int  # how many requests of this kind for this path came before (0: first)
    keys: tuple[str, ...] = ()  # a DeleteObjects's keys, as sent (bucket-relative)
    query: str = ""  # the path's query, as sent (a listing's prefix is there)


FaultPlan = Callable[[Call], Fault | None]
_CONDITIONS = ("if-match", "if-none-match")


@dataclass(frozen=True)
class Span:
    kind: str  # "list", "get", "put", "head", "delete" (DeleteObjects), or the method
    path: str  # as the client sent it (bucket, key and query)
    arrived: float
    answered: float

    def overlaps(self, other: Span) -> bool:
        return self.arrived < other.answered and other.arrived < self.answered


def request_kind(method: str, path: str) -> str:
    parts = urlsplit(path)
    query = parts.query.split("&")
    if method == "POST" and "delete" in query:
        return "delete"
    bucket_only = "/" not in parts.path.strip("/")
    subresource = any(q and "=" not in q for q in query)  # ?versioning, ?location, ...
    if method == "GET" and bucket_only and not subresource:
        return "list"  # ListObjects(V2): a GET of the bucket itself, with parameters only
    return method.lower()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def __init__(self, proxy: S3Proxy) -> None:
        self.proxy = proxy
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request(self, request: object, client_address: object) -> None:
        with self.proxy.lock:
            self.proxy.connections += 1
        super().process_request(request, client_address)  # type: ignore[arg-type]

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that reset or dropped its connection (a fault plan's own resets, a
        client giving up on a slow answer) is not news: no traceback. socketserver's
        default "prints the traceback to standard error"
        (https://docs.python.org/3/library/socketserver.html#socketserver.BaseServer.handle_error),
        from the request's thread; on Python 3.11 one printed while pytest parsed source
        to show a failure ended the session in an INTERNALERROR ("AST constructor
        recursion depth mismatch", cpython gh-106905; review rev38q finding 6). Any other
        error still prints."""
        if self.proxy.quiet or isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


class S3Proxy:
    def __init__(self, upstream: str, latency_s: float = 0.0, fail: FailFn | None = None,
                 faults: FaultPlan | None = None, fail_applied: FailFn | None = None,
                 stale_lists: int = 0, *, quiet: bool = False):
        self.upstream = urlsplit(upstream)
        # No traceback from a request's thread at all (tests whose faults reset or drop
        # connections on purpose): see `_Server.handle_error`.
        self.quiet = quiet
        self.latency_s = latency_s
        self.fail = fail
        self.faults = faults
        self.fail_applied = fail_applied
        self.stale_lists = stale_lists
        self.calls: Counter[tuple[str, str]] = Counter()  # (kind, path) -> requests seen
        self.faulted: Counter[Fault] = Counter()  # faults injected, by kind
        self.applied_errors = 0  # keys deleted and still reported as per-key errors
        self._listed: dict[str, ET.Element] = {}  # full key -> its last <Contents> listed
        self._stale: dict[str, int] = {}  # full key -> listings it still shows in
        self.lock = threading.Lock()
        self.connections = 0
        self.delete_attempts: Counter[str] = Counter()  # full keys, as sent
        self.injected: Counter[str] = Counter()  # per-key errors injected, by code
        self.spans: list[Span] = []  # every answered request, in answer order
        self.in_flight: Counter[str] = Counter()  # by kind
        self.closing = threading.Event()  # set by `stop`: held requests are dropped
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> S3Proxy:
        self._thread.start()
        return self

    def wait_recorded(self, answers: int | None = None, timeout_s: float = 10.0) -> bool:
        """Wait until no request is in flight (and at least `answers` spans are recorded): a
        client has its answer before the handler records it, so a test that reads `spans`
        or `in_flight` right after its calls returned can see the last ones missing."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self.lock:
                if not +self.in_flight and len(self.spans) >= (answers or 0):
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    def stop(self) -> None:
        self.closing.set()
        self._server.shutdown()
        self._server.server_close()

    @property
    def delete_spans(self) -> list[tuple[float, float]]:
        """(arrived, answered) of each DeleteObjects request."""
        return [(s.arrived, s.answered) for s in self.spans if s.kind == "delete"]

    def rewrite_delete(self, body: bytes) -> tuple[bytes | None, list[tuple[str, str]]]:
        """Split a DeleteObjects body into what is forwarded and the injected errors."""
        root = ET.fromstring(body)
        ns = _NS if root.tag.startswith(_NS) else ""
        errors: list[tuple[str, str]] = []
        for obj in list(root.findall(f"{ns}Object")):
            key = obj.findtext(f"{ns}Key") or ""
            with self.lock:
                attempt = self.delete_attempts[key]
                self.delete_attempts[key] += 1
            code = self.fail(key, attempt) if self.fail is not None else None
            if code is not None:
                errors.append((key, code))
                root.remove(obj)
                with self.lock:
                    self.injected[code] += 1
                continue
            code = self.fail_applied(key, attempt) if self.fail_applied is not None else None
            if code is not None:  # forwarded: deleted, and still reported as failed
                errors.append((key, code))
                with self.lock:
                    self.injected[code] += 1
                    self.applied_errors += 1
        if not root.findall(f"{ns}Object"):
            return None, errors
        return ET.tostring(root, xml_declaration=True, encoding="UTF-8"), errors

    def plan(self, call: Call) -> Fault | None:
        return self.faults(call) if self.faults is not None else None

    def deleted(self, full_keys: list[str]) -> None:
        """Keys the server deleted: still listed by the next `stale_lists` listings."""
        if self.stale_lists:
            with self.lock:
                for k in full_keys:
                    self._stale[k] = self.stale_lists

    def relist(self, query: str, data: bytes) -> bytes:
        """A ListObjectsV2 reply: remember each key's entry, and put back the deleted keys
        this listing would still show (eventual listing after a delete). AWS S3 itself lists
        consistently since December 2020 ("strong read-after-write consistency ... list
        operations", https://docs.aws.amazon.com/AmazonS3/latest/userguide/Welcome.html#ConsistencyModel);
        some S3-compatible servers do not, and the GC must stay true on them."""
        root = ET.fromstring(data)
        ns = _NS if root.tag.startswith(_NS) else ""
        contents = root.findall(f"{ns}Contents")
        with self.lock:
            for c in contents:
                self._listed[c.findtext(f"{ns}Key") or ""] = c
            if not self._stale:
                return data
            params = dict(p.partition("=")[::2] for p in query.split("&") if p)
            prefix = unquote(params.get("prefix", ""))
            after = unquote(params.get("start-after", ""))
            truncated = root.findtext(f"{ns}IsTruncated") == "true"
            last = contents[-1].findtext(f"{ns}Key") if contents and truncated else None
            back = [k for k in self._stale
                    if k.startswith(prefix) and k > after and (last is None or k < last)
                    and k in self._listed]
            if not back:
                return data
            for k in back:
                self._stale[k] -= 1
                if not self._stale[k]:
                    del self._stale[k]
        entries = sorted([*contents, *(self._listed[k] for k in back)],
                         key=lambda c: c.findtext(f"{ns}Key") or "")
        at = list(root).index(contents[0]) if contents else len(root)
        for c in contents:
            root.remove(c)
        for i, c in enumerate(entries):
            root.insert(at + i, c)
        count = root.find(f"{ns}KeyCount")
        if count is not None:
            count.text = str(len(entries))
        return ET.tostring(root, xml_declaration=True, encoding="UTF-8")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as boto3 expects
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass

    def finish(self) -> None:
        super().finish()
        conn = getattr(_local, "conn", None)
        if conn is not None:  # one upstream connection per client connection (thread)
            conn.close()
            _local.conn = None

    def _forward(self) -> None:
        proxy = self.server.proxy
        arrived = time.monotonic()
        kind = request_kind(self.command, self.path)
        with proxy.lock:
            proxy.in_flight[kind] += 1
        self._answered: float | None = None
        try:
            self._forward_one()
        finally:
            answered = self._answered or time.monotonic()
            with proxy.lock:
                proxy.in_flight[kind] -= 1
                proxy.spans.append(Span(kind, self.path, arrived, answered))

    def _forward_one(self) -> None:
        proxy = self.server.proxy
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        if proxy.latency_s:
            time.sleep(proxy.latency_s)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        parts = urlsplit(self.path)
        kind = request_kind(self.command, self.path)
        conditional = any(k.lower() in _CONDITIONS for k in headers)
        with proxy.lock:
            attempt = proxy.calls[(kind, parts.path)]
            proxy.calls[(kind, parts.path)] += 1
        is_delete = self.command == "POST" and "delete" in parts.query.split("&")
        sent_keys = _delete_keys(body) if is_delete and body else []
        fault = proxy.plan(Call(kind, self.command, parts.path, conditional, attempt,
                                tuple(sent_keys), parts.query))
        if fault is not None:
            with proxy.lock:
                proxy.faulted[fault] += 1
        if fault is Fault.NEVER_ANSWER:
            proxy.closing.wait()  # held unanswered; `stop` drops it
            self.close_connection = True
            return
        if fault is Fault.SLOW_DOWN:
            self._error(503, "SlowDown", "Please reduce your request rate.")
            return
        if fault is Fault.NOT_APPLIED_500:
            self._error(500, "InternalError", "We encountered an internal error. "
                        "Please try again.")
            return
        if fault is Fault.CONFLICT:
            self._error(409, "ConditionalRequestConflict", "A conflicting operation "
                        "occurred. If using PutObject you can retry the request.")
            return
        if fault is Fault.IGNORE_CONDITIONS and conditional:
            headers = {k: v for k, v in headers.items() if k.lower() not in _CONDITIONS}
            headers = _resigned(proxy, self.command, self.path, headers, body)
        injected: list[tuple[str, str]] = []
        if is_delete and body:
            new_body, injected = proxy.rewrite_delete(body)
            if new_body is None:  # every key failed: answer without the server
                self._reply(200, {"Content-Type": "application/xml"}, _delete_result(b"", injected))
                return
            sent_keys = _delete_keys(new_body)
            if len(sent_keys) < len(_delete_keys(body)):  # else forward the body as signed
                body = new_body
                headers = _resigned(proxy, self.command, self.path, headers, body)
        for attempt in (0, 1):
            conn = _upstream(proxy)
            reused = conn.sock is not None
            try:
                conn.request(self.command, self.path, body=body or None, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                break
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                _local.conn = None
                # The server closed a kept-alive connection while it sat idle (the injected
                # latency is longer than its idle timeout) before it read this request:
                # nothing reached it, so send it once more on a new connection.
                stale = isinstance(e, (http.client.RemoteDisconnected, BrokenPipeError))
                if attempt or not reused or not stale:
                    raise
        out = {k: v for k, v in resp.getheaders() if k.lower() not in _HOP}
        if resp.status < 300:
            if is_delete:
                proxy.deleted(sent_keys)
            elif self.command == "DELETE":
                proxy.deleted([parts.path.split("/", 2)[-1]])
            elif kind == "list":
                data = proxy.relist(parts.query, data)
        if fault is Fault.APPLIED_THEN_500:
            self._error(500, "InternalError", "We encountered an internal error. "
                        "Please try again.")
            return
        if fault is Fault.APPLIED_THEN_RESET:
            self._answered = time.monotonic()
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        if injected and resp.status == 200:
            data = _delete_result(data, injected)
        if self.command == "HEAD":
            self._reply(
                resp.status,
                {**out, "Content-Length": resp.getheader("Content-Length") or "0"},
                b"",
                head=True,
            )
        else:
            self._reply(resp.status, out, data)

    def _error(self, status: int, code: str, message: str) -> None:
        """An S3 error answer; to a HEAD without its body (HTTP: a HEAD's answer has none,
        RFC 9110 9.3.2; a body sent after it was read as the next answer's start)."""
        if self.command == "HEAD":
            self._reply(status, {"Content-Length": "0"}, b"", head=True)
            return
        self._reply(status, {"Content-Type": "application/xml"}, _error_doc(code, message))

    def _reply(self, status: int, headers: dict[str, str], data: bytes, head: bool = False) -> None:
        # Before the client can have the answer: whatever it sends because of this answer
        # arrives later than this, so spans order cause before effect.
        self._answered = time.monotonic()
        self.send_response(status)
        for k, v in headers.items():
            if k.lower() not in ("server", "date"):
                self.send_header(k, v)
        if not head:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if not head:
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward


_local = threading.local()


def _upstream(proxy: S3Proxy) -> http.client.HTTPConnection:
    conn: http.client.HTTPConnection | None = getattr(_local, "conn", None)
    if conn is None or getattr(_local, "proxy", None) is not proxy:
        conn = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=60)
        _local.conn, _local.proxy = conn, proxy
    return conn


_SCOPE = re.compile(r"Credential=[^/]+/\d{8}/(?P<region>[^/]+)/s3/aws4_request")
_SIGNED = {"authorization", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"}


def _resigned(
    proxy: S3Proxy, method: str, path: str, headers: dict[str, str], body: bytes
) -> dict[str, str]:
    """Headers for a rewritten body: new digests, and signed again (SigV4, the tests'
    credentials from the environment, the client's region) when the client signed, so a
    server that checks signatures (SeaweedFS) takes the request as the client's."""
    headers = {
        k: v
        for k, v in headers.items()
        if not k.lower().startswith("x-amz-checksum")
        and k.lower() not in ("x-amz-sdk-checksum-algorithm", "content-md5")
    }
    headers["Content-MD5"] = base64.b64encode(hashlib.md5(body).digest()).decode()
    auth = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
    if auth is None:
        return headers
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    scope = _SCOPE.search(auth)
    if scope is None:
        raise ValueError(f"s3proxy: cannot re-sign a request signed as {auth[:60]!r}")
    creds = Credentials(
        os.environ["AWS_ACCESS_KEY_ID"],
        os.environ["AWS_SECRET_ACCESS_KEY"],
        os.environ.get("AWS_SESSION_TOKEN"),
    )
    host = f"{proxy.upstream.hostname}:{proxy.upstream.port}"
    unsigned = {k: v for k, v in headers.items() if k.lower() not in _SIGNED | {"host"}}
    unsigned["Host"] = host
    request = AWSRequest(method, f"http://{host}{path}", data=body, headers=unsigned)
    S3SigV4Auth(creds, "s3", scope.group("region")).add_auth(request)
    return dict(request.headers.items())


def _error_doc(code: str, message: str) -> bytes:
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>{escape(message)}</Message></Error>").encode()


def _delete_keys(body: bytes) -> list[str]:
    """The keys a DeleteObjects body names (as sent: bucket-relative, no leading '/')."""
    root = ET.fromstring(body)
    ns = _NS if root.tag.startswith(_NS) else ""
    return [o.findtext(f"{ns}Key") or "" for o in root.findall(f"{ns}Object")]


def _delete_result(data: bytes, injected: list[tuple[str, str]]) -> bytes:
    """Add per-key <Error> entries to a (quiet) DeleteResult document."""
    errors = "".join(
        f"<Error><Key>{escape(k)}</Key><Code>{c}</Code><Message>injected {c}</Message></Error>"
        for k, c in injected
    ).encode()
    if not data.strip():
        return (
            b'<?xml version="1.0" encoding="UTF-8"?>\n'
            b'<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
            + errors
            + b"</DeleteResult>"
        )
    end = data.rindex(b"</DeleteResult>")
    return data[:end] + errors + data[end:]


@contextmanager
def s3_proxy(
    upstream: str, latency_s: float = 0.0, fail: FailFn | None = None, *,
    faults: FaultPlan | None = None, fail_applied: FailFn | None = None, stale_lists: int = 0,
    quiet: bool = False,
) -> Iterator[S3Proxy]:
    proxy = S3Proxy(upstream, latency_s, fail, faults, fail_applied, stale_lists,
                    quiet=quiet).start()
    try:
        yield proxy
    finally:
        proxy.stop()


__all__ = ["Call", "Fault", "FaultPlan", "S3Proxy", "Span", "request_kind", "s3_proxy"]
