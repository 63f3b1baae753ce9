"""Review rev38z9: the deletion path as merged on main 10142fb (issue 38), judged as a whole
against the model "an intermediary (a proxy, an SDK, a load balancer) may send any
DeleteObjects / DeleteObject more than once, and the client sees one answer, which may be
any copy's".

Each finding is a strict xfail, seen failing on 10142fb. The S3 cases run against moto in
server mode on loopback, through a front (`tests/store/forward.py`)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from epochgc.impl.gc import journal, stage
from epochgc.impl.store import attempts, s3
from tests.store.forward import (
    FrontHandler,
    FrontServer,
    HoldingServer,
    error_body,
    forward,
    relay_head,
    serving,
)
from tests.store.test_rev38z5 import _journaled_delete, _one_key, _per_key_errors, _read_back
from tests.store.test_rev38z8 import whole_refusal_is_recorded_true

D = "level_zero/data/001/000000000000000005/"  # journaled keys are data keys (R20)


@pytest.mark.s3
@pytest.mark.parametrize(("status", "code", "message"), [
    # S3's list of error codes (API reference, ErrorResponses.html#ErrorCodeList):
    # RequestTimeTooSkewed "The difference between the request time and the server's time
    # is too large." (403): a copy sent again later carries the first copy's signed
    # x-amz-date (SigV4: a request is refused past 15 minutes' difference), or went to a
    # server whose clock differs.
    pytest.param(403, "RequestTimeTooSkewed",
                 "The difference between the request time and the current time is too "
                 "large.", id="403-RequestTimeTooSkewed"),
    # IncompleteBody "You did not provide the number of bytes specified by the
    # Content-Length HTTP header." (400): a copy whose body the intermediary sent again cut.
    pytest.param(400, "IncompleteBody",
                 "You did not provide the number of bytes specified by the Content-Length "
                 "HTTP header", id="400-IncompleteBody"),
    # BadDigest "The Content-MD5 or checksum value that you specified did not match what
    # the server received." (400): DeleteObjects requires Content-MD5 or a checksum.
    pytest.param(400, "BadDigest",
                 "The Content-MD5 you specified did not match what we received.",
                 id="400-BadDigest"),
])
def test_any_whole_request_answer_after_an_intermediarys_retry_is_not_recorded_not_deleted(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, status: int, code: str,
    message: str
) -> None:
    """Finding 1. baee96b (rev38z8 finding 1) made a whole-request refusal a possible cover
    of an earlier copy only for the codes of `_KEY_REFUSALS` (`S3Store._delete_once`: `if
    answered in _KEY_REFUSALS: code = answered`, else `RequestFailed`). Under the model the
    project accepted (an intermediary sends the request again on its own and relays the
    last copy's answer), ANY answered whole-request error may be the second copy's, while
    the first deleted the key: which code the second copy got says nothing of the first.
    `keycodes` itself says "a code no one listed must not decide a record", yet on the
    whole-request path every 4xx code not listed (S3's list has ~150) decides "not
    deleted, listed again next round", with no HEAD and no wait: a deletion in no record."""
    whole_refusal_is_recorded_true(moto_endpoint, monkeypatch, status, code, message)


class _Clock:
    """The monotonic clock of the modules that time a delete's answers and the journal's
    `unanswered_ago_s` (s3, attempts, journal), as `time` there: the real one plus `ahead`,
    which a front moves on to stand for an answer that took that long (no real wait)."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.ahead

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


class _RetriedServer(HoldingServer):
    """Request 1: every key answered per-key InternalError (S3: "might not have processed",
    ErrorBestPractices.html: unsure), not forwarded. Request 2 (the client's key retry): the
    intermediary's first upstream takes it and does not answer (held: the test applies it
    later, as that server may up to `stage.SENT_APPLIED_S` after), the second refuses each
    key (per-key AccessDenied), relayed after `latency_s` (on `clock`)."""

    def __init__(self, upstream: str, clock: _Clock, latency_s: float) -> None:
        self.clock, self.latency_s = clock, latency_s
        self.refused_at: float | None = None  # when the refusal was sent (on `clock`)
        super().__init__(upstream, _Retried)


class _Retried(FrontHandler):
    server: _RetriedServer

    def answer_delete(self, body: bytes) -> None:
        with self.server.lock:
            first = self.server.deletes == 1
            if not first:
                self.server.held.append((self.command, self.path, self.headers, body))
                self.server.clock.ahead += self.server.latency_s
                self.server.refused_at = self.server.clock.monotonic()
        data = (_per_key_errors(body, "InternalError", "We encountered an internal error.")
                if first else _per_key_errors(body, "AccessDenied", "Access Denied"))
        self.send_xml(200, data)


@pytest.mark.s3
def test_a_refusal_after_an_unsure_attempt_is_waited_for_from_the_refusal(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 2. baee96b (rev38z8 finding 2) waits `SENT_APPLIED_S` from a refusal before
    the read-back asks its key, because the refusal may be the answer to an intermediary's
    second copy while its first is still at a server. But `_delete` takes that wait only
    for `hidden = (refused_at & errors) - unsure`: a key an EARLIER attempt made unsure
    (a per-key InternalError, a whole 500, a botocore retry) waits instead from
    `in_flight`, that earlier attempt's end. The refusal (the key retry's answer) comes
    later, by the retry's backoff plus its own latency (up to `READ_TIMEOUT_S`, 60 s), so
    the copy it hides may land up to that much after the read-back's HEAD: the key is
    recorded "still there, listed again next round" and then deleted by the round's own
    request. Here request 2's answer takes 30 s (on the modules' clock, not slept): the
    read-back's wait, measured from request 1's end, ends ~30 s before the hidden copy's
    bound (refusal + `SENT_APPLIED_S`); the copy is applied during the wait if the wait
    reaches that bound, else after the read-back."""
    clock = _Clock()
    for module in (s3, attempts, journal):
        monkeypatch.setattr(module, "time", clock)
    direct, items = _one_key(moto_endpoint)
    with serving(_RetriedServer(moto_endpoint, clock, 30.0)) as front:
        writer = _journaled_delete(front.endpoint(), direct, items)
        assert front.deletes == 2 and len(front.held) == 1, (front.deletes, front.held)
        assert direct.head(f"{D}k") is not None and front.refused_at is not None
        short: list[float] = []

        def sleep(seconds: float) -> None:
            bound = front.refused_at + stage.SENT_APPLIED_S - clock.monotonic()  # type: ignore[operator]
            if seconds >= bound:
                front.apply()  # lands within the wait: the HEAD after it sees it gone
            else:
                short.append(bound - seconds)

        totals, _ = _read_back(direct, writer, monkeypatch, sleep)
        front.apply()  # else the first upstream carries it out after the read-back
    assert direct.head(f"{D}k") is None  # the round's own request deleted it
    assert f"{D}k" not in totals.errors, (
        f"the key left the store by the round's own request (the copy request 2's refusal "
        f"hid, applied within SENT_APPLIED_S of that refusal), yet the record says "
        f"{totals.errors[D + 'k']!r}: the read-back's wait fell short of the copy's bound "
        f"by {short} s")


class _ResentDeleteServer(FrontServer):
    """An intermediary in front of a single DeleteObject: it sent the request on (forwarded
    to moto: carried out, the object removed), lost that answer, sent it again on its own,
    and relays the second copy's answer: `status` with S3's error body `code`."""

    def __init__(self, upstream: str, status: int, code: str) -> None:
        self.status, self.code = status, code
        self.forwarded = 0
        super().__init__(upstream, _ResentDelete)


class _ResentDelete(FrontHandler):
    server: _ResentDeleteServer

    def do_DELETE(self) -> None:
        forward(*self.server.upstream, self.command, self.path, self.headers,
                self.read_body())
        with self.server.lock:
            self.server.forwarded += 1
        self.send_xml(self.server.status, error_body(self.server.code, "m", "r38z9"))


@pytest.mark.s3
@pytest.mark.parametrize(("status", "code"), [
    # S3 User Guide, conditional-deletes.html: If-Match on a key with no object: 404
    # NoSuchKey; API_DeleteObject.html: 409 ConditionalRequestConflict when a conflicting
    # operation (here the first copy) is in progress on the same key.
    pytest.param(404, "NoSuchKey", id="404-NoSuchKey"),
    pytest.param(409, "ConditionalRequestConflict", id="409-ConditionalRequestConflict"),
])
def test_a_reset_whose_own_request_removed_the_lease_says_so(
    moto_endpoint: str, status: int, code: str
) -> None:
    """Finding 3 (LOW, as rev38z3 finding 3 was). rev38z3 finding 3 made `delete_if_match`
    answer GONE, not ABSENT, when a botocore retry may have been the cause; an
    intermediary's re-send is invisible to botocore (one attempt, answered), so the first
    copy's removal is reported as "nothing to remove" (404) or refused "run the command
    again" (409), and `_unjournaled` then never names the round whose lease it was."""
    from epochgc.impl.gc.admin import ResetRefused, reset_lease
    from epochgc.impl.gc.lease import LEASE_KEY
    from epochgc.impl.store.s3 import S3Store
    from tests.store.s3server import new_bucket

    direct = S3Store(new_bucket(moto_endpoint), "c", endpoint_url=moto_endpoint)
    direct.put(LEASE_KEY, b'{"round": "20270301T100000.000Z-rev38z9", "token": "t", '
                          b'"renewed_at": 1.0, "expires_at": 2.0}')
    with serving(_ResentDeleteServer(moto_endpoint, status, code)) as front:
        store = S3Store(direct.bucket, "c", endpoint_url=front.endpoint(), max_attempts=0)
        try:
            said: object
            try:
                said = reset_lease(store, time.time(), force=True).removed
            except ResetRefused as e:
                said = f"refused: {e}"
        finally:
            store.close()
        assert front.forwarded == 1
    assert direct.head(LEASE_KEY) is None  # the reset's own request removed it
    assert said == [LEASE_KEY], f"the reset removed the lease, yet it says {said!r}"


class _NoETagServer(FrontServer):
    """Forwards everything; a PutObject of `key` answered 200 is relayed without its ETag
    header (a proxy or gateway that drops it)."""

    def __init__(self, upstream: str, key: str) -> None:
        self.key = key
        super().__init__(upstream, _NoETag)


class _NoETag(FrontHandler):
    server: _NoETagServer

    def do_PUT(self) -> None:
        resp, data = forward(*self.server.upstream, self.command, self.path, self.headers,
                             self.read_body())
        drop = resp.status == 200 and self.path.partition("?")[0].endswith(self.server.key)
        relay_head(self, resp, data, frozenset({"etag"} if drop else ()))
        self.wfile.write(data)


@pytest.mark.s3
def test_a_lease_created_but_answered_without_an_etag_is_known_as_ours(
    moto_endpoint: str
) -> None:
    """Finding 4 (LOW: a false statement and 600 s without rounds, no deletion). S3's
    PutObject answers the new object's `ETag` header (API_PutObject.html, Response
    Syntax); `S3Store._etag` raises when it is missing, after the write was applied.
    `Lease.acquire` then fails the round ("cannot take the GC lease") and leaves its own
    lease in the store, live for its whole duration: every round until then is refused
    naming a holder that is not running. The 412 path already reads the lease back and
    knows its own token (`Lease._ours`); a 2xx without an ETag is the same question."""
    from epochgc.impl.gc.errors import GcError
    from epochgc.impl.gc.lease import LEASE_KEY, Lease
    from epochgc.impl.store.s3 import S3Store
    from tests.store.s3server import new_bucket

    direct = S3Store(new_bucket(moto_endpoint), "c", endpoint_url=moto_endpoint)
    with serving(_NoETagServer(moto_endpoint, LEASE_KEY)) as front:
        lease = Lease(lambda: S3Store(direct.bucket, "c", endpoint_url=front.endpoint(),
                                      max_attempts=0), "20270301T100000.000Z-rev38z9")
        failed = ""
        try:
            lease.acquire()
        except GcError as e:
            failed = str(e)
    got = direct.get_versioned(LEASE_KEY, 4096)
    assert got is not None and lease.token.encode() in got.data  # the round's own lease
    assert not failed, f"the store holds this round's lease, yet acquire said {failed!r}"
