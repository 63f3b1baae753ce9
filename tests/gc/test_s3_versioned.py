"""A versioned bucket is refused unless asked (issue 12, S3 at scale): a delete there only
adds a delete marker, the bytes stay. Refused before Spark starts, so no session here."""

from __future__ import annotations

import time

import boto3
import pytest

from epochgc.impl.gc.errors import GcError
from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.store.url import StoreSpec
from epochgc.model.keys import format_key
from tests.gc.helpers import all_keys, simple_cluster

pytestmark = pytest.mark.s3


class _SparkWanted(Exception):
    """Raised by the session factory: the round got past every pre-Spark check."""


def _no_spark() -> None:
    raise _SparkWanted


@pytest.mark.parametrize("status", ["Enabled", "Suspended"])
def test_versioned_bucket_is_refused_unless_allowed(
    s3_endpoint: str, s3_bucket: str, status: str
) -> None:
    boto3.client("s3", endpoint_url=s3_endpoint).put_bucket_versioning(
        Bucket=s3_bucket, VersioningConfiguration={"Status": "Enabled"}
    )
    if status == "Suspended":  # old versions stay after suspending too
        boto3.client("s3", endpoint_url=s3_endpoint).put_bucket_versioning(
            Bucket=s3_bucket, VersioningConfiguration={"Status": "Suspended"}
        )
    spec = StoreSpec("s3", s3_bucket, "c", s3_endpoint)
    store = spec()
    simple_cluster(store, 10, now=time.time())
    store.put(format_key(1, 2, "old"), b"x")
    before = all_keys(store)
    options = GcOptions(grace_s=0, allow_short_grace=True)
    with pytest.raises(
        GcError, match=f"versioned bucket \\(versioning {status}\\).*--allow-versioned"
    ):
        run_gc(_no_spark, spec, options)  # type: ignore[arg-type]
    assert all_keys(store) == before
    with pytest.raises(_SparkWanted):  # allowed: it goes on to list
        run_gc(_no_spark, spec, GcOptions(grace_s=0, allow_short_grace=True, allow_versioned=True))  # type: ignore[arg-type]
    # newuser12 P8: a dry run deletes nothing, so it runs, saying that a real round would be
    # refused (old code: refused as a real round, "nothing was deleted", exit 1).
    said: list[str] = []
    with pytest.raises(_SparkWanted):
        run_gc(_no_spark, spec, GcOptions(grace_s=0, allow_short_grace=True, dry_run=True),  # type: ignore[arg-type]
               say=said.append)
    assert [ln for ln in said if ln.startswith(
        f"gc: dry run on a versioned bucket ({store.describe()}, versioning {status}): a real "
        "round would be refused (exit 1): a delete there only adds a delete marker")], said
    assert all_keys(store) == before


def test_unversioned_bucket_goes_on(s3_endpoint: str, s3_bucket: str) -> None:
    spec = StoreSpec("s3", s3_bucket, "c", s3_endpoint)
    simple_cluster(spec(), 10, now=time.time())
    with pytest.raises(_SparkWanted):
        run_gc(_no_spark, spec, GcOptions(grace_s=0, allow_short_grace=True))  # type: ignore[arg-type]
