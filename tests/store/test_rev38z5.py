"""Review rev38z5: the deletion path as merged on main d1eba33 (tasks s26a, s26c, s26f and
main's refactors d1eba33/5e2ae8c/79becf0), against issue 38's contract: every GC record
true under kills, damaged journals and S3's ambiguous answers.

Each finding is a strict xfail: it fails on the code as merged and passes once fixed. The
S3 cases run against moto in server mode on loopback, through a front of this file's own
(`tests/store/forward.py`'s `FrontServer`/`FrontHandler`)."""

from __future__ import annotations

import re
import time

import pytest

from epochgc.impl.gc import stage
from epochgc.impl.gc.delete import delete_keys
from epochgc.impl.gc.journal import (
    Attempt,
    JournalTarget,
    JournalTotals,
    JournalWriter,
    read_journal,
)
from epochgc.impl.gc.stop import RoundStop
from epochgc.impl.store.s3 import S3Store
from tests.store.forward import FrontHandler, FrontServer, forward, no_key_retry, serving
from tests.store.s3server import new_bucket

_PREFIX = "_cluster/gc/journal/20270301T100000.000Z-rev38z500/"  # a round's journal
_NS = 'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'
_ATTEMPT = Attempt(0, 0, 0, 1)


def _per_key_errors(body: bytes, code: str, message: str) -> bytes:
    """A whole 200 DeleteResult answering each key of the DeleteObjects `body` with `code`."""
    keys = re.findall(rb"<Key>([^<]*)</Key>", body)
    errors = "".join(f"<Error><Key>{k.decode()}</Key><Code>{code}</Code>"
                     f"<Message>{message}</Message></Error>" for k in keys)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<DeleteResult {_NS}>{errors}'
            f"</DeleteResult>").encode()


class _CodeServer(FrontServer):
    """A server (or gateway) that carries out the first DeleteObjects (forwarded to moto)
    and answers every DeleteObjects with a whole 200 DeleteResult giving each key the
    per-key error `code`."""

    def __init__(self, upstream: str, code: str, message: str) -> None:
        self.code = code
        self.message = message
        self.forwarded = 0
        super().__init__(upstream, _Code)


class _Code(FrontHandler):
    server: _CodeServer

    def answer_delete(self, body: bytes) -> None:
        with self.server.lock:
            first = self.server.forwarded == 0
            self.server.forwarded += first
        if first:
            forward(*self.server.upstream, self.command, self.path, self.headers, body)
        data = _per_key_errors(body, self.server.code, self.server.message)
        self.send_response(200)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _read_back(store: S3Store, writer: JournalWriter,
               monkeypatch: pytest.MonkeyPatch) -> tuple[JournalTotals, list[float]]:
    """The live driver's read-back of `writer`'s journal: `stage._wait_for_sent` as the
    `before_asking`, its sleep recorded (not slept)."""
    waited: list[float] = []
    monkeypatch.setattr(stage, "SENT_WAIT_SLEEP", waited.append)
    said: list[str] = []
    totals = read_journal(store, _PREFIX, known=writer.written(),
                          before_asking=lambda n, ago: stage._wait_for_sent(
                              RoundStop(), said.append, time.monotonic(),
                              stage.SENT_APPLIED_S, n, ago),
                          returned={_ATTEMPT.name()})
    return totals, waited


@pytest.mark.s3
@pytest.mark.xfail(strict=True, reason=(
    "rev38z5 finding 1: a per-key error code the client does not know (MinIO's "
    "SlowDownWrite for a write quorum not met; a gateway relaying its backend's "
    "OperationTimedOut) is taken as a definitive refusal: no HEAD, no wait, the key "
    "recorded 'not deleted' though the request deleted it"))
@pytest.mark.parametrize(("code", "message"), [
    # MinIO cmd/api-errors.go: errErasureWriteQuorum -> ErrSlowDownWrite {Code:
    # "SlowDownWrite", "Resource requested is unwritable, please reduce your request
    # rate", 503}; DeleteMultipleObjectsHandler gives each key `toAPIError(..).Code`.
    pytest.param("SlowDownWrite",
                 "Resource requested is unwritable, please reduce your request rate",
                 id="minio-SlowDownWrite"),
    # Azure Storage's common error code, which MinIO's gateway relayed as the key's code
    # (`case azblob.StorageError: Code: string(e.ServiceCode())`).
    pytest.param("OperationTimedOut",
                 "The operation could not be completed within the permitted time. The "
                 "operation may or may not have succeeded on the server side.",
                 id="gateway-OperationTimedOut"),
])
def test_a_per_key_error_of_an_unknown_code_is_not_taken_as_not_deleted(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, code: str, message: str
) -> None:
    """Finding 1. `S3Store._delete` sorts a per-key code into "not there" (`_GONE`),
    "changed" (`_CHANGED`), "may have been applied" (`_AMBIGUOUS`: InternalError,
    ServiceUnavailable, 503, RequestTimeout since rev38z4 finding 1) and, for every other
    code, "refused, not applied": no HEAD, no wait, journaled a plain error, counted
    "could not be deleted; listed again next round". S3's API reference gives the per-key
    Error's Code as "the error code" and nothing more (API_Error.html); nothing in it
    makes an unknown code a refusal. Here the server carried the request out and answered
    the key with a code of a real S3 server (MinIO answers a write quorum not met so) or
    one a gateway relays (Azure's OperationTimedOut: "may or may not have succeeded"):
    the key left the store by the round's own request, and the record says it is still
    there to be listed again: a deletion in no record."""
    bucket = new_bucket(moto_endpoint)
    direct = S3Store(bucket, "c", endpoint_url=moto_endpoint)  # the journal's store too
    direct.put("data/k", b"x")
    items = [("data/k", 1, 7200.0, direct.head("data/k").version)]  # type: ignore[union-attr]
    with serving(_CodeServer(moto_endpoint, code, message)) as front:
        store = S3Store(bucket, "c", endpoint_url=front.endpoint(), max_attempts=0,
                        key_retry=no_key_retry())
        try:
            writer = JournalWriter(direct, JournalTarget(_PREFIX), _ATTEMPT)
            delete_keys(store, items, batch_size=1, concurrency=1, journal=writer)
        finally:
            store.close()
        assert front.forwarded == 1, front.forwarded
    totals, waited = _read_back(direct, writer, monkeypatch)
    assert direct.head("data/k") is None  # the round's own request deleted it
    assert "data/k" not in totals.errors, (
        f"the key left the store by the round's own request (answered {code}), yet the "
        f"record says {totals.errors['data/k']!r}: 'listed again next round' "
        f"(HEADs the task sent: {front.heads}; waited {waited})")
