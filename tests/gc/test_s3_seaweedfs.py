"""The S3 GC path against a second, signature-checking S3 server: SeaweedFS on loopback,
behind the latency proxy the benchmark uses (issue 12). Skipped, with the reason, where
`weed` is not installed (`pip install 'epochgc[s3server]'`).

moto checks no signatures, so it could not see a proxy that re-serialised every signed
DeleteObjects body (SeaweedFS answered SignatureDoesNotMatch to every delete)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from epochgc.impl.gc.journal import JournalTarget
from epochgc.impl.gc.stream import list_and_delete_task
from epochgc.impl.store.base import ObjectStore
from epochgc.impl.store.url import StoreSpec
from epochgc.model.keys import format_key
from tests.gc.helpers import JOURNAL, all_keys, run_task, simple_cluster
from tests.gc.seaweedfs import (
    Weed,
    aws_env,
    forget_boto3_credentials,
    missing_reason,
    seaweedfs_server,
)
from tests.store.s3proxy import s3_proxy

pytestmark = [pytest.mark.s3]
M = 10
_PREFIXES = (0, 1, 2, 499, 500, 501, 998, 999)  # one task's share, with empty neighbours


@pytest.fixture(scope="module")
def weed() -> Iterator[Weed]:
    why = missing_reason()
    if why is not None:
        print(f"skipped: {why}")
        pytest.skip(why)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("AWS_SESSION_TOKEN", raising=False)  # restored for the other tests
        aws_env()
        with seaweedfs_server() as w:
            yield w
    forget_boto3_credentials()  # the other tests' clients read their own environment again


def _round_task(
    spec: StoreSpec, store: ObjectStore, keys: set[str], now: float
) -> tuple[set[str], set[str], dict[str, Any]]:
    """Put `keys`, run one GC task over `_PREFIXES` (pages of 2, batches of 5, 2 deletes in
    flight): (keys before, keys it deleted, its counts)."""
    for key in keys:
        store.put(key, b"xy")
    before = all_keys(store)
    result, deleted = run_task(
        list_and_delete_task(spec, M, now, 0.0, 2, 5, 2, 3, time.time, 300.0, iter(_PREFIXES),
                             journal=JournalTarget(JOURNAL)),
        store,
    )
    counts = {"stats": result.deleted.as_dict(), "samples": list(result.error_samples)}
    return before, deleted, counts


def test_a_task_deletes_exactly_the_eligible_keys_on_seaweedfs(weed: Weed) -> None:
    import boto3

    boto3.client("s3", endpoint_url=weed.endpoint).create_bucket(Bucket="gc-weed")
    with s3_proxy(weed.endpoint, latency_s=0.002) as proxy:
        spec = StoreSpec("s3", "gc-weed", "c", proxy.endpoint)
        store = spec()
        now = time.time()  # report ages also use LastModified: real time
        simple_cluster(store, M, now=now)
        eligible = {
            format_key(p, e, f"o{i}") for p in (0, 1, 500, 999) for e in (1, 5, M) for i in range(3)
        }
        kept = {
            format_key(0, M + 1, "live"),
            format_key(500, 10**6, "live"),
            "level_zero/data/001/00000000000000000\u0665/u",  # a Unicode digit: malformed
            "level_zero/other/000000000000000001/x",  # outside the data prefix
        }
        before, deleted, counts = _round_task(spec, store, eligible | kept, now)

    assert counts["samples"] == []  # no failed delete (the old proxy: SignatureDoesNotMatch)
    assert deleted == eligible
    assert counts["stats"]["deleted"] == len(eligible)
    assert all_keys(StoreSpec("s3", "gc-weed", "c", weed.endpoint)()) == before - eligible
    # pages of 2 and batches of 5 (36 keys: the last batch is partial), 2 in flight
    assert counts["stats"]["delete_requests"] == -(-len(eligible) // 5)


def test_per_key_errors_in_200_replies_on_seaweedfs(weed: Weed) -> None:
    """Per-key `SlowDown`/`InternalError` inside 200 DeleteObjects replies, on a server that
    checks signatures: the proxy drops the failed keys from the body and signs it again.
    Throttled keys are retried until deleted; a key that keeps failing is retried a bounded
    number of times, counted, and still there. (Before the proxy re-signed, SeaweedFS
    answered SignatureDoesNotMatch to every rewritten request.)"""
    import boto3

    def fail(key: str, attempt: int) -> str | None:
        if key.endswith("/never"):
            return "InternalError"
        return "SlowDown" if key.endswith("-0") and attempt < 2 else None

    boto3.client("s3", endpoint_url=weed.endpoint).create_bucket(Bucket="gc-weed-errors")
    with s3_proxy(weed.endpoint, fail=fail) as proxy:
        spec = StoreSpec("s3", "gc-weed-errors", "c", proxy.endpoint)
        store = spec()
        now = time.time()
        simple_cluster(store, M, now=now)
        eligible = {
            format_key(p, e, f"o{i}-{j}")
            for p in (0, 500)
            for e in (1, 5)
            for i in range(3)
            for j in range(2)
        }
        stuck = format_key(1, 2, "never")
        before, deleted, counts = _round_task(spec, store, eligible | {stuck}, now)

    assert proxy.injected["SlowDown"] == 2 * sum(k.endswith("-0") for k in eligible)
    assert deleted == eligible
    assert counts["stats"]["deleted"] == len(eligible)
    assert counts["stats"]["errors"] == 1, counts
    assert len(counts["samples"]) == 1 and "InternalError" in counts["samples"][0], counts
    assert all_keys(StoreSpec("s3", "gc-weed-errors", "c", weed.endpoint)()) == (before - eligible)
    assert 1 < proxy.delete_attempts["c/" + stuck] <= 10  # retried, and bounded
