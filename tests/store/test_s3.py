"""S3 specifics against the loopback server: failures are per key or one clear StoreError."""

from __future__ import annotations

import pickle

import pytest

from epochgc.impl.store.base import StoreError
from epochgc.impl.store.s3 import S3Store

pytestmark = pytest.mark.s3


def test_missing_bucket_is_a_clear_error(s3_endpoint: str, s3_server_name: str) -> None:
    store = S3Store("no-such-bucket", "p", endpoint_url=s3_endpoint)
    with pytest.raises(StoreError, match="NoSuchBucket"):
        store.list_page("")
    if s3_server_name == "seaweedfs":
        # SeaweedFS creates a missing bucket on the first PUT by an admin identity; the GC
        # never writes before it has read `_cluster/partitions.json`, so a mistyped bucket
        # is refused there before anything is created (tests/gc/test_cli.py).
        store.put("k", b"x")
        assert [o.key for o in store.list_all("")] == ["k"]
        return
    with pytest.raises(StoreError, match="s3://no-such-bucket/p/"):
        store.put("k", b"x")
    result = store.delete_batch(["a", "b"])
    assert set(result.errors) == {"a", "b"} and result.deleted == 0


def test_store_pickles_without_its_client(s3_endpoint: str, s3_bucket: str) -> None:
    store = S3Store(s3_bucket, "p", endpoint_url=s3_endpoint)
    store.put("k", b"v")  # creates the client
    clone = pickle.loads(pickle.dumps(store))
    assert clone.get("k") == b"v"


def test_prefix_isolates_stores_in_one_bucket(s3_endpoint: str, s3_bucket: str) -> None:
    a = S3Store(s3_bucket, "a", endpoint_url=s3_endpoint)
    ab = S3Store(s3_bucket, "ab", endpoint_url=s3_endpoint)
    a.put("k", b"1")
    ab.put("k", b"2")
    assert [o.key for o in a.list_all("")] == ["k"] and a.get("k") == b"1"
    a.delete_batch(["k"])
    assert ab.get("k") == b"2"


def test_conditional_deletes_send_the_listed_etag(s3_endpoint: str, s3_bucket: str) -> None:
    # Issue 29: each key's delete carries the ETag its listing saw; a server that honours
    # it (AWS S3) answers PreconditionFailed for a key rewritten since, counted `changed`.
    # Moto 5.2 ignores the field in DeleteObjects (it checks If-Match only on a single
    # DeleteObject): there the rewritten key is deleted by name, as the docs say.
    store = S3Store(s3_bucket, "c", endpoint_url=s3_endpoint)
    store.put("a/k", b"old")
    store.put("a/j", b"j")
    listed = {o.key: o.version for o in store.list_all("a/")}
    assert all(v.strip('"') for v in listed.values())  # the ETag, as listed
    sent: list[bytes] = []
    store.client.meta.events.register(
        "before-send.s3.DeleteObjects", lambda request, **_: sent.append(request.body)
    )
    result = store.delete_if_unchanged(sorted(listed.items()))
    assert b"<ETag>" in sent[0] and listed["a/k"].encode() in sent[0].replace(b"&quot;", b'"')
    assert result.errors == {} and result.deleted == 2
    assert list(store.list_all("a/")) == []


def test_put_if_absent_on_s3(s3_endpoint: str, s3_bucket: str) -> None:
    # The GC lease's create (issue 29): If-None-Match: * (moto 5 honours it, as AWS does).
    store = S3Store(s3_bucket, "c", endpoint_url=s3_endpoint)
    assert store.put_if_absent("lease", b"1") and not store.put_if_absent("lease", b"2")
    assert store.get("lease") == b"1"


def test_a_key_rewritten_since_its_listing_is_kept_where_the_server_checks(
    s3_endpoint: str, s3_bucket: str, s3_server_name: str
) -> None:
    # SeaweedFS (4.48) honours the ETag in DeleteObjects, as AWS S3 does: the rewritten key
    # is kept and counted `changed`. Moto deletes it by name (impl/gc/README.md).
    store = S3Store(s3_bucket, "c", endpoint_url=s3_endpoint)
    store.put("a/k", b"old")
    store.put("a/j", b"j")
    listed = {o.key: o.version for o in store.list_all("a/")}
    store.put("a/k", b"new bytes")
    result = store.delete_if_unchanged(sorted(listed.items()))
    assert result.errors == {} and "a/j" not in {o.key for o in store.list_all("a/")}
    if s3_server_name == "seaweedfs":
        assert result.changed == {"a/k"} and result.deleted == 1
        assert store.get("a/k") == b"new bytes"
    else:
        assert result.changed == set() and store.head("a/k") is None
