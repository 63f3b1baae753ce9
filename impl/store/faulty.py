"""A fault-injecting wrapper around any ObjectStore: a test hook (used by `epochgc chaos`
for a directory store; an s3:// store gets a TCP proxy in front of the server instead).

`mode` is flipped at run time, from any thread:
  None     every request goes through;
  "slow"   every request waits `delay` seconds first;
  "fail"   every request raises StoreError, as a server answering 5xx would;
  "down"   every request raises StoreError after `delay` (a connect timeout).
Nothing is partly done: a failed request never reached the store.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from epochgc.impl.store.base import (
    DeleteResult,
    ListPage,
    ObjectInfo,
    ObjectStore,
    Outcome,
    StoreError,
    Versioned,
)


class FaultyStore(ObjectStore):
    def __init__(self, inner: ObjectStore, sleep: Callable[[float], None] = time.sleep) -> None:
        self.inner = inner
        self.mode: str | None = None
        self.delay = 0.5
        self._sleep = sleep

    def _gate(self, what: str) -> None:
        mode = self.mode
        if mode == "slow":
            self._sleep(self.delay)
        elif mode == "fail":
            raise StoreError(f"{what} in {self.inner.describe()} failed: 503 Slow Down "
                             "(injected)")
        elif mode == "down":
            self._sleep(self.delay)
            raise StoreError(f"{what} in {self.inner.describe()} failed: unreachable "
                             "(injected)")

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
