"""Issue 38 item 4: S3's ambiguous answers to a delete. A DeleteObjects that the server
applies but answers 500 (on every retry), or whose connection drops after the request was
sent, or a per-key InternalError for a key it did delete, may or may not have deleted:
S3's documentation says a request answered InternalError "might not have processed". Such
keys were counted as not deleted (4 keys gone, reported 2 deleted and 4 errors). Now every
key a batch ends with an error for is looked up (HEAD) before it is counted: gone is
`gone_unattributed` (it left the store, by this request or another writer's: no answer
says which; review rev38x finding 1, before: deleted), still there is an error, and a HEAD
that fails too leaves it an error that says the outcome is unknown."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from epochgc.impl.store.retry import Backoff, Retrier
from epochgc.impl.store.s3 import S3Store
from tests.store.s3proxy import Call, FailFn, Fault, s3_proxy

pytestmark = pytest.mark.s3


def _store(bucket: str, endpoint: str) -> S3Store:
    # Two attempts per request and per key: each is a retry of the same ambiguous answer.
    return S3Store(bucket, "c", endpoint_url=endpoint, max_attempts=2,
                   key_retry=Retrier(Backoff(attempts=2, base_s=0.0, cap_s=0.0),
                                     random.Random(1), lambda s: None))


def _left(direct: S3Store, keys: list[str]) -> set[str]:
    return {k for k in keys if direct.head(k) is None}


def _run(s3_endpoint: str, bucket: str, keys: list[str],
         faults: Callable[[Call], Fault | None] | None = None,
         fail: FailFn | None = None, fail_applied: FailFn | None = None,
         ) -> tuple[int, set[str], dict[str, str], set[str]]:
    direct = S3Store(bucket, "c", endpoint_url=s3_endpoint)
    for k in keys:
        direct.put(k, b"x")
    with s3_proxy(s3_endpoint, fail=fail, faults=faults, fail_applied=fail_applied) as p:
        r = _store(bucket, p.endpoint).delete_batch(keys)
    return r.deleted, r.gone_unattributed, r.errors, _left(direct, keys)


@pytest.mark.parametrize("fault", [Fault.APPLIED_THEN_500, Fault.APPLIED_THEN_RESET])
def test_a_delete_applied_but_answered_with_an_error_counts_what_left(
    s3_endpoint: str, s3_bucket: str, fault: Fault
) -> None:
    keys = [f"k{i}" for i in range(4)]
    deleted, unattributed, errors, left = _run(
        s3_endpoint, s3_bucket, keys,
        faults=lambda c: fault if c.kind == "delete" else None)
    assert left == set(keys)  # the server did delete them all
    assert (deleted, unattributed, errors) == (0, set(keys), {}), (
        f"{deleted} counted deleted, {unattributed} gone unattributed, errors {errors}")


def test_a_delete_refused_with_500_is_still_an_error(s3_endpoint: str, s3_bucket: str) -> None:
    keys = [f"k{i}" for i in range(3)]
    deleted, unattributed, errors, left = _run(
        s3_endpoint, s3_bucket, keys,
        faults=lambda c: Fault.NOT_APPLIED_500 if c.kind == "delete" else None)
    assert left == set() and deleted == 0 and not unattributed and set(errors) == set(keys)
    assert all("still there" in e for e in errors.values()), errors


def test_per_key_internal_errors_count_what_the_server_did(
    s3_endpoint: str, s3_bucket: str
) -> None:
    """A 200 DeleteObjects reply with per-key InternalError on every attempt: for the keys
    the server deleted anyway (`fail_applied`) and for those it did not (`fail`)."""
    keys = ["gone-1", "gone-2", "kept-1", "plain"]
    deleted, unattributed, errors, left = _run(
        s3_endpoint, s3_bucket, keys,
        fail=lambda k, a: "InternalError" if "kept" in k else None,
        fail_applied=lambda k, a: "InternalError" if "gone" in k else None)
    assert left == {"gone-1", "gone-2", "plain"}
    assert (deleted, unattributed, set(errors)) == (1, {"gone-1", "gone-2"}, {"kept-1"}), (
        deleted, unattributed, errors)


def test_a_batch_mixing_both_counts_each_key_by_the_store(
    s3_endpoint: str, s3_bucket: str
) -> None:
    """The found case: 6 keys, the first DeleteObjects (4 keys) applied and answered 500
    on every retry, the second (2 keys) answered normally."""
    direct = S3Store(s3_bucket, "c", endpoint_url=s3_endpoint)
    keys = [f"k{i}" for i in range(6)]
    for k in keys:
        direct.put(k, b"x")

    def faults(c: Call) -> Fault | None:  # every attempt of the first batch
        return Fault.APPLIED_THEN_500 if "c/k0" in c.keys else None

    with s3_proxy(s3_endpoint, faults=faults) as p:
        store = _store(s3_bucket, p.endpoint)
        r1 = store.delete_batch(keys[:4])
        r2 = store.delete_batch(keys[4:])
    assert _left(direct, keys) == set(keys)
    assert (r1.deleted, r1.gone_unattributed, r2.deleted) == (0, set(keys[:4]), 2)
    assert {**r1.errors, **r2.errors} == {}


def test_a_key_still_listed_after_its_delete(
    s3_endpoint: str, s3_bucket: str, s3_server_name: str
) -> None:
    """Eventual listing (a server that allows it; AWS S3 lists consistently since 2020):
    a key deleted is still listed once more, and a round deletes it again with its listed
    ETag. SeaweedFS answers NoSuchKey to that conditional delete, so it is not counted
    deleted twice: gone unattributed (an S3 NoSuchKey never says "already gone before the
    batch": an intermediary may have sent the round's request twice, review rev38z5
    finding 4). moto ignores the ETag in DeleteObjects and answers success: a delete by
    name cannot tell, and such a server counts it twice."""
    direct = S3Store(s3_bucket, "c", endpoint_url=s3_endpoint)
    direct.put("k", b"x")
    with s3_proxy(s3_endpoint, stale_lists=1) as p:
        store = S3Store(s3_bucket, "c", endpoint_url=p.endpoint)
        (listed,) = store.list_page("").objects
        first = store.delete_if_unchanged([("k", listed.version)])
        assert first.deleted == 1 and direct.head("k") is None
        stale = store.list_page("").objects
        assert [o.key for o in stale] == ["k"]  # still listed once
        assert store.list_page("").objects == []  # and then not
        again = store.delete_if_unchanged([("k", stale[0].version)])
    if s3_server_name == "seaweedfs":
        assert (again.deleted, again.gone, again.gone_unattributed, again.errors) == (
            0, set(), {"k"}, {})
    else:
        assert (again.deleted, again.gone, again.errors) == (1, set(), {})


@pytest.mark.parametrize("then", ["SlowDown", "AccessDenied"])
def test_a_key_ambiguous_once_and_then_refused_is_unknown_when_the_store_cannot_say(
    s3_endpoint: str, s3_bucket: str, then: str
) -> None:
    """Review rev38s finding 1, at the store: a key deleted by the server but answered a
    per-key InternalError, then refused on its retry (SlowDown: not applied; AccessDenied)
    is asked about like any ambiguous failure, and when that HEAD fails too (500 on every
    attempt) its fate is unknown, not an error "still there". (Before: the last attempt's
    code alone decided, so it was a plain error and never asked.)"""
    keys = ["hit", "plain"]
    direct = S3Store(s3_bucket, "c", endpoint_url=s3_endpoint)
    for k in keys:
        direct.put(k, b"x")
    with s3_proxy(s3_endpoint,
                  fail_applied=lambda k, a: "InternalError" if k == "c/hit" and a == 0 else None,
                  fail=lambda k, a: then if k == "c/hit" and a > 0 else None,
                  faults=lambda c: Fault.NOT_APPLIED_500 if c.kind == "head" else None) as p:
        r = _store(s3_bucket, p.endpoint).delete_batch(keys)
    assert _left(direct, keys) == set(keys)
    assert (r.deleted, r.unknown, set(r.errors)) == (1, {"hit"}, {"hit"}), (r.deleted, r.errors)
    assert "unknown" in r.errors["hit"], r.errors


def test_a_key_refused_once_and_then_gone_was_removed_by_another_writer(
    s3_endpoint: str, s3_bucket: str, s3_server_name: str
) -> None:
    """The attribution side of finding 1: a key answered SlowDown (not applied) and removed
    by another writer before its retry is not deleted by this batch: gone unattributed (an
    S3 NoSuchKey cannot tell another writer's delete from a copy of the round's own request
    an intermediary sent again: review rev38z5 finding 4). (Before: any earlier failure
    made a later NoSuchKey count as deleted.) Only a server that
    answers NoSuchKey to a conditional delete of an absent key can tell (SeaweedFS; moto
    deletes by name and says "deleted", as AWS does for an unconditional one)."""
    direct = S3Store(s3_bucket, "c", endpoint_url=s3_endpoint)
    direct.put("k", b"x")
    version = direct.head("k").version  # type: ignore[union-attr]

    def other_writer(_s: float) -> None:  # the backoff before the key's retry
        direct.delete_batch(["k"])

    with s3_proxy(s3_endpoint, fail=lambda k, a: "SlowDown" if a == 0 else None) as p:
        store = S3Store(s3_bucket, "c", endpoint_url=p.endpoint, max_attempts=2,
                        key_retry=Retrier(Backoff(attempts=2, base_s=0.0, cap_s=0.0),
                                          random.Random(1), other_writer))
        r = store.delete_if_unchanged([("k", version)])
    assert direct.head("k") is None and not r.errors
    if s3_server_name == "seaweedfs":
        assert (r.deleted, r.gone, r.gone_unattributed) == (0, set(), {"k"}), r
    else:
        assert (r.deleted, r.gone) == (1, set()), (r.deleted, r.gone)


def test_a_key_ambiguous_once_and_refused_while_others_are_retried_is_asked_about(
    s3_endpoint: str, s3_bucket: str
) -> None:
    """Finding 1's other path: the key's refusal (AccessDenied, final) comes while another
    key of the batch is still being retried (SlowDown twice), so it leaves the retry loop
    early; it is still asked about at the end: the server had deleted it."""
    keys = ["hit", "slow"]
    direct = S3Store(s3_bucket, "c", endpoint_url=s3_endpoint)
    for k in keys:
        direct.put(k, b"x")

    def fail(k: str, a: int) -> str | None:
        if k == "c/hit" and a == 1:
            return "AccessDenied"
        return "SlowDown" if k == "c/slow" and a < 2 else None

    with s3_proxy(s3_endpoint, fail=fail,
                  fail_applied=lambda k, a: "InternalError" if k == "c/hit" and a == 0
                  else None) as p:
        store = S3Store(s3_bucket, "c", endpoint_url=p.endpoint, max_attempts=2,
                        key_retry=Retrier(Backoff(attempts=3, base_s=0.0, cap_s=0.0),
                                          random.Random(1), lambda s: None))
        r = store.delete_batch(keys)
    assert _left(direct, keys) == set(keys)
    assert (r.deleted, r.gone_unattributed, r.errors) == (1, {"hit"}, {}), (
        r.deleted, r.gone_unattributed, r.errors)


@pytest.mark.parametrize("retry_answer", ["server", "PreconditionFailed"])
def test_a_key_absent_at_a_retry_after_an_ambiguous_answer_is_not_counted_deleted(
    s3_endpoint: str, s3_bucket: str, s3_server_name: str, retry_answer: str
) -> None:
    """Review rev38x finding 1 (its untested sites): a key answered a per-key InternalError
    and NOT deleted, then removed by another writer before its retry. The retry of the
    conditional delete finds it absent: SeaweedFS answers NoSuchKey itself; a server that
    answers an ETag'd delete of an absent key 412 (SeaweedFS does for DeleteObject, AWS's
    conditional-deletes page lists 412 for a mismatch) is injected. Either way no answer of
    this batch says it removed the key, and an earlier attempt may have: it left the store
    (`gone_unattributed`), neither deleted (before: NoSuchKey after an ambiguous attempt
    counted deleted) nor `changed` (before: the 412). moto deletes by name and answers
    "Deleted", which the batch counts (S3 answers so for a key that was not there too)."""
    direct = S3Store(s3_bucket, "c", endpoint_url=s3_endpoint)
    direct.put("k", b"x")
    version = direct.head("k").version  # type: ignore[union-attr]

    def other_writer(_s: float) -> None:  # the backoff before the key's retry
        direct.delete_batch(["k"])

    def fail(k: str, a: int) -> str | None:
        if a == 0:
            return "InternalError"  # not forwarded: not applied
        return None if retry_answer == "server" else retry_answer

    with s3_proxy(s3_endpoint, fail=fail) as p:
        store = S3Store(s3_bucket, "c", endpoint_url=p.endpoint, max_attempts=2,
                        key_retry=Retrier(Backoff(attempts=2, base_s=0.0, cap_s=0.0),
                                          random.Random(1), other_writer))
        r = store.delete_if_unchanged([("k", version)])
    assert direct.head("k") is None and not r.errors, r.errors
    got = (r.deleted, r.gone, r.changed, r.gone_unattributed)
    if s3_server_name == "seaweedfs" or retry_answer != "server":
        assert got == (0, set(), set(), {"k"}), got
    else:
        assert got == (1, set(), set(), set()), got


def test_a_key_absent_to_a_request_botocore_retried_is_not_counted_deleted(
    s3_endpoint: str, s3_bucket: str, s3_server_name: str
) -> None:
    """Review rev38x finding 1: the DeleteObjects is answered 500 and not applied; another
    writer removes the key meanwhile; botocore sends the request again and SeaweedFS answers
    NoSuchKey to its ETag. An earlier send of a retried request may have deleted what its
    answer calls absent: `gone_unattributed` (before: counted deleted)."""
    direct = S3Store(s3_bucket, "c", endpoint_url=s3_endpoint)
    direct.put("k", b"x")
    version = direct.head("k").version  # type: ignore[union-attr]

    def faults(c: Call) -> Fault | None:
        if c.kind == "delete" and c.attempt == 0:
            direct.delete_batch(["k"])  # the other writer, while the first send fails
            return Fault.NOT_APPLIED_500
        return None

    with s3_proxy(s3_endpoint, faults=faults) as p:
        r = _store(s3_bucket, p.endpoint).delete_if_unchanged([("k", version)])
    assert direct.head("k") is None and not r.errors, r.errors
    got = (r.deleted, r.gone, r.gone_unattributed)
    if s3_server_name == "seaweedfs":
        assert got == (0, set(), {"k"}), got
    else:
        assert got == (1, set(), set()), got
