"""Broker-side cache of the cluster epoch: bounded TTL, explicit invalidation, injected
clock. `lag()` freezes it (a stale cache is a fault the harness injects); a stale epoch only
costs stale rejections, never safety."""

from __future__ import annotations

from collections.abc import Callable


class EpochCache:
    def __init__(
        self, fetch: Callable[[], int], clock: Callable[[], float], ttl: float
    ) -> None:
        self._fetch = fetch
        self._clock = clock
        self.ttl = ttl
        self._value: int | None = None
        self._at = 0.0
        self._frozen = False
        self.refreshes = 0

    def get(self) -> int:
        now = self._clock()
        if self._value is None or (not self._frozen and now - self._at >= self.ttl):
            self._value = self._fetch()
            self._at = now
            self.refreshes += 1
        return self._value

    def invalidate(self) -> None:
        """Drop the cached value (e.g. after a stale rejection); also ends a lag."""
        self._value = None
        self._frozen = False

    def lag(self, value: int | None = None) -> None:
        """Freeze the cache (at `value` if given) until `invalidate`."""
        if value is not None:
            self._value = value
            self._at = self._clock()
        self._frozen = True

    @property
    def cached(self) -> int | None:
        return self._value
