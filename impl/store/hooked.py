"""A wrapper that runs a hook before each request of any ObjectStore, then passes the
request on unchanged: the base of the fault injector (`faulty.py`) and of the GC watch's
look, which HEADs the round's STOP marker between the look's own requests (`watch.py`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from epochgc.impl.store.base import (
    DeleteResult,
    ListPage,
    ObjectInfo,
    ObjectStore,
    Outcome,
    Stamp,
    Versioned,
)


class HookedStore(ObjectStore):
    """`before(what)` runs before each request to `inner` (`what` names it for messages);
    whatever it raises is the request's failure."""

    def __init__(self, inner: ObjectStore,
                 before: Callable[[str], None] = lambda _what: None) -> None:
        self.inner = inner
        self._before = before

    def _gate(self, what: str) -> None:
        self._before(what)

    def describe(self) -> str:
        return self.inner.describe()

    def send_by(self, deadline: float | None) -> contextlib.AbstractContextManager[None]:
        return self.inner.send_by(deadline)

    def put(self, key: str, data: bytes) -> None:
        self._gate(f"put {key!r}")
        self.inner.put(key, data)

    def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        self._gate(f"get {key!r}")
        return self.inner.get(key, start, end)

    def head(self, key: str) -> ObjectInfo | None:
        self._gate(f"head {key!r}")
        return self.inner.head(key)

    def stamp(self, key: str) -> Stamp | None:
        self._gate(f"head {key!r}")
        return self.inner.stamp(key)

    def list_page(self, prefix: str, start_after: str | None = None, limit: int = 1000,
                  until: str | None = None) -> ListPage:
        self._gate(f"list {prefix!r}")
        return self.inner.list_page(prefix, start_after, limit, until)

    def delete_batch(self, keys: list[str]) -> DeleteResult:
        self._gate(f"delete of {len(keys)} key(s)")
        return self.inner.delete_batch(keys)

    def delete_if_unchanged(self, items: list[tuple[str, str]]) -> DeleteResult:
        self._gate(f"delete of {len(items)} key(s)")
        return self.inner.delete_if_unchanged(items)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        self._gate(f"put {key!r}")
        return self.inner.put_if_absent(key, data)

    def require_conditional_writes(self) -> None:
        self.inner.require_conditional_writes()

    def create_if_absent(self, key: str, data: bytes) -> str | None:
        self._gate(f"put {key!r}")
        return self.inner.create_if_absent(key, data)

    def replace_if_match(self, key: str, data: bytes, version: str) -> str | None:
        self._gate(f"put {key!r}")
        return self.inner.replace_if_match(key, data, version)

    def delete_if_match(self, key: str, version: str) -> Outcome:
        self._gate(f"delete {key!r}")
        return self.inner.delete_if_match(key, version)

    def get_versioned(self, key: str, limit: int) -> Versioned | None:
        self._gate(f"get {key!r}")
        return self.inner.get_versioned(key, limit)

    def close(self) -> None:
        self.inner.close()
