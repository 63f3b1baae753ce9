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

import time
from collections.abc import Callable

from epochgc.impl.store.base import ObjectStore, StoreError
from epochgc.impl.store.hooked import HookedStore


class FaultyStore(HookedStore):
    def __init__(self, inner: ObjectStore, sleep: Callable[[float], None] = time.sleep) -> None:
        super().__init__(inner)
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
