"""Review rev38z4: the deletion path's records after tasks s26a (the read-back's wait only
for keys a request of which got no answer, measured from when that attempt ended; the
send deadline checked again at each connect) and s26c (`deleteanswer`, attempts marked at
`before-send`, `Outcome.GONE`), on main 8ea9c91.

Each finding is a strict xfail: it fails on the code as merged and passes once fixed. They
run against moto in server mode on loopback, through a front of this file's own
(`tests/store/forward.py`'s `FrontHandler`), or on a local store where no server is
needed."""

from __future__ import annotations

import functools
import re
import threading
import time
from pathlib import Path

import pytest

from epochgc.impl.gc import stage
from epochgc.impl.gc.delete import delete_keys
from epochgc.impl.gc.journal import Attempt, JournalTarget, JournalWriter, read_journal
from epochgc.impl.gc.stop import RoundStop
from epochgc.impl.store.base import DeleteResult, Outcome, StoreError
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.s3 import S3Store
from tests.gc.helpers import JOURNAL, put_local
from tests.store.forward import FrontHandler, FrontServer, forward, no_key_retry, serving
from tests.store.s3server import new_bucket

D = "level_zero/data/001/000000000000000005/"  # journaled keys are data keys (R20)

_PREFIX = "_cluster/gc/journal/20270301T100000.000Z-rev38z400/"  # a round's journal
_NS = 'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'
_ATTEMPT = Attempt(0, 0, 0, 1)


def _per_key_errors(body: bytes, code: str) -> bytes:
    """A whole 200 DeleteResult answering each key of the DeleteObjects `body` with `code`."""
    keys = re.findall(rb"<Key>([^<]*)</Key>", body)
    errors = "".join(f"<Error><Key>{k.decode()}</Key><Code>{code}</Code>"
                     f"<Message>We encountered an internal error. Please try again."
                     f"</Message></Error>" for k in keys)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<DeleteResult {_NS}>{errors}'
            f"</DeleteResult>").encode()


class _LateServer(FrontServer):
    """A gateway whose call to its backend timed out: it answers each DeleteObjects with a
    per-key InternalError in a whole DeleteResult, while the first one is still carried
    out by the backend, later: forwarded once the task's HEAD of the key was answered."""

    def __init__(self, upstream: str) -> None:
        self.headed = threading.Event()  # a HEAD was answered
        self.applied = threading.Event()  # the held DeleteObjects reached the server
        self.held = 0
        super().__init__(upstream, _Late)


class _Late(FrontHandler):
    server: _LateServer

    def answer_delete(self, body: bytes) -> None:
        with self.server.lock:
            first = self.server.held == 0
            self.server.held += 1
        if first:
            headers, path, command = self.headers, self.path, self.command

            def later() -> None:
                if self.server.headed.wait(30.0):
                    forward(*self.server.upstream, command, path, headers, body)
                    self.server.applied.set()

            threading.Thread(target=later, daemon=True).start()
        data = _per_key_errors(body, "InternalError")
        self.send_xml(200, data)

    def do_HEAD(self) -> None:
        self._go()
        self.server.headed.set()


@pytest.mark.s3
def test_a_per_key_internal_error_from_a_gateway_still_at_work_is_not_recorded_not_deleted(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 1. S3 says of InternalError only that the request "might not have processed"
    (ErrorBestPractices.html), the very words s26a relies on to keep the wait for a
    whole-request 500: they say nothing of when the work ends for a key answered
    InternalError inside a DeleteResult either. A gateway in front of a store (SeaweedFS's
    S3 gateway and its filer, MinIO in front of a backend) answers a key InternalError when
    its own call to the backend timed out, while the backend goes on. Here the front answers
    both DeleteObjects attempts so and the first reaches moto only after the task's HEAD
    found the key there. The task journals the key a plain error ("still there after its
    request was answered"), the read-back asks for no wait and counts it an error: 'not
    deleted, listed again next round', though the round's own request deleted it."""
    bucket = new_bucket(moto_endpoint)
    direct = S3Store(bucket, "c", endpoint_url=moto_endpoint)  # the journal's store too
    direct.put(f"{D}k", b"x")
    items = [(f"{D}k", 1, 7200.0, direct.head(f"{D}k").version)]  # type: ignore[union-attr]
    with serving(_LateServer(moto_endpoint)) as front:
        store = S3Store(bucket, "c", endpoint_url=front.endpoint(), max_attempts=0,
                        key_retry=no_key_retry())
        try:
            writer = JournalWriter(direct, JournalTarget(_PREFIX), _ATTEMPT)
            delete_keys(store, items, batch_size=1, concurrency=1, journal=writer)
        finally:
            store.close()
        assert front.held == 2 and front.heads == 1, (front.held, front.heads)
        assert front.applied.wait(30.0), "the held delete never reached the server"
    waited: list[float] = []
    monkeypatch.setattr(stage, "SENT_WAIT_SLEEP", waited.append)
    said: list[str] = []
    totals = read_journal(direct, _PREFIX, known=writer.written(),
                          before_asking=lambda n, ago: stage._wait_for_sent(
                              RoundStop(), said.append, stage.SENT_APPLIED_S, n, ago),
                          returned={_ATTEMPT.name()})
    assert direct.head(f"{D}k") is None  # the round's own request deleted it
    assert f"{D}k" not in totals.errors, (
        f"the key left the store by the round's own request, yet the record says "
        f"{totals.errors[D + 'k']!r} (waited {waited})")
    # Fixed (task s26f): the key is waited for as for an unanswered request, then asked.
    assert len(waited) == 1 and 0 < waited[0] <= stage.SENT_APPLIED_S, waited


def test_an_outcome_written_after_the_stage_was_seen_over_keeps_the_whole_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 2. An executor Spark took for lost lives on, and its attempt may write its
    outcome after Spark last showed a task of the round running (`_quiesce`), before the
    driver lists the journal (the listing GETs every entry of an attempt that did not
    return, and may take long). Here Spark last saw a task 30 s ago; the lost executor's
    attempt had its request's connection reset 35 s ago (5 s before that), found the key
    there, and writes its outcome now: `unknown`, `unanswered_ago_s` 35. That request may
    be applied until 70 s after it ended, 35 s from now. Before task s26f the wait was
    counted from when Spark last showed a task (`ended_at + 70 - 35`: 5 s); it is counted
    from now (task s27b removed `ended_at`, which no longer decided anything)."""
    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    key = "level_zero/data/001/000000000000000005/k0"
    put_local(root, key, 7200.0)
    writer = JournalWriter(store, JournalTarget(JOURNAL), _ATTEMPT)  # the lost executor's
    seq = writer.intent([(key, 1, 7200.0, "")])
    why = ("RequestFailedMaybeApplied: Connection was closed; whether it was deleted is "
           "unknown: still there right after an unanswered request (asked the store)")
    unanswered_at = time.monotonic() - 35.0
    writer.done(seq, DeleteResult(1, errors={key: why}, unknown={key},
                                  unanswered_at=unanswered_at))
    waited: list[float] = []
    monkeypatch.setattr(stage, "SENT_WAIT_SLEEP", waited.append)
    said: list[str] = []
    read_journal(store, JOURNAL, before_asking=functools.partial(
        stage._wait_for_sent, RoundStop(), said.append, stage.SENT_APPLIED_S),
        returned=set())  # its attempt never returned: read from the store
    # The request may land until `unanswered_at + SENT_APPLIED_S`; the read-back must not
    # ask before then (a margin of 5 s for this test's own run time).
    needed = unanswered_at + stage.SENT_APPLIED_S - time.monotonic()
    assert sum(waited) >= needed - 5.0, (
        f"the read-back waited {waited} s, but the lost attempt's request may be applied "
        f"for {needed:.0f} s more (its outcome was written after ended_at): {said}")


class _AcceptedServer(FrontServer):
    def __init__(self, upstream: str) -> None:
        self.accepted = 0  # single DeleteObject requests answered 202, not forwarded
        super().__init__(upstream, _Accepted)


class _Accepted(FrontHandler):
    """Forwards everything but a single DeleteObject, which it answers 202 Accepted with
    no body and does not forward: a gateway that queues deletes for later."""

    server: _AcceptedServer

    def do_DELETE(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        with self.server.lock:
            self.server.accepted += 1
        self.send_response(202)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.mark.s3
def test_a_conditional_delete_answered_202_is_not_taken_as_deleted(moto_endpoint: str) -> None:
    """Finding 3 (LOW: `gc-admin reset` and the probe's clean-up; no GC record). s26c made
    any DeleteObjects status below 301 other than 200 unsure (`deleteanswer.check`, rev38z3
    finding 1), but `delete_if_match` sends a single DeleteObject, which has no such check:
    botocore parses any status below 301 as success (`parsers.py`), so a 202, "accepted for
    processing, but the processing has not been completed. The request might or might not
    eventually be acted upon" (RFC 9110 15.3.3), is `Outcome.DELETED`. S3 answers a
    DeleteObject's success with 204 (botocore's model: `"responseCode": 204`;
    API_DeleteObject "HTTP/1.1 204"). Here the front answers 202 and forwards nothing: the
    object is still there and the store says DELETED; `reset_gc_state` then returns the
    lease as removed and the CLI prints "removed _cluster/gc/lease.json"."""
    bucket = new_bucket(moto_endpoint)
    direct = S3Store(bucket, "c", endpoint_url=moto_endpoint)
    direct.put("lease", b"x")
    version = direct.head("lease").version  # type: ignore[union-attr]
    with serving(_AcceptedServer(moto_endpoint)) as front:
        store = S3Store(bucket, "c", endpoint_url=front.endpoint(), max_attempts=0)
        outcome: Outcome | StoreError
        try:
            outcome = store.delete_if_match("lease", version)
        except StoreError as e:  # not removed, said so: a true answer
            outcome = e
        finally:
            store.close()
        assert front.accepted >= 1
    assert direct.head("lease") is not None  # nothing was forwarded
    assert outcome is not Outcome.DELETED, (
        "a 202 (not carried out: the object is still there) was taken as DELETED")
