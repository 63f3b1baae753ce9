"""Review rev38z8: the deletion path as merged on main edfb92a (issue 38), against its
contract: every GC record true under kills, damaged journals and S3's ambiguous answers.

Each finding was a strict xfail, seen failing on the code as merged; they pass since
their fix. The S3 cases run
against moto in server mode on loopback, through a front (`tests/store/forward.py`)."""

from __future__ import annotations

import pytest

from tests.store.forward import (
    FrontHandler,
    FrontServer,
    HoldingServer,
    error_body,
    forward,
    serving,
)
from tests.store.test_rev38z5 import (
    _journaled_delete,
    _one_key,
    _per_key_errors,
    _read_back,
    deleted_through_is_recorded_true,
)

D = "level_zero/data/001/000000000000000005/"  # journaled keys are data keys (R20)


class _WholeServer(FrontServer):
    """An intermediary that sent the first DeleteObjects on to the server (forwarded to
    moto: carried out), lost that answer, sent the request again on its own, and relays
    the second copy's answer: an S3 error for the whole request (`status`, `code`)."""

    def __init__(self, upstream: str, status: int, code: str, message: str) -> None:
        self.status, self.code, self.message = status, code, message
        self.forwarded = 0
        super().__init__(upstream, _Whole)


class _Whole(FrontHandler):
    server: _WholeServer

    def answer_delete(self, body: bytes) -> None:
        with self.server.lock:
            first = self.server.forwarded == 0
            self.server.forwarded += first
        if first:
            forward(*self.server.upstream, self.command, self.path, self.headers, body)
        self.send_xml(self.server.status,
                      error_body(self.server.code, self.server.message, "r38z8"))


def whole_refusal_is_recorded_true(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch,
                                   status: int, code: str, message: str) -> None:
    """One key deleted through `_WholeServer` (its first copy carried out, the retried
    copy's whole-request error `status` `code` relayed): the key is gone and its record
    does not say "listed again next round" (finding 1 here, rev38z9 finding 1)."""
    deleted_through_is_recorded_true(
        moto_endpoint, monkeypatch, _WholeServer(moto_endpoint, status, code, message),
        f"its retried copy answered {status} {code} whole")


@pytest.mark.s3
@pytest.mark.parametrize(("status", "code", "message"), [
    # S3's list of error codes (API_Error.html): AccessDenied "Access Denied" (403);
    # ExpiredToken "The provided token has expired." (400).
    pytest.param(403, "AccessDenied", "Access Denied", id="403-AccessDenied"),
    pytest.param(400, "ExpiredToken", "The provided token has expired.", id="400-ExpiredToken"),
])
def test_a_whole_request_refusal_after_an_intermediarys_retry_is_not_recorded_not_deleted(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, status: int, code: str,
    message: str
) -> None:
    """Finding 1. 7886fd3 (rev38z7 finding 1) made a PER-KEY refusal (`_KEY_REFUSALS`)
    asked at the read-back: an intermediary that sends a DeleteObjects again on its own
    (nginx `proxy_next_upstream ... non_idempotent`, whose `http_403` also passes a 403 on:
    http://nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_next_upstream; an
    Envoy `retry_policy`) may have carried the first copy out. The same second copy may be
    refused as a WHOLE request: S3 answers an error response with a status and an <Error>
    body (ErrorResponses.html) when it refuses the request before any key (AccessDenied
    403 for a credential that expired between the copies, ExpiredToken 400). That answer
    says nothing of the first copy either. `S3Store._delete_once` makes every key
    `RequestFailed` (not `_REQUEST_MAYBE`: botocore saw one attempt, answered), not in
    `_KEY_REFUSALS`, so the key is an error, no HEAD, "listed again next round", while it
    left the store by the round's own request: a deletion in no record."""
    whole_refusal_is_recorded_true(moto_endpoint, monkeypatch, status, code, message)


class _LateServer(HoldingServer):
    """An intermediary whose first upstream took the DeleteObjects and did not answer in
    time (nginx `proxy_next_upstream timeout non_idempotent`): it sent the request again
    to another upstream, which refused the key (per-key AccessDenied), and relayed that.
    The first upstream still has the request and carries it out later (`held`, applied by
    the test), as a server may up to `stage.SENT_APPLIED_S` after (the project's own model,
    `bounds.py` item 3)."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream, _Late)


class _Late(FrontHandler):
    server: _LateServer

    def answer_delete(self, body: bytes) -> None:
        with self.server.lock:
            self.server.held.append((self.command, self.path, self.headers, body))
        self.send_xml(200, _per_key_errors(body, "AccessDenied", "Access Denied"))


@pytest.mark.s3
def test_a_per_key_refusal_hiding_an_earlier_copy_in_flight_is_waited_for(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 2 (on 7886fd3's fix of rev38z7 finding 1). The fix asks a per-key refusal's
    key at the read-back, but marks it `answered` ("every request of them was answered"),
    so the read-back asks at once, with no wait. The copy the refusal may hide is the one
    the intermediary got no answer to: with nginx's `timeout` (or `error`) condition the
    first upstream was given the request and did not answer within the proxy's timeout,
    so it may still be carrying it out (S3: a request that got no answer may have been
    processed, ErrorBestPractices.html; the project waits `SENT_APPLIED_S` for such a
    request, `bounds.py`). Here that copy is applied once the live driver's read-back
    wait has reached 30 s, or else just after the read-back: with no wait, the HEAD finds
    the key, the record says an error, and the key is then deleted by the round's own
    request: a deletion in no record."""
    direct, items = _one_key(moto_endpoint)
    with serving(_LateServer(moto_endpoint)) as front:
        writer = _journaled_delete(front.endpoint(), direct, items)
        assert len(front.held) == 1 and direct.head(f"{D}k") is not None
        waited: list[float] = []

        def sleep(seconds: float) -> None:
            waited.append(seconds)
            if sum(waited) >= 30.0:
                front.apply()

        totals, _ = _read_back(direct, writer, monkeypatch, sleep)
        front.apply()  # the first upstream carries the copy out after the read-back
    assert direct.head(f"{D}k") is None  # the round's own request deleted it
    assert f"{D}k" not in totals.errors, (
        f"the key left the store by the round's own request (the intermediary's first "
        f"copy, applied after the read-back's HEAD), yet the record says "
        f"{totals.errors[D + 'k']!r}: 'listed again next round' (waited {waited})")
