"""Store URL parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochgc.impl.store.base import StoreError
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.s3 import S3Store
from epochgc.impl.store.url import StoreSpec, open_store, parse_store_url


def test_plain_path_and_file_url(tmp_path: Path) -> None:
    assert parse_store_url(str(tmp_path)) == StoreSpec("file", str(tmp_path))
    assert parse_store_url(f"file://{tmp_path}") == StoreSpec("file", str(tmp_path))
    assert parse_store_url("file://localhost/tmp/x") == StoreSpec("file", "/tmp/x")
    assert parse_store_url("rel/dir").location == str(Path.cwd() / "rel/dir")
    assert isinstance(open_store(str(tmp_path)), LocalStore)


def test_s3_url() -> None:
    spec = parse_store_url("s3://my-bucket/some/prefix/", "http://127.0.0.1:9000")
    assert spec == StoreSpec("s3", "my-bucket", "some/prefix", "http://127.0.0.1:9000")
    store = spec()
    assert isinstance(store, S3Store) and store.prefix == "some/prefix/"
    assert parse_store_url("s3://bucket").prefix == ""


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "empty"),
        ("gs://b/x", "unsupported store URL scheme"),
        ("http://host/x", "unsupported store URL scheme"),
        ("file://otherhost/x", "names a host"),
        ("s3://", "not a valid bucket name"),
        ("s3://UPPER/x", "not a valid bucket name"),
        ("s3://key:secret@bucket/x", "must not carry credentials"),
        ("s3://bucket/a//b", "empty or relative path component"),
        ("s3://bucket/x?versionId=1", "query"),
        ("s3://bucket/p\udcff", "not valid UTF-8"),  # issue 41 F10: a non-UTF-8 argument
        ("s3://[bucket/x", "not a valid URL"),
    ],
)
def test_bad_urls(url: str, message: str) -> None:
    with pytest.raises(StoreError, match=message):
        parse_store_url(url)


@pytest.mark.parametrize(
    ("endpoint", "message"),
    [
        ("127.0.0.1:9000", "must be http"),
        ("ftp://h", "must be http"),
        ("http://user:pw@h:1", "must not carry credentials"),
        ("http://h:99999", "invalid port"),
        ("http://[::1", "is not a valid URL"),  # issue 41 F10: urlsplit's ValueError
        # newuser9 (notes): a path in the endpoint (a bucket, path-style) was accepted; the
        # bucket is the store URL's, the endpoint only the server's scheme, host and port.
        ("http://127.0.0.1:5125/gcb", "has a path: '/gcb'"),
        ("http://h:1/?x=1", "has a query or fragment"),
    ],
)
def test_bad_endpoints(endpoint: str, message: str) -> None:
    with pytest.raises(StoreError, match=message):
        parse_store_url("s3://bucket/x", endpoint)


@pytest.mark.parametrize("url", ["s3:/bad", "S3:bucket/p", "file:/tmp/x", "s3:"])
def test_a_url_missing_its_slashes_is_refused_not_taken_as_a_path(url: str) -> None:
    """newuser3 N11: `gc --store s3:/bad` (a typo) said "store directory .../s3:/bad does
    not exist", exit 1: it was taken as a local path. Now a usage error naming the URL
    (64 from every command that takes --store); `./s3:/bad` is still a directory."""
    with pytest.raises(StoreError, match=r"is neither an (s3|file):// URL"):
        parse_store_url(url)
    assert parse_store_url(f"./{url}").kind == "file"
    from click.testing import CliRunner

    from epochgc.impl.cli import main

    for argv in (["gc", "--store", url], ["gc-admin", "show", "--store", url]):
        r = CliRunner().invoke(main, argv)
        assert r.exit_code == 64 and repr(url) in r.output, (argv, r.exit_code, r.output)


@pytest.mark.parametrize("path", ["/tmp/" + "a" * 100_000, "/tmp/" + "b" * 256 + "/s"])
def test_a_local_path_the_system_cannot_name_is_refused_cut(path: str) -> None:
    """newuser9 (notes): a 100,000-character --store gave exit 1, "OSError: [Errno 36]
    File name too long", with the whole path in the line."""
    with pytest.raises(StoreError, match="too long for this system") as e:
        parse_store_url(path)
    assert len(str(e.value)) < 300, str(e.value)
