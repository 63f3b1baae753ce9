"""S3 answering 200 with per-key errors, and a client pool smaller than its threads.

The loopback S3 server sits behind `s3proxy.S3Proxy`, which withholds chosen keys from a
DeleteObjects request and reports them as per-key `<Error>`s in the 200 reply."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator

import pytest

from epochgc.impl.gc.delete import delete_keys
from epochgc.impl.store.retry import Backoff, Retrier
from epochgc.impl.store.s3 import S3Store
from epochgc.impl.store.url import StoreSpec, sized_for
from tests.store.s3proxy import S3Proxy, s3_proxy

pytestmark = pytest.mark.s3


def _fail(key: str, attempt: int) -> str | None:
    if "flaky" in key and attempt < 2:
        return "SlowDown"
    if "stuck" in key:
        return "InternalError"
    if "denied" in key:
        return "AccessDenied"
    return None


@pytest.fixture
def proxy(s3_endpoint: str) -> Iterator[S3Proxy]:
    with s3_proxy(s3_endpoint, fail=_fail) as p:
        yield p


def _keys(store: S3Store) -> set[str]:
    return {o.key for o in store.list_all("")}


def test_per_key_errors_in_a_200_reply_are_retried_then_counted(
    proxy: S3Proxy, s3_endpoint: str, s3_bucket: str
) -> None:
    direct = S3Store(s3_bucket, "c", endpoint_url=s3_endpoint)
    keys = [f"k{i}" for i in range(6)] + ["flaky-1", "flaky-2", "stuck", "denied"]
    for k in keys:
        direct.put(k, b"x")
    sleeps: list[float] = []
    policy = Backoff(attempts=4, base_s=0.01, cap_s=0.03)
    store = S3Store(
        s3_bucket,
        "c",
        endpoint_url=proxy.endpoint,
        key_retry=Retrier(policy, random.Random(7), sleeps.append),
    )
    result = store.delete_batch(keys)
    # The throttled keys were retried until gone; the stuck one only up to the bound, and
    # the refused one (not a retryable code) only once; both are reported.
    assert _keys(direct) == {"stuck", "denied"}
    assert set(result.errors) == {"stuck", "denied"} and result.deleted == 8
    assert result.errors["stuck"].startswith("InternalError")
    assert result.errors["denied"].startswith("AccessDenied")
    assert proxy.delete_attempts["c/flaky-1"] == 3
    assert proxy.delete_attempts["c/stuck"] == policy.attempts
    assert proxy.delete_attempts["c/denied"] == 1 and proxy.delete_attempts["c/k0"] == 1
    # One wait per retry round, each jittered inside its exponential bound.
    assert len(sleeps) == policy.attempts - 1
    for i, s in enumerate(sleeps):
        assert 0 <= s <= min(policy.cap_s, policy.base_s * 2**i)
    assert len(set(sleeps)) == len(sleeps)  # jittered, not a fixed schedule


def test_default_store_retries_throttled_keys(
    proxy: S3Proxy, s3_endpoint: str, s3_bucket: str
) -> None:
    """What the GC job opens (a StoreSpec) retries per-key SlowDown without being told."""
    spec = StoreSpec("s3", s3_bucket, "c", proxy.endpoint)
    direct = S3Store(s3_bucket, "c", endpoint_url=s3_endpoint)
    keys = [f"flaky-{i}" for i in range(5)] + ["plain"]
    for k in keys:
        direct.put(k, b"x")
    result = spec().delete_batch(keys)
    assert result.errors == {} and _keys(direct) == set()


def test_the_pool_is_sized_to_the_delete_concurrency(
    s3_endpoint: str, s3_bucket: str, caplog: pytest.LogCaptureFixture
) -> None:
    """32 requests in flight on a 16-connection pool make urllib3 discard a connection
    each time a 17th comes back (and open a new one next time); a pool sized to the
    threads keeps them all."""
    direct = S3Store(s3_bucket, "c", endpoint_url=s3_endpoint)
    keys = [f"k{i:04d}" for i in range(64)]
    for k in keys:
        direct.put(k, b"x")
    concurrency = 32
    caplog.set_level(logging.WARNING, logger="urllib3.connectionpool")
    with s3_proxy(s3_endpoint, latency_s=0.05) as slow:
        spec = sized_for(StoreSpec("s3", s3_bucket, "c", slow.endpoint), concurrency)
        store = spec()
        stats = delete_keys(
            store, ((k, 1, 0.0, "") for k in keys), batch_size=1, concurrency=concurrency
        )
        store.close()
    assert stats.deleted == len(keys) and stats.errors == 0
    # One client, one pool, every connection kept (no new ones after the first round).
    assert slow.connections <= concurrency
    assert not [r for r in caplog.records if "pool is full" in r.getMessage()]
