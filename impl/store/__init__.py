"""Object storage: one small interface, a local-directory backend and an S3 backend."""

from epochgc.impl.store.base import (
    MAX_DELETE_BATCH,
    MAX_PAGE_SIZE,
    DeleteResult,
    ListPage,
    ObjectInfo,
    ObjectStore,
    StoreError,
)
from epochgc.impl.store.url import StoreSpec, open_spec, open_store, parse_store_url

__all__ = [
    "MAX_DELETE_BATCH",
    "MAX_PAGE_SIZE",
    "DeleteResult",
    "ListPage",
    "ObjectInfo",
    "ObjectStore",
    "StoreError",
    "StoreSpec",
    "open_spec",
    "open_store",
    "parse_store_url",
]
