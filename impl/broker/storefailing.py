"""A node's periodic services whose object-store requests keep failing (issue 41,
newuser16 S8).

A reconciler that cannot write its L1 objects (a full disk, a file-size limit, a store
refusing writes) holds GC back for good: no L1, so LRO never moves, so M(p) and the
cluster's M stay where they are and every L0 object is kept. It was logged only at info
("service round failed", every round), and `cluster status` exited 0. Now a service whose
rounds fail on the store `ROUNDS` times in a row is said at warning (then again every
`REPEAT_S`, and once when it writes again), and the node's `status` answer carries it
(`failing()`), which `cluster status` says per node, exit 1.

Only `StoreError` counts (impl/store/base.py: the store's own retries are over); a round
refused for other reasons (not the leader, a fence) stays at info, as before.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

log = logging.getLogger("epochgc.broker")

# Rounds failed in a row before the service is said failing: one failed request is a
# flake the next round retries; three in a row (1.5 s at the default reconcile interval)
# is a store that does not take this node's writes.
ROUNDS = 3
REPEAT_S = 300.0  # a failing service is said again this often, not every round

# What each service writes, in words (Broker.start's plan).
WRITES = {
    "_reconcile_tick": "L1 objects (reconciling; GC cannot advance until it writes)",
    "publish_health": "its health report",
    "_publish_tick": "the partition table",
    "_mint_tick": "epochs",
    "_housekeep_tick": "housekeeping",
    "_barrier_tick": "the epoch barrier",
}


@dataclass(frozen=True)
class Streak:
    error: str
    rounds: int
    since: float  # wall clock of the first failed round
    said_at: float | None = None  # monotonic clock of the last warning


class StoreFailing:
    def __init__(self, wall: Callable[[], float],
                 mono: Callable[[], float] = time.monotonic) -> None:
        self._wall, self._mono = wall, mono
        self._streaks: dict[str, Streak] = {}

    def failed(self, service: str, error: str) -> None:
        old = self._streaks.get(service)
        s = (Streak(error, 1, self._wall()) if old is None
             else replace(old, error=error, rounds=old.rounds + 1))
        now = self._mono()
        if s.rounds >= ROUNDS and (s.said_at is None or now - s.said_at >= REPEAT_S):
            log.warning("object store failing: %s cannot be written", WRITES.get(service, service),
                        extra={"service": service, "error": error, "rounds": s.rounds})
            s = replace(s, said_at=now)
        else:
            log.info("service round failed", extra={"service": service, "error": error})
        self._streaks[service] = s

    def ok(self, service: str) -> None:
        s = self._streaks.pop(service, None)
        if s is not None and s.said_at is not None:
            log.warning("object store writes again", extra={"service": service,
                                                             "rounds_failed": s.rounds})

    def failing(self) -> dict[str, dict[str, Any]]:
        """Service -> what fails, for the services failing `ROUNDS` times or more in a row."""
        return {svc: {"writes": WRITES.get(svc, svc), "error": s.error, "rounds": s.rounds,
                      "since": s.since}
                for svc, s in sorted(self._streaks.items()) if s.rounds >= ROUNDS}
