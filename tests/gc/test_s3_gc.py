"""One GC round on the S3 backend against the loopback S3-protocol server."""

from __future__ import annotations

import time
from typing import Any

import boto3
import pytest
from epochgc.impl.gc.job import GcOptions, run_gc
from epochgc.impl.store.s3 import S3Store
from epochgc.impl.store.url import StoreSpec
from epochgc.model.keys import format_key

from tests.gc.helpers import HOUR, all_keys, simple_cluster

pytestmark = [pytest.mark.spark, pytest.mark.s3]


def test_gc_round_on_s3(spark: Any, s3_endpoint: str, s3_bucket: str) -> None:
    spec = StoreSpec("s3", s3_bucket, "cluster-a", s3_endpoint)
    store = spec()
    now = time.time() + 2 * HOUR  # objects are written "now": make them 2h old
    simple_cluster(store, 50, now=now)
    eligible = set()
    for p in (0, 3, 999):
        for e in (10, 49, 50):
            key = format_key(p, e, f"obj{e}")
            store.put(key, b"payload")
            eligible.add(key)
        store.put(format_key(p, 51, "live"), b"payload")
    store.put("level_zero/data/003/000000000000000020/bad name", b"x")
    # A neighbour outside the store's prefix in the same bucket is never touched.
    S3Store(s3_bucket, "cluster-b", endpoint_url=s3_endpoint).put(format_key(0, 1, "x"), b"x")
    before = all_keys(store)

    s = run_gc(
        spark,
        spec,
        # The reports' LastModified is the server's real clock, 2h behind `now`.
        GcOptions(
            grace_s=HOUR,
            max_report_age_s=3 * HOUR,
            skip_malformed=True,
            tasks=3,
            delete_batch_size=2,
        ),
        clock=lambda: now,
    )
    assert (s.M, s.exit_code, s.malformed) == (50, 0, 1)
    assert s.deleted == s.eligible == len(eligible) and s.bytes_deleted == 7 * len(eligible)
    assert before - all_keys(store) == eligible
    raw = boto3.client("s3", endpoint_url=s3_endpoint).list_objects_v2(
        Bucket=s3_bucket, Prefix="cluster-b/"
    )
    assert [o["Key"] for o in raw["Contents"]] == ["cluster-b/" + format_key(0, 1, "x")]
