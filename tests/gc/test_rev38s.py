"""Review rev38s: issue 38's deletion path as merged (main 9dcb710): the two-batch group
(i38q) and the `unknown` outcome with the "stage over" STOP (i38r), attacked together.

Each failing test is `xfail(strict=True, reason="rev38s finding N")`; the report is
/work/notes/review38s.md."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator

import pytest

from epochgc.impl.gc.delete import delete_keys
from epochgc.impl.gc.journal import (
    Attempt,
    JournalTarget,
    JournalWriter,
    journal_prefix,
    read_journal,
)
from epochgc.impl.store.retry import Backoff, Retrier
from epochgc.impl.store.s3 import S3Store
from tests.store.s3proxy import FailFn, S3Proxy

PREFIX = journal_prefix("20270116T100000.000Z-rev38s00")


def _s3(bucket: str, endpoint: str, key_attempts: int = 6) -> S3Store:
    # The key retry's default number of tries (6), no sleeping: each retry meets the fault.
    return S3Store(bucket, "c", endpoint_url=endpoint, max_attempts=2,
                   key_retry=Retrier(Backoff(attempts=key_attempts, base_s=0.0, cap_s=0.0),
                                     random.Random(1), lambda s: None))


@contextlib.contextmanager
def _proxy(upstream: str, fail: FailFn, fail_applied: FailFn) -> Iterator[S3Proxy]:
    """`s3_proxy` whose request threads print no traceback for a connection a client reset
    (review rev38q finding 6's INTERNALERROR, avoided as test_rev38q does)."""
    proxy = S3Proxy(upstream, fail=fail, fail_applied=fail_applied)
    proxy._server.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()


def _items(keys: list[str]) -> list[tuple[str, int, float, str]]:
    return [(k, 1, 7200.0, "") for k in keys]


@pytest.mark.xfail(strict=True, reason="rev38s finding 1")
@pytest.mark.s3
@pytest.mark.parametrize("then", ["SlowDown", "AccessDenied"])
def test_a_key_whose_first_delete_may_have_applied_is_asked_about_whatever_its_retries_say(
    s3_endpoint: str, s3_bucket: str, then: str
) -> None:
    """A DeleteObjects answered 200 with a per-key InternalError for a key the server did
    delete (S3: a request answered InternalError "might not have processed", so it may
    have); the key retry then meets a throttled server (per-key SlowDown on every retry)
    or a per-key AccessDenied. Two groups of two batches, the fault on the first key of
    each group's second batch. The key left the store at the first attempt, so the
    journal and its read-back must not call it "still there, listed again next round"."""
    keys = [f"data/k{i}" for i in range(8)]
    hit = {"c/data/k2", "c/data/k6"}  # the first key of each group's second batch
    direct = _s3(s3_bucket, s3_endpoint)
    for k in keys:
        direct.put(k, b"x")

    def applied(key: str, attempt: int) -> str | None:
        return "InternalError" if key in hit and attempt == 0 else None

    def then_fail(key: str, attempt: int) -> str | None:
        return then if key in hit and attempt > 0 else None

    with _proxy(s3_endpoint, then_fail, applied) as p:
        store = _s3(s3_bucket, p.endpoint)
        writer = JournalWriter(store, JournalTarget(PREFIX), Attempt(0, 0, 0, 1))
        delete_keys(store, _items(keys), batch_size=2, concurrency=1, journal=writer)
        store.close()
    try:
        left = sorted(k for k in keys if direct.head(k) is None)
        totals = read_journal(direct, PREFIX)
    finally:
        direct.close()
    assert left == keys  # every key left the store, the two faulted ones at their 1st try
    assert sorted(totals.deleted) == left and not totals.errors, (
        f"{len(left)} keys left the store; the read-back counts {len(totals.deleted)} "
        f"deleted, {len(totals.errors)} errors (\"listed again next round\"), "
        f"{len(totals.unknown)} unknown: {sorted(totals.errors.items())[:2]}")
