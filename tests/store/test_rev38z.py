"""Review rev38z: issue 38's deletion path as merged (main 787838e): each DeleteObjects
attempt marked "may have been applied" or not through botocore's `needs-retry` event
(`impl/store/attempts.py`), a first-send 412 HEADed, the `stopped` read-back.

Each finding is a strict xfail: it fails on the code as merged and passes once fixed. All
run against moto in server mode on loopback, through the fault-injecting proxy
(`s3proxy.py`) and, where the fault is one the proxy has no word for, a front of this
file's own in front of it (`_CutFront`)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from epochgc.impl.gc.delete import delete_keys
from epochgc.impl.gc.journal import Attempt, JournalTarget, JournalWriter, read_journal
from epochgc.impl.store.base import StoreError
from epochgc.impl.store.s3 import S3Store
from tests.store.forward import forward, no_key_retry, relay_head, serving
from tests.store.s3proxy import Call, Fault, s3_proxy
from tests.store.s3server import new_bucket

D = "level_zero/data/001/000000000000000005/"  # journaled keys are data keys (R20)

pytestmark = pytest.mark.s3

_PREFIX = "_cluster/gc/journal/20270116T100000.000Z-rev38z000/"  # a round's journal


class _Front(BaseHTTPRequestHandler):
    """Forwards each request whole to `server.upstream`. With `slowdown_200`, the first
    DeleteObjects is forwarded (applied) and answered 200 with a SlowDown <Error> body;
    else each DeleteObjects (POST ?delete) answer goes back as its status line and headers
    only (its true Content-Length), then the connection is closed: the body is lost on the
    way, as when a load balancer, a proxy or the network resets the connection after the
    headers. RFC 9112 6.3: "If a
    valid Content-Length header field is present ... and the sender closes the
    connection ... before the indicated number of octets are received, the recipient MUST
    consider the message to be incomplete and close the connection"."""

    protocol_version = "HTTP/1.1"
    server: _FrontServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _go(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        if self.server.late and self.command == "POST" and "delete" in self.path:
            self._late(body)
            return
        resp, data = forward(*self.server.upstream, self.command, self.path, self.headers,
                             body)
        delete = self.command == "POST" and "delete" in self.path.partition("?")[2].split("&")
        with self.server.lock:
            nth = self.server.deletes
            self.server.deletes += delete
        if delete and self.server.slowdown_200 and nth == 0:
            # Applied above (forwarded); answered 200 with an <Error> body: what S3 sends
            # for a DeleteObjects it throttles part-way (see finding 5's test).
            with self.server.lock:
                self.server.cut.append(data)
            self._whole(200, {"Content-Type": "application/xml"}, _SLOWDOWN_200)
            return
        cut = delete and not self.server.slowdown_200
        relay_head(self, resp, data)
        if cut:
            with self.server.lock:
                self.server.cut.append(data)
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        if self.command != "HEAD":
            self.wfile.write(data)
        if self.command == "HEAD":
            self.wfile.flush()
            self.server.release.set()  # the client has looked: the held delete may land

    def _late(self, body: bytes) -> None:
        """The request was received whole; the connection is reset before any answer (a
        load balancer's idle cut, a peer reset); the server carries the request out a
        moment later, once the client has asked HEAD about its keys (`late`): within
        seconds of receiving it, well inside the `READ_TIMEOUT_S` the stop bound allows a
        server (`impl/gc/bounds.py`)."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
        if not self.server.release.wait(30.0):
            return
        try:
            forward(*self.server.upstream, self.command, self.path, self.headers, body)
        finally:
            self.server.applied.set()

    def _whole(self, status: int, headers: dict[str, str], data: bytes) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _go


_SLOWDOWN_200 = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
                 b"<Message>Please reduce your request rate.</Message></Error>")


class _FrontServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: str, slowdown_200: bool = False, late: bool = False) -> None:
        self.slowdown_200 = slowdown_200  # else: every DeleteObjects answer's body is cut
        self.late = late  # each DeleteObjects: reset, then applied after a HEAD (`_late`)
        self.release = threading.Event()  # a HEAD was answered
        self.applied = threading.Event()  # the held DeleteObjects reached the server
        self.deletes = 0  # DeleteObjects requests seen
        host, _, port = upstream.removeprefix("http://").partition(":")
        self.upstream = (host, int(port))
        self.lock = threading.Lock()
        self.cut: list[bytes] = []  # the DeleteObjects answers whose bodies were dropped
        super().__init__(("127.0.0.1", 0), _Front)

    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that gave up on a connection we closed is not news


def _cut_front(upstream: str, slowdown_200: bool = False,
               late: bool = False) -> contextlib.AbstractContextManager[_FrontServer]:
    return serving(_FrontServer(upstream, slowdown_200, late))


def test_a_200_whose_body_is_lost_counts_no_refused_key_deleted(
    s3_endpoint: str, s3_server_name: str
) -> None:
    """Finding 1 (HIGH). The round's conditional DeleteObjects reaches the server, which
    deletes `plain` and refuses `kept` with a per-key 412 PreconditionFailed (it was
    rewritten since it was listed: S3's conditional delete, https://docs.aws.amazon.com/
    AmazonS3/latest/userguide/conditional-deletes.html; SeaweedFS answers so itself, on moto,
    which ignores a DeleteObjects' ETags, the proxy does; the object IS rewritten). The answer's
    status line and headers arrive (200, Content-Length: N) and the connection is closed
    before its body. botocore reads bodies with `enforce_content_length=False`
    (`httpsession.py`) and takes an empty 200 body as no error (`_looks_like_special_case_
    error` only looks at a non-empty body), so `delete_objects` returns {} with
    RetryAttempts 0: no `Errors`, and `_delete_once` reads that as every key deleted.
    `kept` is in the store (rewritten) and counted `deleted`: the task's journaled outcome
    says so, and the read-back (the record, the manifest) with it. No attempt was marked
    unsure: nothing is asked (HEAD). A 200 whose body is any well-formed document but a
    DeleteResult (a proxy's page) is read the same way."""
    bucket = new_bucket(s3_endpoint)
    direct = S3Store(bucket, "c", endpoint_url=s3_endpoint)  # the journal's store too
    keys = [f"{D}kept", f"{D}plain"]
    for k in keys:
        direct.put(k, b"x")
    items = [(k, 1, 7200.0, direct.head(k).version) for k in keys]  # type: ignore[union-attr]
    direct.put(f"{D}kept", b"rewritten since it was listed")

    def refuse_kept(key: str, attempt: int) -> str | None:
        return "PreconditionFailed" if key.endswith("/kept") else None

    # SeaweedFS evaluates each key's ETag itself (412 for the rewritten one); moto does not.
    refuse = refuse_kept if s3_server_name == "moto" else None
    with s3_proxy(s3_endpoint, fail=refuse) as p, _cut_front(p.endpoint) as front:
        store = S3Store(bucket, "c", endpoint_url=front.endpoint(), max_attempts=2,
                        key_retry=no_key_retry())
        try:
            writer = JournalWriter(direct, JournalTarget(_PREFIX), Attempt(0, 0, 0, 1))
            delete_keys(store, items, batch_size=2, concurrency=1, journal=writer)
        finally:
            store.close()
    assert front.cut and b"PreconditionFailed" in front.cut[0]  # the answer that was lost
    assert direct.head(f"{D}plain") is None and direct.head(f"{D}kept") is not None
    totals = read_journal(direct, _PREFIX)
    counted = {"deleted": sorted(totals.deleted), "changed": sorted(totals.changed),
               "errors": sorted(totals.errors), "unknown": sorted(totals.unknown),
               "gone_unattributed": sorted(totals.gone_unattributed)}
    assert f"{D}kept" not in totals.deleted, (
        f"{D}kept is still in the store (rewritten), yet the read-back says {counted}")


def _limiter(store: S3Store) -> Any:
    """botocore's adaptive-mode client rate limiter of `store`'s client (registered on
    `before-send` by `botocore/retries/adaptive.py` `register_retry_handler`)."""
    from botocore.retries.adaptive import ClientRateLimiter

    handlers = store.client.meta.events._emitter._handlers.prefix_search(
        "before-send.s3.DeleteObjects")
    found = [getattr(h, "__self__", None) for h in handlers]
    limiters = [h for h in found if isinstance(h, ClientRateLimiter)]
    assert len(limiters) == 1, handlers
    return limiters[0]


class _SteppedClock:
    """The token bucket's own clock, read `offset_s` away: a bucket held (or filled) as
    one whose clock went back (or on) that far. botocore's bucket read the wall clock
    (`retries/bucket.py` `Clock`: `time.time()`), which NTP or a restored VM can step;
    ours reads the monotonic clock (`ratelimit.py`, review rev38z2 finding 2), but a
    throttled bucket can still hold a request for long (0.5 tokens a second at least,
    `TokenBucket._MIN_RATE`, shared by every waiter): the after-limiter check must refuse
    it either way."""

    def __init__(self, inner: Any, offset_s: float) -> None:
        self.inner = inner
        self.offset_s = offset_s

    def current_time(self) -> float:
        return float(self.inner.current_time()) + self.offset_s

    def sleep(self, amount: float) -> None:
        time.sleep(amount)


def test_no_delete_is_sent_past_its_deadline_while_the_rate_limiter_holds_it(
    moto_endpoint: str,
) -> None:
    """Finding 2 (HIGH: a deletion after the read-back, in no record). `send_by` refuses an
    attempt in botocore's `before-send` event; in adaptive mode (the delete client's,
    `S3Store._make_client`) the client's rate limiter waits for a token in the same event,
    in a handler registered on the bare `before-send` name, which botocore calls AFTER the
    more specific `before-send.s3.DeleteObjects` (`hooks.py` `prefix_search`: "the values
    associated with the node furthest from the root ... come before nodes closer to the
    root"). Once the limiter is on (a SlowDown seen by the client: `adaptive.py`
    `on_receiving_response`), its bucket refills by `time.time()`: the wall clock. Here
    the wall clock steps back one hour after a throttled request; the next batch passes
    the deadline check, then waits in `TokenBucket.acquire` (capacity -1800 tokens at
    0.5 a second) and is sent when the clock has caught up, long past its deadline, and
    so past the recovery's wait (`bounds.py`: the read-back counts on no request of the
    round being sent after it). The test's own clock (`store.monotonic`, the clock
    `send_by` reads) is moved past the deadline while the request waits, and the bucket
    is woken by the clock coming back (no real hour waited)."""
    bucket = new_bucket(moto_endpoint)
    direct = S3Store(bucket, "c", endpoint_url=moto_endpoint)
    for k in ("a", "k"):
        direct.put(k, b"x")
    now = [100.0]  # the store's send clock (`S3Store.monotonic`)
    checked = threading.Event()
    sent_at: list[float] = []

    def clock() -> float:
        t = now[0]  # read before telling the test, which then moves it on
        checked.set()
        return t

    def faults(c: Call) -> Fault | None:
        if c.kind == "get" and c.attempt == 0:
            return Fault.SLOW_DOWN  # S3's throttling: the client's limiter turns on
        if c.kind == "delete":
            sent_at.append(now[0])
        return None

    with s3_proxy(moto_endpoint, faults=faults) as p:
        store = S3Store(bucket, "c", endpoint_url=p.endpoint, max_attempts=0,
                        key_retry=no_key_retry())
        try:
            with pytest.raises(StoreError, match="SlowDown"):
                store.get("a")  # the executor's store reads through the same client
            limiter = _limiter(store)
            assert limiter._enabled  # botocore's rate limiter is on for this client
            bucket_ = limiter._token_bucket
            own = bucket_._clock
            bucket_._clock = _SteppedClock(own, -3600.0)
            store.monotonic = clock
            out: list[Any] = []
            worker = threading.Thread(target=lambda: out.append(_send_by(store, 110.0)))
            worker.start()
            assert checked.wait(30.0), "the delete never reached its deadline check"
            now[0] = 200.0  # the deadline (110) is past
            bucket_._clock = _SteppedClock(own, +3600.0)  # the bucket's clock caught up
            bucket_.max_rate = bucket_.max_rate  # wakes the waiter (the setter notifies)
            worker.join(30.0)
            assert not worker.is_alive()
        finally:
            store.close()
    assert sent_at == [], (
        f"a DeleteObjects was sent at {sent_at} (the store's clock), past its deadline "
        f"110; outcome {out}; 'k' left the store: {direct.head('k') is None}")


def _send_by(store: S3Store, deadline: float) -> Any:
    with store.send_by(deadline):
        return store.delete_batch(["k"])


def _refused_by_slowdown(store: S3Store, keys: list[str]) -> Any:
    return store.delete_batch(keys)


def _refused_by_the_deadline(store: S3Store, keys: list[str]) -> Any:
    with store.send_by(store.monotonic() - 1.0):  # past already: not even the first is sent
        return store.delete_batch(keys)


@pytest.mark.parametrize("refused", [_refused_by_slowdown, _refused_by_the_deadline],
                         ids=["final-503-slowdown", "deadline-before-the-first-send"])
def test_a_delete_no_attempt_of_which_was_applied_is_not_looked_up(
    moto_endpoint: str, refused: Any
) -> None:
    """Finding 3 (MEDIUM). `attempts.note` marks a 503 SlowDown "refused" (S3's throttling:
    ErrorBestPractices.html, as attempts.py cites) and a `SendDeadlinePassed` raised in
    `before-send` "not sent"; but `_delete_once` asks `_applied_maybe(e) or
    attempts.unsure(...)`, and `_applied_maybe` says yes to any final 5xx (503 included)
    and to every SendDeadlinePassed, whatever the record says. So a batch that was never
    applied (throttled on its only -- or last of only throttled -- attempts; or refused by
    its deadline before its first send) is journaled `RequestFailedMaybeApplied` and each
    of its keys is HEADed (`_resolve`): up to 1,000 HEADs per throttled request, sent to
    the prefix S3 is throttling, and at a stop one HEAD per key of every batch past its
    deadline. A key another writer removed before the batch is then `gone_unattributed`
    (counted in "what left the store while the round ran"), where no request of the batch
    could have removed it (rev38y finding 4's rule for a retried SlowDown)."""
    bucket = new_bucket(moto_endpoint)
    direct = S3Store(bucket, "c", endpoint_url=moto_endpoint)
    # After the SlowDown, botocore's rate limiter paces this client's HEADs (0.5 a second
    # once its one token is spent): one key there keeps the throttled case fast.
    keys = ["k00"] if refused is _refused_by_slowdown else ["k00", "k01"]
    for k in keys:
        direct.put(k, b"x")
    direct.delete_batch(["k00"])  # another writer, before the round's batch

    def faults(c: Call) -> Fault | None:
        return Fault.SLOW_DOWN if c.kind == "delete" else None

    with s3_proxy(moto_endpoint, faults=faults) as p:
        # One attempt (botocore's `max_attempts` counts retries): no limiter wait.
        store = S3Store(bucket, "c", endpoint_url=p.endpoint, max_attempts=0,
                        key_retry=no_key_retry())
        try:
            r = refused(store, keys)
        finally:
            store.close()
        assert p.wait_recorded()
        heads = sum(n for (kind, _), n in p.calls.items() if kind == "head")
    assert all(direct.head(k) is not None for k in keys[1:])  # nothing was deleted
    maybe = sorted(k for k, why in r.errors.items() if "MaybeApplied" in why)
    assert (heads, maybe, sorted(r.gone_unattributed)) == (0, [], []), (
        f"no attempt was applied, yet {heads} HEADs, {len(maybe)} keys 'maybe applied', "
        f"gone unattributed {sorted(r.gone_unattributed)}")


def test_a_delete_whose_connection_was_never_made_is_not_taken_as_maybe_applied() -> None:
    """Finding 4 (MEDIUM). `attempts.may_have_applied` takes every `caught_exception` but
    our own refusals as "may have reached the server", and `_applied_maybe` says yes to
    every botocore ConnectionError. An `EndpointConnectionError` (botocore
    `httpsession.py`: urllib3's NewConnectionError, a refused or unroutable connect) and a
    `ConnectTimeoutError` are raised before a connection exists: no byte of the request
    was sent. Yet the batch is journaled "maybe applied" and each key HEADed; on an
    endpoint that refuses connections each HEAD fails too, after the delete client's
    whole retry ladder (adaptive, 10 attempts: 19.6 s a HEAD measured here against a
    refused port; a 1,000-key batch with 8 resolvers ~40 min), and the keys end `unknown`
    (`deleted` then a lower bound, outcome `incomplete`) although nothing was sent. Here
    the one attempt goes to a port where nothing listens; the HEADs are counted at the
    client (`before-send` of HeadObject: requests it tried to send)."""
    from tests.store.s3server import free_port

    store = S3Store("epochgc-test-refused", "c", endpoint_url=f"http://127.0.0.1:{free_port()}",
                    max_attempts=0, key_retry=no_key_retry())
    heads: list[str] = []
    store.client.meta.events.register("before-send.s3.HeadObject",
                                      lambda **kw: heads.append("head"))
    try:
        r = store.delete_batch(["k0", "k1"])
    finally:
        store.close()
    assert set(r.errors) == {"k0", "k1"}
    maybe = sorted(k for k, why in r.errors.items() if "MaybeApplied" in why)
    assert (len(heads), maybe, sorted(r.unknown)) == (0, [], []), (
        f"nothing was sent (connection refused), yet {len(heads)} HEADs tried, keys "
        f"'maybe applied' {maybe}, unknown {sorted(r.unknown)}: {r.errors}")


def test_a_delete_applied_then_answered_200_slowdown_is_not_taken_as_refused(
    s3_endpoint: str, s3_server_name: str
) -> None:
    """Finding 5 (HIGH: keys the round deleted counted already gone). S3 answers a
    DeleteObjects it throttles with HTTP 200 and an <Error><Code>SlowDown</Code> body
    (awslabs/aws-sdk-rust#873 "XmlDecodeError when DeleteResult gets SlowDown";
    apache/arrow-rs-object-store#733: "AWS S3 can return HTTP 200 with a SlowDown or
    InternalError XML body for DeleteObjects requests"), and keys of such a request may
    have been deleted (aws/aws-sdk-java#2705: the request whose DeleteObjects answer was
    an unparseable 200 "does end up" deleting the object): the 200 status went out before
    the work was done, as S3 documents for CopyObject ("If the error occurs during the copy
    operation, the error response is embedded in the 200 OK response", API_CopyObject.html).
    botocore turns a 200 <Error> into a 500 (`handlers.py` `_handle_200_error`) and
    retries; `attempts.may_have_applied` sees the code SlowDown and marks the attempt
    refused (`_REFUSED_5XX`). The retry, conditional, finds the keys absent (AWS and
    SeaweedFS: NoSuchKey; on moto, which answers Deleted, injected by the proxy) and
    `_delete` counts them `gone`, "already gone before this batch"; the journal and its
    read-back `already_gone`: the round's own deletions, counted neither deleted nor
    gone_unattributed."""
    def absent_on_retry(key: str, attempt: int) -> str | None:
        return "NoSuchKey" if attempt > 0 else None  # AWS's answer: the key is gone

    # SeaweedFS answers NoSuchKey itself to an ETag'd delete of an absent key; moto "Deleted".
    absent = absent_on_retry if s3_server_name == "moto" else None
    with s3_proxy(s3_endpoint, fail=absent) as p, \
            _cut_front(p.endpoint, slowdown_200=True) as front:
        bucket = new_bucket(s3_endpoint)
        # Made first: botocore's rate limiter, on after the SlowDown, lets the retry go at
        # once if its bucket has filled since (1 token a second); else it waits for it.
        store = S3Store(bucket, "c", endpoint_url=front.endpoint(), max_attempts=2,
                        key_retry=no_key_retry())
        store.client.meta.events  # noqa: B018  (the client, and its token bucket, now)
        direct = S3Store(bucket, "c", endpoint_url=s3_endpoint)  # the journal's too
        keys = [f"{D}k0", f"{D}k1"]
        for k in keys:
            direct.put(k, b"x")
        items = [(k, 1, 7200.0, direct.head(k).version)  # type: ignore[union-attr]
                 for k in keys]
        try:
            writer = JournalWriter(direct, JournalTarget(_PREFIX), Attempt(0, 0, 0, 1))
            delete_keys(store, items, batch_size=2, concurrency=1, journal=writer)
        finally:
            store.close()
    assert front.deletes == 2  # the applied one answered 200 SlowDown, and botocore's retry
    assert all(direct.head(k) is None for k in keys)  # the first send deleted both
    totals = read_journal(direct, _PREFIX)
    got = {"deleted": sorted(totals.deleted), "already_gone": sorted(totals.already_gone),
           "gone_unattributed": sorted(totals.gone_unattributed), "errors": totals.errors}
    assert sorted({*totals.deleted, *totals.gone_unattributed}) == keys, (
        f"the batch's first send deleted both keys, yet the read-back says {got}")


def test_a_key_present_right_after_a_lost_answer_is_not_recorded_still_there(
    moto_endpoint: str,
) -> None:
    """Finding 6 (HIGH: a deletion of the round recorded as an error, "listed again next
    round"). The batch's one attempt reaches the server, and the connection is reset
    before any answer (botocore: ConnectionClosedError). `_resolve` asks HEAD at once; the
    server has not yet carried the request out, so the key is there, and the outcome says
    "...; still there (asked the store)": an error, not `unknown`. The journal writes it
    so; its read-back asks the store again only about `unknown` keys (`journal.read_journal`:
    `if key in done.unknown`), so the record keeps the error although the request landed
    a moment later (within seconds, where `bounds.py` allows a server `READ_TIMEOUT_S`, and
    the recovery and the live read-back both wait for that). The read-back itself treats a
    key still there after an unanswered request as `unknown` until its wait is over
    (review rev38v finding 1); the task's HEAD has no such wait."""
    prefix = _PREFIX
    bucket = new_bucket(moto_endpoint)
    direct = S3Store(bucket, "c", endpoint_url=moto_endpoint)  # the journal's store too
    direct.put(f"{D}k", b"x")
    with _cut_front(moto_endpoint, late=True) as front:
        store = S3Store(bucket, "c", endpoint_url=front.endpoint(), max_attempts=0,
                        key_retry=no_key_retry())
        try:
            writer = JournalWriter(direct, JournalTarget(prefix), Attempt(0, 0, 0, 1))
            stats = delete_keys(store, [(f"{D}k", 1, 7200.0, direct.head(f"{D}k")
                                         .version)],  # type: ignore[union-attr]
                                batch_size=1, concurrency=1, journal=writer)
        finally:
            store.close()
        assert front.applied.wait(30.0), "the held delete never reached the server"
    assert direct.head(f"{D}k") is None  # the round's own request deleted it
    totals = read_journal(direct, prefix)
    got = {"deleted": sorted(totals.deleted), "errors": totals.errors,
           "unknown": sorted(totals.unknown),
           "gone_unattributed": sorted(totals.gone_unattributed), "task": stats}
    assert f"{D}k" in {*totals.deleted, *totals.gone_unattributed, *totals.unknown}, (
        f"{D}k left the store by the round's own request, yet the read-back says {got}")
