"""Review rev38z5: the deletion path as merged on main d1eba33 (tasks s26a, s26c, s26f and
main's refactors d1eba33/5e2ae8c/79becf0), against issue 38's contract: every GC record
true under kills, damaged journals and S3's ambiguous answers.

Each finding is a strict xfail: it fails on the code as merged and passes once fixed. The
S3 cases run against moto in server mode on loopback, through a front of this file's own
(`tests/store/forward.py`'s `FrontServer`/`FrontHandler`)."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from epochgc.impl.gc import stage
from epochgc.impl.gc.delete import delete_keys
from epochgc.impl.gc.journal import (
    START,
    Attempt,
    JournalTarget,
    JournalTotals,
    JournalWriter,
    journal_prefix,
    read_journal,
    write_marker,
)
from epochgc.impl.gc.record import round_key
from epochgc.impl.gc.recover import recover_dead_rounds
from epochgc.impl.gc.stop import RoundStop
from epochgc.impl.store.s3 import S3Store
from tests.gc.test_recovery_wait import DEAD, _driver, _kill, _kill_task
from tests.store.forward import (
    FrontHandler,
    FrontServer,
    forward,
    no_key_retry,
    relay_head,
    serving,
)
from tests.store.s3server import new_bucket

D = "level_zero/data/001/000000000000000005/"  # journaled keys are data keys (R20)

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


def _both(body: bytes, code: str, message: str) -> bytes:
    """A whole 200 DeleteResult naming each key of `body` both <Deleted> and <Error>."""
    keys = re.findall(rb"<Key>([^<]*)</Key>", body)
    both = "".join(f"<Deleted><Key>{k.decode()}</Key></Deleted>"
                   f"<Error><Key>{k.decode()}</Key><Code>{code}</Code>"
                   f"<Message>{message}</Message></Error>" for k in keys)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<DeleteResult {_NS}>{both}'
            f"</DeleteResult>").encode()


class _CodeServer(FrontServer):
    """A server (or gateway) that carries out the first DeleteObjects (forwarded to moto)
    and answers every DeleteObjects with a whole 200 DeleteResult giving each key the
    per-key error `code`."""

    def __init__(self, upstream: str, code: str, message: str, deleted_too: bool = False
                 ) -> None:
        self.code = code
        self.message = message
        self.deleted_too = deleted_too  # each key named <Deleted> as well (`_both`)
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
        data = (_both(body, self.server.code, self.server.message) if self.server.deleted_too
                else _per_key_errors(body, self.server.code, self.server.message))
        self.send_xml(200, data)


def _one_key(moto_endpoint: str) -> tuple[S3Store, list[tuple[str, int, float, str]]]:
    """A new bucket's store holding `data/k`, and the item a task deletes it by."""
    direct = S3Store(new_bucket(moto_endpoint), "c", endpoint_url=moto_endpoint)
    direct.put(f"{D}k", b"x")
    items = [(f"{D}k", 1, 7200.0, direct.head(f"{D}k").version)]  # type: ignore[union-attr]
    return direct, items


def _journaled_delete(endpoint: str, direct: S3Store,
                      items: list[tuple[str, int, float, str]]) -> JournalWriter:
    """`items` deleted in one batch by a task's client at `endpoint` (no retry of its own:
    what the client sees is the front's answer), journaled on `direct`."""
    store = S3Store(direct.bucket, "c", endpoint_url=endpoint, max_attempts=0,
                    key_retry=no_key_retry())
    try:
        writer = JournalWriter(direct, JournalTarget(_PREFIX), _ATTEMPT)
        delete_keys(store, items, batch_size=1, concurrency=1, journal=writer)
    finally:
        store.close()
    return writer


def _read_back(store: S3Store, writer: JournalWriter, monkeypatch: pytest.MonkeyPatch,
               sleep: Callable[[float], None] | None = None
               ) -> tuple[JournalTotals, list[float]]:
    """The live driver's read-back of `writer`'s journal: `stage._wait_for_sent` as the
    `before_asking`, its sleep recorded (not slept), or `sleep` if given."""
    waited: list[float] = []
    monkeypatch.setattr(stage, "SENT_WAIT_SLEEP", sleep or waited.append)
    said: list[str] = []
    totals = read_journal(store, _PREFIX, known=writer.written(),
                          before_asking=lambda n, ago: stage._wait_for_sent(
                              RoundStop(), said.append, stage.SENT_APPLIED_S, n, ago),
                          returned={_ATTEMPT.name()})
    return totals, waited


@pytest.mark.s3
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
    deleted_through_is_recorded_true(moto_endpoint, monkeypatch,
                                     _CodeServer(moto_endpoint, code, message),
                                     f"answered {code}")


def deleted_through_is_recorded_true(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch,
                                     front_server: FrontServer, answered: str) -> None:
    """One key deleted through `front_server` (which carries the request out once and
    answers it as `answered` says): the key is gone, and its record does not say "listed
    again next round" (a deletion in no record). `direct` is the journal's store too."""
    direct, items = _one_key(moto_endpoint)
    with serving(front_server) as front:
        writer = _journaled_delete(front.endpoint(), direct, items)
        assert front.forwarded == 1, front.forwarded
    totals, waited = _read_back(direct, writer, monkeypatch)
    assert direct.head(f"{D}k") is None  # the round's own request deleted it
    assert f"{D}k" not in totals.errors, (
        f"the key left the store by the round's own request ({answered}), yet the "
        f"record says {totals.errors[D + 'k']!r}: 'listed again next round' "
        f"(HEADs the task sent: {front.heads}; waited {waited})")


class _HeldServer(FrontServer):
    """The server side of a DeleteObjects a task sent just before it was killed: received
    whole, carried out (forwarded to moto) once `release` is set (by a HEAD of the key
    having been answered, or by the test's wait), as a server may apply a request it got
    up to `stage.SENT_APPLIED_S` after the client gave up (the project's own model:
    `bounds.py`, `stage.sent_applied_s`)."""

    def __init__(self, upstream: str) -> None:
        self.release = threading.Event()
        self.applied = threading.Event()
        super().__init__(upstream, _Held)


class _Held(FrontHandler):
    server: _HeldServer

    def answer_delete(self, body: bytes) -> None:
        if self.server.release.wait(60.0):
            forward(*self.server.upstream, self.command, self.path, self.headers, body)
            self.server.applied.set()
        self.close_connection = True  # its client was killed: no answer reaches it

    def do_HEAD(self) -> None:
        self._go()
        self.server.release.set()


@pytest.mark.s3
def test_a_recovery_of_a_round_whose_tasks_are_gone_waits_for_a_request_they_sent(
    moto_endpoint: str
) -> None:
    """Finding 2. `recover._stop_dead` gives a round whose START says its tasks all ran
    below its driver on this host, and all are gone (`drivertree.tasks_gone`: a local
    master, issue 41 newuser4 F3), a bound of 0: no wait before the read-back, and
    `read_journal` is called with no `before_asking`, so an intent without outcome is
    settled at once (`_resolve_one(..., settled=True)`). That is right for a local
    directory, whose deletes are system calls of the task's own process
    (`stage.sent_applied_s`: 0 there). On S3 it is not: a DeleteObjects a task wrote to its
    socket before `kill -9` is at the server, which may carry it out up to
    `SENT_APPLIED_S` (70 s) after (`stage.SENT_APPLIED_S`, `bounds.py`: the very wait the
    live driver makes for a killed attempt's batch, review rev38s finding 2). Here a real
    driver and its task on this host are killed (the START's `driver_tree` is theirs), the
    task's DeleteObjects is at the server, and `gc-admin reset`'s recovery reads the
    journal back at once: the key is still there, recorded "delete request interrupted;
    still present" (an error, listed again next round); then the server applies the
    request. The key left the store by the dead round's own request and no record says
    so: the next round does not list it."""
    bucket = new_bucket(moto_endpoint)
    direct = S3Store(bucket, "c", endpoint_url=moto_endpoint)  # the journal's store too
    key = "level_zero/data/000/000000000000000001/k0"
    direct.put(key, b"x")
    version = direct.head(key).version  # type: ignore[union-attr]
    prefix = journal_prefix(DEAD)
    with _driver() as (driver, said):
        _kill(driver.pid)
        driver.wait()
        _kill_task(said["task"])
        write_marker(direct, prefix, START, {
            "round": DEAD, "M": 100, "snapshot_revision": 7, "options": {},
            "stop_within_s": 240.0, **said["local"]})
    writer = JournalWriter(direct, JournalTarget(prefix), _ATTEMPT)
    writer.intent([(key, 1, 7200.0, version)])  # its task was killed before the outcome
    with serving(_HeldServer(moto_endpoint)) as front:
        sender = S3Store(bucket, "c", endpoint_url=front.endpoint(), max_attempts=0)
        # The killed task's request, at the server (held there until the key is asked).
        threading.Thread(target=lambda: _ignore(sender.delete_batch, [key]),
                         daemon=True).start()
        deadline = time.monotonic() + 30.0
        while front.deletes == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert front.deletes == 1, "the task's request never reached the server"
        data = S3Store(bucket, "c", endpoint_url=front.endpoint())  # the recovery's HEADs
        slept: list[float] = []

        def sleep(seconds: float) -> None:  # the recovery's wait: the request lands in it
            slept.append(seconds)
            front.release.set()
            front.applied.wait(60.0)

        try:
            done = recover_dead_rounds(direct, "reset", lambda: set(), data=data,
                                       sleep=sleep)
        finally:
            data.close()
        assert [r.round_id for r in done] == [DEAD], done
        assert front.applied.wait(60.0), "the held request was never applied"
    assert direct.head(key) is None  # the dead round's own request deleted it
    counts = json.loads(direct.get(round_key(DEAD)))["counts"]
    assert counts["errors"] == 0, (
        f"the key left the store by the dead round's own request, yet its record counts "
        f"it an error ('delete request interrupted; still present': listed again next "
        f"round): {counts} (the recovery waited {sum(slept)} s)")


def _ignore(call: object, *args: object) -> None:
    """Run `call(*args)`, its outcome ignored (a killed task's request: no one reads it)."""
    try:
        call(*args)  # type: ignore[operator]
    except Exception:  # whatever it is, its task is dead
        return


@pytest.mark.s3
def test_an_answer_naming_a_key_both_deleted_and_failed_is_not_taken_as_not_deleted(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 3 (LOW: needs a server that contradicts itself). S3's DeleteResult gives
    each key one result: "For each key, Amazon S3 performs a delete operation and returns
    the result of that delete, success or failure" (API_DeleteObjects.html), in <Deleted>
    or in <Error>. `_delete_once` reads only `Errors` (Quiet mode), so an answer that
    names a key in both is read as a refusal: AccessDenied, no HEAD, recorded "listed
    again next round", though the same answer says it was deleted, as it was here (the
    request was carried out). Such an answer is not one result per key: unsure."""
    bucket = new_bucket(moto_endpoint)
    direct = S3Store(bucket, "c", endpoint_url=moto_endpoint)
    direct.put(f"{D}k", b"x")
    items = [(f"{D}k", 1, 7200.0, direct.head(f"{D}k").version)]  # type: ignore[union-attr]
    with serving(_CodeServer(moto_endpoint, "AccessDenied", "Access Denied",
                             deleted_too=True)) as front:
        store = S3Store(bucket, "c", endpoint_url=front.endpoint(), max_attempts=0,
                        key_retry=no_key_retry())
        try:
            writer = JournalWriter(direct, JournalTarget(_PREFIX), _ATTEMPT)
            delete_keys(store, items, batch_size=1, concurrency=1, journal=writer)
        finally:
            store.close()
    totals, waited = _read_back(direct, writer, monkeypatch)
    assert direct.head(f"{D}k") is None  # the request was carried out
    assert f"{D}k" not in totals.errors, (
        f"the answer said the key was deleted and refused at once; it was deleted, yet "
        f"the record says {totals.errors[D + 'k']!r} (HEADs the task sent: "
        f"{front.heads}; waited {waited})")


class _RetryingProxy(FrontServer):
    """An intermediary that retries a DeleteObjects itself when its call to the backend
    fails (nginx's `proxy_next_upstream ... non_idempotent`, an Envoy route's
    `retry_policy`): its first call reached the backend and was carried out, its answer
    lost to the proxy; the proxy sends the request again and relays that answer. The
    client sees one attempt."""

    def __init__(self, upstream: str) -> None:
        self.sent = 0  # DeleteObjects sent to the backend
        super().__init__(upstream, _Retrying)


class _Retrying(FrontHandler):
    server: _RetryingProxy

    def answer_delete(self, body: bytes) -> None:
        forward(*self.server.upstream, self.command, self.path, self.headers, body)
        resp, data = forward(*self.server.upstream, self.command, self.path, self.headers,
                             body)
        with self.server.lock:
            self.server.sent += 2
        relay_head(self, resp, data)
        self.wfile.write(data)


@pytest.mark.s3
def test_a_no_such_key_after_an_intermediarys_retry_is_not_recorded_already_gone(
    seaweedfs_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 4. A conditional DeleteObjects (each key with its listed ETag,
    `delete_if_unchanged`) answers a key with no object NoSuchKey (S3 User Guide,
    conditional-deletes.html; SeaweedFS: `checkDeleteIfMatch(..., object.ETag,
    s3err.ErrNoSuchKey)` in `s3api_object_handlers_delete.go`). `_delete` counts such a key
    `gone`, "already absent before this batch", unless an attempt the client saw may
    have been applied (`gone_unattributed`, review rev38x finding 1). An intermediary that
    retries the request itself (nginx `proxy_next_upstream error timeout non_idempotent`:
    "enabling this option explicitly allows retrying such requests"; an Envoy route's
    `retry_policy`) hides its first call: the key the round's own request removed is
    recorded already gone, not deleted and not `gone_unattributed`. Here on SeaweedFS,
    which enforces the per-key ETag."""
    bucket = new_bucket(seaweedfs_endpoint)
    direct = S3Store(bucket, "c", endpoint_url=seaweedfs_endpoint)
    direct.put(f"{D}k", b"x")
    items = [(f"{D}k", 1, 7200.0, direct.head(f"{D}k").version)]  # type: ignore[union-attr]
    with serving(_RetryingProxy(seaweedfs_endpoint)) as front:
        store = S3Store(bucket, "c", endpoint_url=front.endpoint(), max_attempts=0,
                        key_retry=no_key_retry())
        try:
            writer = JournalWriter(direct, JournalTarget(_PREFIX), _ATTEMPT)
            delete_keys(store, items, batch_size=1, concurrency=1, journal=writer)
        finally:
            store.close()
        assert front.sent == 2, front.sent
    totals, _waited = _read_back(direct, writer, monkeypatch)
    assert direct.head(f"{D}k") is None  # the proxy's first call removed it
    assert f"{D}k" not in totals.already_gone, (
        f"the round's own request removed the key (the intermediary's first call), yet "
        f"the record says it was already gone before the batch: already_gone "
        f"{sorted(totals.already_gone)}, deleted {sorted(totals.deleted)}, "
        f"gone_unattributed {sorted(totals.gone_unattributed)}")


def test_the_fault_table_says_what_a_per_key_internal_error_does_now() -> None:
    """Finding 5 (LOW). Task s26f (review rev38z4 finding 1) made a key answered a per-key
    InternalError in whole DeleteResults wait as for an unanswered request and be asked
    again (`s3._PER_KEY_UNSURE`); the README's paragraph was updated, but the fault table's
    row still gives s26a's behaviour, the opposite: an operator reading it expects no
    70 s wait, and an error record for a key that may yet be deleted."""
    readme = (Path(__file__).resolve().parents[2] / "impl" / "gc" / "README.md").read_text()
    rows = [ln for ln in readme.splitlines()
            if ln.startswith("| S3 key answered a per-key `InternalError`")]
    assert rows, "the row is gone: check the table says what the code does"
    assert not any("asks for no wait" in ln or "an error at once" in ln for ln in rows), rows
