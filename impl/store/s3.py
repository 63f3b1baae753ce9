"""S3 backend through boto3.

Credentials come only from boto3's standard chain (environment, shared config, instance
role): this module never accepts or prints them. Throttling is botocore's adaptive retry
mode (client-side rate limiting plus backoff), not a hand-written loop.
"""

from __future__ import annotations

import os
from typing import Any

from impl.store.base import (
    MAX_PAGE_SIZE,
    DeleteResult,
    ListPage,
    ObjectInfo,
    ObjectStore,
    StoreError,
    check_batch,
    check_key,
)

# S3 error codes that mean "the key is not there", which for a delete is success.
_GONE = frozenset({"NoSuchKey", "404", "NotFound"})


class S3Store(ObjectStore):
    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        max_attempts: int | None = None,
        max_pool_connections: int = 16,
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.endpoint_url = endpoint_url
        self.max_attempts = max_attempts
        self.max_pool_connections = max_pool_connections
        self._client: Any = None

    # A boto3 client cannot be pickled; Spark tasks rebuild it from the settings.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3  # imported lazily: local-only users do not need boto3
            from botocore.config import Config

            retries: dict[str, Any] = {"mode": "adaptive"}
            # Explicit, else AWS_MAX_ATTEMPTS / the config file (boto3's chain), else 10.
            if self.max_attempts is not None:
                retries["max_attempts"] = self.max_attempts
            elif "AWS_MAX_ATTEMPTS" not in os.environ:
                retries["max_attempts"] = 10
            config = Config(
                retries=retries,
                max_pool_connections=self.max_pool_connections,
            )
            self._client = boto3.session.Session().client(
                "s3", endpoint_url=self.endpoint_url, config=config
            )
        return self._client

    def describe(self) -> str:
        where = f"s3://{self.bucket}/{self.prefix}"
        return where + (f" at {self.endpoint_url}" if self.endpoint_url else "")

    def _full(self, key: str) -> str:
        return self.prefix + check_key(key)

    def _error(self, what: str, e: Exception) -> StoreError:
        return StoreError(f"{what} in {self.describe()} failed: {_short(e)}")

    def put(self, key: str, data: bytes) -> None:
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._full(key), Body=data)
        except Exception as e:  # botocore raises many unrelated types; all are store errors
            raise self._error(f"put {key!r}", e) from e

    def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        args: dict[str, Any] = {"Bucket": self.bucket, "Key": self._full(key)}
        if start is not None or end is not None:
            if end is not None and end <= (start or 0):
                return b""
            last = "" if end is None else str(end - 1)  # HTTP ranges are inclusive
            args["Range"] = f"bytes={start or 0}-{last}"
        try:
            body: bytes = self.client.get_object(**args)["Body"].read()
            return body
        except Exception as e:
            if _code(e) in _GONE:
                raise StoreError(f"{key!r} does not exist in {self.describe()}") from None
            if _code(e) == "InvalidRange":
                return b""
            raise self._error(f"get {key!r}", e) from e

    def head(self, key: str) -> ObjectInfo | None:
        try:
            r = self.client.head_object(Bucket=self.bucket, Key=self._full(key))
        except Exception as e:
            if _code(e) in _GONE:
                return None
            raise self._error(f"head {key!r}", e) from e
        return ObjectInfo(key, int(r["ContentLength"]), r["LastModified"].timestamp())

    def list_page(
        self,
        prefix: str,
        start_after: str | None = None,
        limit: int = MAX_PAGE_SIZE,
        until: str | None = None,  # S3 has no end bound: pages are always full
    ) -> ListPage:
        args: dict[str, Any] = {
            "Bucket": self.bucket,
            "Prefix": self.prefix + prefix,
            "MaxKeys": min(limit, MAX_PAGE_SIZE),
        }
        if start_after:
            args["StartAfter"] = self.prefix + start_after
        try:
            r = self.client.list_objects_v2(**args)
        except Exception as e:
            raise self._error(f"list {prefix!r}", e) from e
        cut = len(self.prefix)
        objects = [
            ObjectInfo(o["Key"][cut:], int(o["Size"]), o["LastModified"].timestamp())
            for o in r.get("Contents", [])
        ]
        return ListPage(objects, truncated=bool(r.get("IsTruncated")))

    def delete_batch(self, keys: list[str]) -> DeleteResult:
        batch = check_batch(keys)
        result = DeleteResult(len(batch))
        if not batch:
            return result
        objects = [{"Key": self._full(k)} for k in batch]
        try:
            # Quiet: the reply lists only failures, which is all we need.
            r = self.client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": objects, "Quiet": True}
            )
        except Exception as e:
            msg = str(self._error("delete batch", e))
            result.errors.update(dict.fromkeys(batch, msg))
            return result
        cut = len(self.prefix)
        for err in r.get("Errors", []):
            if err.get("Code") in _GONE:
                continue
            result.errors[err["Key"][cut:]] = f"{err.get('Code')}: {err.get('Message', '')}"
        return result

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _code(e: Exception) -> str:
    response = getattr(e, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


def _short(e: Exception) -> str:
    code = _code(e)
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return f"{code}: {text}" if code and code not in text else text
