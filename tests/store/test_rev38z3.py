"""Review rev38z3: the deletion path's records after the fixes to reviews rev38z and rev38z2
(branches s25b and s25e, on main 335076a): `impl/store/deleteanswer.py` (2xx bodies),
`attempts.py` (the per-attempt "maybe applied"), `ratelimit.py`, `s3.py`.

Each finding is a strict xfail: it fails on the code as merged and passes once fixed. They
run against moto in server mode on loopback, through a small front of this file's own
(`_Front`): it forwards every request whole, and answers a DeleteObjects as the test says
(after forwarding it, so the server carried it out, or without)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import pytest

from epochgc.impl.gc.delete import delete_keys
from epochgc.impl.gc.journal import Attempt, JournalTarget, JournalWriter, read_journal
from epochgc.impl.store.base import Outcome
from epochgc.impl.store.s3 import S3Store
from tests.store.forward import (
    FrontHandler,
    FrontServer,
    forward,
    no_key_retry,
    serving,
)
from tests.store.s3proxy import Call, Fault, s3_proxy
from tests.store.s3server import new_bucket

D = "level_zero/data/001/000000000000000005/"  # journaled keys are data keys (R20)

pytestmark = pytest.mark.s3

_PREFIX = "_cluster/gc/journal/20270301T100000.000Z-rev38z300/"  # a round's journal
_NS = b'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'


@dataclass(frozen=True)
class _Answer:
    """What the front answers a DeleteObjects with. `forward`: send it to the server first
    (it is carried out there); `length`: the Content-Length header's value (None: none,
    the body is delimited by closing the connection, RFC 9112 6.3 item 8)."""

    status: int
    body: bytes
    forward: bool = True
    length: str | None = None


class _Front(FrontHandler):
    server: _FrontServer

    def answer_delete(self, body: bytes) -> None:
        answer = self.server.answer
        if answer.forward:
            forward(*self.server.upstream, self.command, self.path, self.headers, body)
        self.send_response(answer.status)
        self.send_header("Content-Type", "application/xml")
        if answer.length is not None:
            self.send_header("Content-Length", answer.length)
        # Closed after the answer: a body without a length the client can use ends there
        self.send_header("Connection", "close")
        self.close_connection = True
        self.end_headers()
        self.wfile.write(answer.body)


class _FrontServer(FrontServer):
    def __init__(self, upstream: str, answer: _Answer) -> None:
        self.answer = answer
        super().__init__(upstream, _Front)


def _front(upstream: str, answer: _Answer) -> contextlib.AbstractContextManager[_FrontServer]:
    return serving(_FrontServer(upstream, answer))


def _round(endpoint: str, answer: _Answer, keys: list[str]
           ) -> tuple[S3Store, _FrontServer, Any]:
    """One task's delete of `keys` (one batch, one attempt, the conditional delete the GC
    sends) through a front answering DeleteObjects with `answer`, journaled in the bucket;
    the direct store, the front and the journal's read-back."""
    bucket = new_bucket(endpoint)
    direct = S3Store(bucket, "c", endpoint_url=endpoint)
    for k in keys:
        direct.put(k, b"x")
    items = [(k, 1, 7200.0, direct.head(k).version) for k in keys]  # type: ignore[union-attr]
    with _front(endpoint, answer) as front:
        store = S3Store(bucket, "c", endpoint_url=front.endpoint(), max_attempts=0,
                        key_retry=no_key_retry())
        try:
            writer = JournalWriter(direct, JournalTarget(_PREFIX), Attempt(0, 0, 0, 1))
            delete_keys(store, items, batch_size=len(keys), concurrency=1, journal=writer)
        finally:
            store.close()
    return direct, front, read_journal(direct, _PREFIX)


_WHOLE_EMPTY = b'<?xml version="1.0" encoding="UTF-8"?>\n<DeleteResult ' + _NS + b"/>"


@pytest.mark.parametrize("status", [202, 203, 206])
def test_a_2xx_other_than_200_with_a_delete_result_counts_no_key_deleted(
    moto_endpoint: str, status: int
) -> None:
    """Finding 1 (HIGH by consequence: keys in the store counted deleted; reach: an
    intermediary or a non-S3 server, as rev38z2 finding 1). s25e's fix of rev38z2 finding
    1 turns a success status below 301 into a 500 only when its body is not a whole
    DeleteResult (`deleteanswer.check`). A 202 "accepted for processing, but the processing
    has not been completed. The request might or might not eventually be acted upon" (RFC
    9110 15.3.3), whatever its body; a 203 is a transforming proxy's rewrite of the
    origin's answer (15.3.4: "the enclosed content has been modified"); a 206 is a part of
    a representation (15.3.7). S3 answers DeleteObjects only with 200 (API_DeleteObjects:
    "HTTP/1.1 200"). Here the front answers a Quiet-mode `<DeleteResult/>` (no Errors)
    with each status and forwards nothing: both keys stay in the store, and the journal's
    read-back counts them deleted."""
    keys = [f"{D}k0", f"{D}k1"]
    answer = _Answer(status, _WHOLE_EMPTY, forward=False, length=str(len(_WHOLE_EMPTY)))
    direct, front, totals = _round(moto_endpoint, answer, keys)
    assert front.deletes == 1
    assert all(direct.head(k) is not None for k in keys)  # nothing was forwarded
    deleted = sorted(totals.deleted)
    assert not deleted, (
        f"both keys are in the store (the {status} came from the front; nothing was "
        f"forwarded), yet the read-back counts deleted {deleted}")
    assert set(keys) <= set(totals.errors) | set(totals.unknown)  # journaled, not deleted


_CUT = (b'<?xml version="1.0" encoding="UTF-8"?>\n<DeleteResult ' + _NS
        + b"><Error><Key>c/data/k0</Key><Code>Internal")


@pytest.mark.parametrize("answer", [
    # A 200 whose Content-Length is no number Python's int() reads: `deleteanswer.check`
    # itself raises ValueError (`str.isdigit` is true of U+00B2, `int` refuses it).
    _Answer(200, _WHOLE_EMPTY, length="\u00b2"),
    # A 200 whose XML declaration names an encoding Python has no codec for: botocore
    # parses it (its parsers force UTF-8), `deleteanswer._root`'s XMLPullParser raises
    # LookupError, which is no ParseError, out of `deleteanswer.check`.
    _Answer(200, b'<?xml version="1.0" encoding="x-unknown"?>\n<DeleteResult ' + _NS
            + b"/>"),
    # A 202 whose body, close-delimited, is a DeleteResult cut short: botocore's parser
    # raises ResponseParserError (`_handle_200_error` looks only at a 200).
    _Answer(202, _CUT),
], ids=["200-content-length-superscript-two", "200-unknown-xml-encoding",
        "202-cut-delete-result"])
def test_an_answer_that_fails_after_it_came_is_not_taken_as_not_applied(
    moto_endpoint: str, answer: _Answer
) -> None:
    """Finding 2 (HIGH by consequence: the round's deletions journaled as errors, "listed
    again next round", never looked up). botocore emits `needs-retry` (where
    `attempts.note` records an attempt) only for what `_do_get_response` returns; that
    function catches exceptions only around `before-send` and the send (botocore 1.44.8
    `endpoint.py` lines 264-288). The `before-parse` handlers (`deleteanswer.check` among
    them) and `parser.parse` run after that `try`, so an exception there leaves
    `_send_request` at once: the attempt, answered with a success status and carried out
    by the server, is in no record. `_delete_once` then sees `attempts.seen() == 0` and asks
    `_applied_maybe`, which says no to anything but a botocore ConnectionError,
    HTTPClientError or 5xx: code `RequestFailed`, no HEAD, no `unknown`. Here the front
    forwards the DeleteObjects (moto deletes both keys) and answers as given; the journal's
    read-back counts both keys as errors while neither is in the store."""
    keys = [f"{D}k0", f"{D}k1"]
    direct, front, totals = _round(moto_endpoint, answer, keys)
    assert front.deletes == 1
    assert all(direct.head(k) is None for k in keys)  # the forwarded request deleted both
    errors = dict(totals.errors)
    assert not errors, (
        f"the request was carried out (both keys left the store) and answered "
        f"{answer.status}, yet the read-back says errors {errors} "
        f"(HEADs the task sent: {front.heads})")
    assert set(keys) <= set(totals.gone_unattributed) | set(totals.unknown)


class _AfterTheAnswer(Exception):
    """What the added handler raises after the answer came."""


@pytest.mark.parametrize("max_attempts", [0, None], ids=["no-retries", "default-retries"])
def test_an_attempt_whose_answer_could_not_be_read_is_unsure(
    moto_endpoint: str, max_attempts: int | None
) -> None:
    """Finding 2, the sturdier half: whatever raises after the answer came (here a
    `before-parse` handler added to the client, in place of any failure botocore's parser
    or a handler of ours may yet have), the attempt is in the record as started and never
    ended (`attempts.starting`), so the call is unsure: the keys, deleted by moto, are
    looked up and found gone, not journaled as plain errors. Without the mark, the call
    looked like one no attempt of which was sent (`attempts.seen() == 0`)."""
    bucket = new_bucket(moto_endpoint)
    store = S3Store(bucket, "c", endpoint_url=moto_endpoint, max_attempts=max_attempts,
                    key_retry=no_key_retry())
    keys = [f"{D}k0", f"{D}k1"]
    try:
        for k in keys:
            store.put(k, b"x")

        def unreadable(**_kwargs: Any) -> None:
            raise _AfterTheAnswer("a failure after the answer came")

        store.client.meta.events.register("before-parse.s3.DeleteObjects", unreadable)
        result = store.delete_batch(keys)
    finally:
        store.close()
    assert all(S3Store(bucket, "c", endpoint_url=moto_endpoint).head(k) is None
               for k in keys)  # moto carried the request out
    assert not result.errors, f"keys the request deleted reported as errors: {result.errors}"
    assert result.gone_unattributed == set(keys), result


def test_a_reset_whose_delete_was_applied_then_answered_500_says_it_removed_the_lease(
    moto_endpoint: str
) -> None:
    """Finding 3 (LOW: an operator's command misreports what it did; no GC record, no
    wrong deletion). `S3Store.delete_if_match` (DeleteObject `If-Match`, used by `gc-admin
    reset` for the lease and by the probe's clean-up) has no per-attempt record: a request
    applied and answered 500 InternalError ("might not have processed", so may have:
    ErrorBestPractices) is retried by botocore, and the retry's 404 NoSuchKey (AWS and
    moto for a conditional delete of an absent key; SeaweedFS's 412 leads to a HEAD that
    finds none) is returned as `Outcome.ABSENT`: "was not there". `reset_gc_state` then
    returns `[]` (nothing removed) while it was its own request that removed the lease.
    The DeleteObjects path gets this right since rev38x finding 1 (`gone_unattributed`);
    this one does not look at its attempts."""
    import json
    import time

    from epochgc.impl.gc.admin import reset_gc_state
    from epochgc.impl.gc.lease import LEASE_KEY

    bucket = new_bucket(moto_endpoint)
    direct = S3Store(bucket, "c", endpoint_url=moto_endpoint)
    direct.put(LEASE_KEY, json.dumps({"round": "r", "token": "t", "renewed_at": 1.0,
                                      "expires_at": 2.0}).encode())  # expired long ago

    def faults(c: Call) -> Fault | None:
        return Fault.APPLIED_THEN_500 if c.method == "DELETE" and c.attempt == 0 else None

    with s3_proxy(moto_endpoint, faults=faults, quiet=True) as proxy:
        store = S3Store(bucket, "c", endpoint_url=proxy.endpoint)
        try:
            removed = reset_gc_state(store, time.time(), force=True)
        finally:
            store.close()
    assert direct.head(LEASE_KEY) is None  # the first, applied request removed it
    assert removed == [LEASE_KEY], (
        f"reset's own request removed the lease (applied, answered 500, retried into a "
        f"404), yet it reports removed {removed}")


@pytest.mark.parametrize("first, expect", [
    (Fault.APPLIED_THEN_500, Outcome.GONE),  # the first attempt removed it
    # Refused, not applied: another writer removed it. Since review rev38z9 finding 3
    # `GONE` too ("removed by this request or another"): an intermediary's earlier copy,
    # which botocore does not see, may as well have removed it (it was `ABSENT`).
    (Fault.SLOW_DOWN, Outcome.GONE),
], ids=["applied-then-500", "slow-down"])
def test_a_conditional_delete_retried_into_not_there_says_gone_only_after_an_unsure_attempt(
    s3_endpoint: str, first: Fault, expect: Outcome
) -> None:
    """Finding 3 at the store, on moto (the retry's 404 NoSuchKey) and SeaweedFS (its 412,
    then a HEAD that finds nothing): "not there" after an attempt that may have been
    applied is `GONE` (removed, by that attempt or another); after one refused (503
    SlowDown: `attempts._REFUSED_503`) it was `ABSENT` until review rev38z9 finding 3 (no
    answer tells "was not there" from an intermediary's earlier copy's removal). The
    probe's clean-up (`_remove_left_probes`) counts `GONE` as removed, as `gc-admin reset`
    does."""
    bucket = new_bucket(s3_endpoint)
    direct = S3Store(bucket, "c", endpoint_url=s3_endpoint)
    version = direct.create_if_absent("k", b"x")
    assert version is not None
    if first is Fault.SLOW_DOWN:
        assert not direct.delete_batch(["k"]).errors  # removed before the request

    def faults(c: Call) -> Fault | None:
        return first if c.method == "DELETE" and c.attempt == 0 else None

    with s3_proxy(s3_endpoint, faults=faults, quiet=True) as proxy:
        store = S3Store(bucket, "c", endpoint_url=proxy.endpoint)
        try:
            got = store.delete_if_match("k", version)
        finally:
            store.close()
    assert direct.head("k") is None
    assert got is expect


def test_a_probe_clean_up_whose_delete_was_applied_then_answered_500_says_it_removed_it(
    moto_endpoint: str
) -> None:
    """Finding 3's other caller: the probe's clean-up of an earlier probe's object
    (`_remove_left_probes`, a conditional DeleteObject) applied, answered 500 and retried
    into a 404, said nothing of the object it removed."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from epochgc.impl.store.s3 import PROBE_KEY

    bucket = new_bucket(moto_endpoint)
    direct = S3Store(bucket, "p", endpoint_url=moto_endpoint)
    # An object of a probe whose process has ended (`probes.left_over`)
    dead = subprocess.run([sys.executable, "-c", "from epochgc.impl.gc.probes import "
                           "probe_body; print(probe_body().decode())"],
                          capture_output=True, text=True, check=True,
                          env=dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2])))
    left = f"{PROBE_KEY}-dead"
    direct.put(left, dead.stdout.encode())

    def faults(c: Call) -> Fault | None:
        applied = c.method == "DELETE" and c.key.endswith(left) and c.attempt == 0
        return Fault.APPLIED_THEN_500 if applied else None

    lines: list[str] = []
    with s3_proxy(moto_endpoint, faults=faults, quiet=True) as proxy:
        store = S3Store(bucket, "p", endpoint_url=proxy.endpoint, on_wait=lines.append)
        try:
            store.require_conditional_writes()
        finally:
            store.close()
    assert direct.head(left) is None
    assert any(ln.startswith("removed 1 conditional-write probe object(s) an earlier probe "
                             f"left: '{left}'") for ln in lines), lines
