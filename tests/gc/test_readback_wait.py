"""The read-back's wait for requests that may still be at the server (`stage.SENT_APPLIED_S`,
70 s) is asked for only where some attempt of a key's delete got no answer (task s26a,
issue 38).

A per-key error inside a whole DeleteResult is that key's answer to that request: S3
"performs a delete operation and returns the result of that delete, success or failure"
for each key (https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteObjects.html), so
once the answer is in, nothing of that request can still land. A key answered
InternalError on every attempt and still there when the task asks (HEAD) is not deleted,
and the round need not wait 70 s to say so. A request whose connection was lost before
its answer may still be carried out: that wait stays, measured from when the attempt
ended.

The waits are asked of `stage.SENT_WAIT_SLEEP`, replaced here by one that records the
seconds asked for (no timing is measured)."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from epochgc.impl.gc import stage
from epochgc.impl.gc.delete import delete_keys
from epochgc.impl.gc.journal import Attempt, JournalTarget, JournalWriter, read_journal
from epochgc.impl.gc.stop import RoundStop
from epochgc.impl.store.base import DeleteResult
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.s3 import S3Store
from tests.gc.helpers import JOURNAL, put_local
from tests.store.forward import no_key_retry
from tests.store.s3proxy import s3_proxy
from tests.store.s3server import new_bucket
from tests.store.test_rev38z import _cut_front

D = "level_zero/data/001/000000000000000005/"  # journaled keys are data keys (R20)

_ATTEMPT = Attempt(0, 0, 0, 1)


def _recording(monkeypatch: pytest.MonkeyPatch,
               meanwhile: Callable[[], None] = lambda: None) -> list[float]:
    waited: list[float] = []

    def sleep(seconds: float) -> None:
        waited.append(seconds)
        meanwhile()

    monkeypatch.setattr(stage, "SENT_WAIT_SLEEP", sleep)
    return waited


def _driver_wait(said: list[str]) -> Callable[[int, float], bool]:
    """The live driver's `before_asking`, as `stage._stage` makes it, the stage over now."""
    return functools.partial(stage._wait_for_sent, RoundStop(), said.append,
                             stage.SENT_APPLIED_S)


@pytest.mark.s3
def test_a_per_key_internal_error_answered_whole_still_waits(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kept` is answered a per-key InternalError on every attempt (not deleted); `gone` is
    deleted and answered InternalError all the same; `plain` is deleted. Every answer is a
    whole 200 DeleteResult. A per-key InternalError is no final answer: S3 says only that
    the request "might not have processed" (ErrorBestPractices.html), and a gateway whose
    backend call timed out answers so while its backend goes on (review rev38z4 finding 1,
    which reversed s26a's rule). So the task journals `kept` `unknown` (still there right
    after such an answer) and the read-back asks for the wait, measured from that answer
    (< 70 s), then asks again: still there, an error. Recorded, not slept."""
    bucket = new_bucket(moto_endpoint)
    direct = S3Store(bucket, "c", endpoint_url=moto_endpoint)  # the journal's store too
    keys = [f"{D}gone", f"{D}kept", f"{D}plain"]
    for k in keys:
        direct.put(k, b"x")
    items = [(k, 1, 7200.0, direct.head(k).version) for k in keys]  # type: ignore[union-attr]
    with s3_proxy(moto_endpoint,
                  fail=lambda k, a: "InternalError" if k.endswith("/kept") else None,
                  fail_applied=lambda k, a: "InternalError" if k.endswith("/gone") else None
                  ) as proxy:
        store = S3Store(bucket, "c", endpoint_url=proxy.endpoint, max_attempts=2,
                        key_retry=no_key_retry())
        try:
            writer = JournalWriter(direct, JournalTarget(JOURNAL), _ATTEMPT)
            delete_keys(store, items, batch_size=3, concurrency=1, journal=writer)
        finally:
            store.close()
    waited = _recording(monkeypatch)
    said: list[str] = []
    totals = read_journal(direct, JOURNAL, known=writer.written(),
                          before_asking=_driver_wait(said), returned={_ATTEMPT.name()})
    assert len(waited) == 1 and 0 < waited[0] <= stage.SENT_APPLIED_S, (waited, said)
    assert set(totals.deleted) == {f"{D}plain"}
    assert set(totals.gone_unattributed) == {f"{D}gone"}
    assert set(totals.errors) == {f"{D}kept"} and not totals.unknown, (totals.errors,
                                                                       totals.unknown)
    assert "InternalError" in totals.errors[f"{D}kept"]
    assert direct.head(f"{D}kept") is not None


@pytest.mark.s3
def test_a_lost_answer_still_asks_for_the_wait_and_the_request_lands_meanwhile(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch's one attempt reaches the server and its connection is reset before any
    answer (botocore: ConnectionClosedError); the server carries the request out only
    after the task's HEAD (review rev38z finding 6's front). The task journals the key
    `unknown`, not `answered`; the read-back asks for the wait (at most `SENT_APPLIED_S`,
    from when that attempt ended), the request lands meanwhile, and the key is counted
    as having left the store, never as an error. Without the wait, the read-back would
    find the key still there: this test fails if the wait is dropped."""
    bucket = new_bucket(moto_endpoint)
    direct = S3Store(bucket, "c", endpoint_url=moto_endpoint)
    direct.put(f"{D}k", b"x")
    with _cut_front(moto_endpoint, late=True) as front:
        store = S3Store(bucket, "c", endpoint_url=front.endpoint(), max_attempts=0,
                        key_retry=no_key_retry())
        try:
            writer = JournalWriter(direct, JournalTarget(JOURNAL), _ATTEMPT)
            delete_keys(store, [(f"{D}k", 1, 7200.0, direct.head(f"{D}k")
                                 .version)],  # type: ignore[union-attr]
                        batch_size=1, concurrency=1, journal=writer)
        finally:
            store.close()
        done = [json.loads(v) for k, v in writer.written().items()
                if k.endswith(".done.json")]
        assert len(done) == 1 and done[0]["unknown"] == [f"{D}k"], done
        assert "answered" not in done[0] and 0 <= done[0]["unanswered_ago_s"] < 60, done

        def lands() -> None:
            assert front.applied.wait(30.0), "the held delete never reached the server"

        waited = _recording(monkeypatch, lands)
        said: list[str] = []
        totals = read_journal(direct, JOURNAL, known=writer.written(),
                              before_asking=_driver_wait(said), returned={_ATTEMPT.name()})
    assert len(waited) == 1 and 0 < waited[0] <= stage.SENT_APPLIED_S, waited
    assert direct.head(f"{D}k") is None
    assert set(totals.gone_unattributed) == {f"{D}k"} and not totals.errors, totals


def test_an_unanswered_requests_wait_is_measured_from_when_its_attempt_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An outcome whose `unknown` key's last unanswered attempt ended 50 s before the
    outcome was written: the driver's wait asks for at most the 20 s left of the 70, not
    70 from the stage's end. A key of unknown fate whose requests were all answered (the
    store could not be asked then) is asked at once, with no wait."""
    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    keys = ["level_zero/data/001/000000000000000005/k0",
            "level_zero/data/001/000000000000000005/k1"]
    for k in keys:
        put_local(root, k, 7200.0)
    writer = JournalWriter(store, JournalTarget(JOURNAL), _ATTEMPT)
    seq = writer.intent([(k, 1, 7200.0, "") for k in keys])
    why = "RequestFailedMaybeApplied: connection closed; whether it was deleted is unknown"
    writer.done(seq, DeleteResult(2, errors=dict.fromkeys(keys, why), unknown=set(keys),
                                  answered={keys[1]},
                                  unanswered_at=time.monotonic() - 50.0))
    waited = _recording(monkeypatch)
    said: list[str] = []
    totals = read_journal(store, JOURNAL, known=writer.written(),
                          before_asking=_driver_wait(said), returned={_ATTEMPT.name()})
    assert len(waited) == 1 and 0 < waited[0] <= 20.0, waited
    assert set(totals.errors) == set(keys), totals  # waited out, both still there
    # Only the answered key: nothing to wait for.
    other = tmp_path / "t"
    store = LocalStore(other, create=True)
    put_local(other, keys[1], 7200.0)
    writer = JournalWriter(store, JournalTarget(JOURNAL), _ATTEMPT)
    seq = writer.intent([(keys[1], 1, 7200.0, "")])
    writer.done(seq, DeleteResult(1, errors={keys[1]: why}, unknown={keys[1]},
                                  answered={keys[1]}))
    waited.clear()
    totals = read_journal(store, JOURNAL, known=writer.written(),
                          before_asking=_driver_wait(said), returned={_ATTEMPT.name()})
    assert waited == [] and set(totals.errors) == {keys[1]}, (waited, totals)
