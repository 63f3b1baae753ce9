"""Store URLs: a plain path, `file:///abs/path`, or `s3://bucket/prefix`."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import SplitResult, unquote, urlsplit

from epochgc.impl.store.base import ObjectStore, StoreError

DEFAULT_CONNECTIONS = 16
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


@dataclass(frozen=True)
class StoreSpec:
    """Where a store lives, as plain data: Spark ships this to executors, which open their
    own store with it (connections are per process). Calling it opens the store."""

    kind: str  # "file" or "s3"
    location: str  # absolute directory, or bucket name
    prefix: str = ""  # s3 only
    endpoint_url: str | None = None  # s3 only
    connections: int = DEFAULT_CONNECTIONS  # s3 only: the client's connection pool
    # file only: rmdirs in flight while pruning; 1 starts no thread (the harness's inline,
    # deterministic scheduling); None: the store's default
    prune_concurrency: int | None = None

    def __call__(self) -> ObjectStore:
        return open_spec(self)

    def describe(self) -> str:
        if self.kind == "file":
            return self.location
        where = f"s3://{self.location}/{self.prefix}"
        return where + (f" at {self.endpoint_url}" if self.endpoint_url else "")


def parse_store_url(url: str, s3_endpoint: str | None = None) -> StoreSpec:
    """Validate a store URL without touching the store (errors are StoreError)."""
    if not url or not url.strip():
        raise StoreError("store URL is empty")
    if s3_endpoint is not None:
        check_endpoint(s3_endpoint)
    scheme_like = url.partition(":")[0].lower() if ":" in url else None
    if "://" not in url and scheme_like in ("s3", "file"):
        # newuser3 N11: `s3:/bad` (a typo) ran as a local directory `./s3:/bad`; a local
        # directory of that name is still given as `./s3:/bad`.
        raise StoreError(f"store URL {url!r} is neither an {scheme_like}:// URL (write "
                         f"{scheme_like}://...) nor meant as a local path (write "
                         f"./{url} for a directory of that name)")
    if "://" not in url:
        if s3_endpoint is not None:
            raise StoreError("--s3-endpoint only applies to s3:// stores")
        return StoreSpec("file", _local(str(Path(url).expanduser().absolute())))
    parts = _split(url, f"store URL {url!r}")
    scheme = parts.scheme.lower()
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise StoreError(f"file URL {url!r} names a host; use file:///absolute/path")
        if not parts.path:
            raise StoreError(f"file URL {url!r} has no path")
        if parts.query or parts.fragment or url.rstrip().endswith(("?", "#")):
            # `file:///d/st#ore` silently ran on /d/st (issue 29): a path with `#` or `?`
            # is given as a plain path or percent-encoded (%23, %3F).
            raise StoreError(f"file URL {url!r} has a query or fragment (`?`, `#`); "
                             "percent-encode them or give a plain path")
        if s3_endpoint is not None:
            raise StoreError("--s3-endpoint only applies to s3:// stores")
        return StoreSpec("file", _local(str(Path(unquote(parts.path)).absolute())))
    if scheme == "s3":
        if "@" in parts.netloc:
            raise StoreError("s3 URL must not carry credentials; use boto3's standard chain")
        bucket = parts.netloc
        if not _BUCKET.fullmatch(bucket) or ".." in bucket:
            raise StoreError(f"s3 URL {url!r}: {bucket!r} is not a valid bucket name")
        if parts.query or parts.fragment:
            raise StoreError(f"s3 URL {url!r} must not have a query or fragment")
        prefix = parts.path.strip("/")
        try:
            # "The object key name is a sequence of Unicode characters with UTF-8 encoding"
            # (https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html); a
            # non-UTF-8 argument byte arrives as a lone surrogate (PEP 383). Issue 41 F10:
            # it failed at the first request, exit 1, with a codec error.
            prefix.encode("utf-8")
        except UnicodeEncodeError:
            raise StoreError(f"s3 URL {url!r} has a prefix that is not valid UTF-8 "
                             "(S3 keys are UTF-8)") from None
        if any(p in ("", ".", "..") for p in prefix.split("/")) and prefix:
            raise StoreError(f"s3 URL {url!r} has an empty or relative path component")
        return StoreSpec("s3", bucket, prefix, s3_endpoint)
    raise StoreError(
        f"unsupported store URL scheme {parts.scheme!r} in {url!r} (use a path, file:// or s3://)"
    )


def _local(path: str) -> str:
    """`path`, if the system can name it: a name longer than NAME_MAX or a path longer
    than PATH_MAX fails every call with ENAMETOOLONG (POSIX <limits.h>; open(2):
    "ENAMETOOLONG pathname was too long"). newuser9's notes: a 100,000-character --store
    gave exit 1 and the whole path in the line; now a bad argument (64), the path cut."""
    try:
        name_max = os.pathconf("/", "PC_NAME_MAX")
        path_max = os.pathconf("/", "PC_PATH_MAX")
    except (OSError, ValueError):
        name_max, path_max = 255, 4096  # Linux's
    size = len(os.fsencode(path))
    longest = max((len(os.fsencode(p)) for p in path.split("/")), default=0)
    if size >= path_max or longest > name_max:
        shown = path if len(path) <= 80 else f"{path[:60]}...{path[-10:]}"
        why = (f"longer than {path_max - 1:,} bytes ({size:,})" if size >= path_max
               else f"a name longer than {name_max} bytes ({longest:,})")
        raise StoreError(f"store path {shown!r} is too long for this system: {why}")
    return path


def _split(url: str, what: str) -> SplitResult:
    """urlsplit, its ValueError ("Invalid IPv6 URL": an unclosed `[`) as a StoreError
    naming the argument (issue 41 F10: it escaped as "Error: ValueError ...", exit 1)."""
    try:
        return urlsplit(url)
    except ValueError as e:
        raise StoreError(f"{what} is not a valid URL ({e})") from None


def check_endpoint(endpoint: str) -> str:
    parts = _split(endpoint, f"S3 endpoint {endpoint!r}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise StoreError(f"S3 endpoint {endpoint!r} must be http(s)://host[:port]")
    if parts.username or parts.password:
        raise StoreError("S3 endpoint must not carry credentials; use boto3's standard chain")
    # The endpoint is the server (boto3's endpoint_url: scheme, host, port); the bucket and
    # prefix are the store URL's (newuser9's notes: `http://host:port/gcb` was accepted).
    if parts.path not in ("", "/"):
        raise StoreError(f"S3 endpoint {endpoint!r} has a path: {parts.path!r}; give "
                         "http(s)://host[:port] (the bucket is the store URL's: s3://BUCKET/PREFIX)")
    if parts.query or parts.fragment:
        raise StoreError(f"S3 endpoint {endpoint!r} has a query or fragment; give "
                         "http(s)://host[:port]")
    try:
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise StoreError(f"S3 endpoint {endpoint!r} has an invalid port") from None
    return endpoint


def open_spec(spec: StoreSpec) -> ObjectStore:
    if spec.kind == "file":
        from epochgc.impl.store.local import LocalStore

        if spec.prune_concurrency is None:
            return LocalStore(spec.location)
        return LocalStore(spec.location, prune_concurrency=spec.prune_concurrency)
    if spec.kind == "s3":
        from epochgc.impl.store.s3 import S3Store

        return S3Store(
            spec.location,
            spec.prefix,
            endpoint_url=spec.endpoint_url,
            max_pool_connections=spec.connections,
        )
    raise StoreError(f"unknown store kind {spec.kind!r}")


def open_control(spec: Callable[[], ObjectStore],
                 on_wait: Callable[[str], None] | None = None) -> ObjectStore:
    """The store for a command's control-plane reads before (or instead of) its work: for
    an S3 StoreSpec, reads bounded by `Patience.from_env()` and said through `on_wait`
    while they wait (issue 41, newuser8 I10: a silent endpoint held `gc` 11 minutes on its
    first HEAD); its writes are the ordinary client's. Any other store: `spec()`."""
    if not isinstance(spec, StoreSpec) or spec.kind != "s3":
        return spec()
    from epochgc.impl.store.patience import Patience
    from epochgc.impl.store.s3 import S3Store

    return S3Store(spec.location, spec.prefix, endpoint_url=spec.endpoint_url,
                   max_pool_connections=spec.connections, patience=Patience.from_env(),
                   on_wait=on_wait)


def sized_for(open_store: Callable[[], ObjectStore], threads: int) -> Callable[[], ObjectStore]:
    """The same store factory with a connection pool for `threads` concurrent users (a
    store that has no pool, or a factory that is not a StoreSpec, is returned as is)."""
    if isinstance(open_store, StoreSpec) and open_store.connections < threads:
        return replace(open_store, connections=threads)
    return open_store


def open_store(url: str, s3_endpoint: str | None = None) -> ObjectStore:
    return open_spec(parse_store_url(url, s3_endpoint))
