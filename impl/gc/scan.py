"""What one Spark task does in the listing phase, as plain Python (testable without Spark).

Each prefix is listed in key order, which inside a prefix is epoch order, and listing stops
at the first well-formed key whose epoch is above M: every later key has an epoch at least
as large, so the work is proportional to the garbage, not to the bucket.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from epochgc.impl.gc.beacon import Beacon, BeaconTarget, Tally
from epochgc.impl.gc.journal import current_attempt
from epochgc.impl.store.base import ObjectStore
from epochgc.model.keys import epoch_collectible, gc_eligible, parse_key, prefix_path

# Rows flowing through the Spark job: (kind, key, size, age_s, version): `version` is the
# listed object's (`ObjectInfo.version`), which a conditional delete compares.
ELIGIBLE = "E"
MALFORMED = "M"
REFUSED = "R"  # an entry the store would not list as an object (a link): never deleted
STATS = "S"
Row = tuple[str, str, int, float, str]

# Test-only (issue 41, signal tests): a path; the first page listed in this process creates
# `<path>.reached` and waits until `<path>.release` exists (or the task is killed), so a
# test can signal `epochgc gc` while a task is listing instead of sleeping and hoping.
LIST_PAUSE_ENV = "EPOCHGC_GC_TEST_LIST_PAUSE"
_PAUSE_LIMIT_S = 300.0  # a bound for a test that never releases, not a timing assumption
_paused = False


def _pause_once() -> None:
    global _paused
    if _paused:  # every page asks: one bool once the hook has run, or ...
        return
    hold = os.environ.get(LIST_PAUSE_ENV)
    if not hold:  # ... one environment lookup (no hook: every run but the tests')
        return
    _paused = True
    Path(f"{hold}.reached").touch()
    limit = time.monotonic() + _PAUSE_LIMIT_S
    while not Path(f"{hold}.release").exists() and time.monotonic() < limit:
        time.sleep(0.05)


@dataclass
class ScanStats:
    listed: int = 0  # keys examined: up to and including the first key above M
    fetched: int = 0  # keys the store returned (a page may run past the stop key)
    list_requests: int = 0
    eligible: int = 0
    eligible_bytes: int = 0
    skipped_too_new: int = 0
    skipped_too_young: int = 0
    malformed: int = 0
    refused: int = 0

    def add(self, other: ScanStats) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def scan_prefix(
    store: ObjectStore,
    prefix: int,
    m: int,
    now: float,
    grace_s: float,
    page_size: int,
    stats: ScanStats,
    tally: Tally | None = None,
    halted: Callable[[], bool] | None = None,
) -> Iterator[Row]:
    """Eligible and malformed keys of one prefix, in key order; counts into `stats` (and
    the keys listed into `tally`, page by page, for the progress display). `halted`, asked
    before each list request: True ends the listing there (the round was stopped)."""
    start_after: str | None = None
    path = prefix_path(prefix)
    # Every well-formed key from here on has an epoch above M: a backend that can stop
    # there (a directory) does, so listing work matches the examined keys.
    until = f"{path}{m + 1:018d}"
    # The per-key counts are kept in locals and added to `stats` page by page (and when the
    # generator stops early): the per-key loop is the job's hot path (issue 29).
    while True:
        if halted is not None and halted():
            return
        page = store.list_page(path, start_after, page_size, until)
        stats.list_requests += 1
        stats.fetched += len(page.objects)
        _pause_once()
        for key, why in page.refused:
            stats.refused += 1
            yield (REFUSED, f"{key} ({why})", 0, 0.0, "")
        listed = eligible = eligible_bytes = 0
        try:
            for obj in page.objects:
                listed += 1
                age = obj.age(now)
                # The model decides; the common case (eligible) costs one parse of the key.
                verdict = gc_eligible(obj.key, age, m, grace_s)
                if verdict.eligible:
                    eligible += 1
                    eligible_bytes += obj.size
                    yield (ELIGIBLE, obj.key, obj.size, age, obj.version)
                elif verdict.error is not None:
                    # Never deleted, never a reason to stop: it has no epoch to compare.
                    stats.malformed += 1
                    yield (MALFORMED, obj.key, obj.size, age, "")
                elif epoch_collectible(parse_key(obj.key).epoch, m):
                    stats.skipped_too_young += 1
                else:
                    stats.skipped_too_new += 1
                    return  # the early stop: nothing after this key can be <= M
        finally:
            stats.listed += listed
            stats.eligible += eligible
            stats.eligible_bytes += eligible_bytes
            if tally is not None:
                tally.add(listed=listed)
        if not page.truncated or not page.objects:
            return
        start_after = page.objects[-1].key


def scan_task(
    open_store: Callable[[], ObjectStore],
    m: int,
    now: float,
    grace_s: float,
    page_size: int,
    prefixes: Iterator[int],
    *,
    beacon: BeaconTarget | None = None,
) -> Iterator[Row]:
    """Spark `mapPartitions` body: scan this task's prefixes, then emit one stats row.
    `beacon`: where to send the running count of keys listed (`impl.gc.beacon`)."""
    store = open_store()
    stats = ScanStats()
    try:
        with Beacon(beacon, current_attempt().name()) as tally:
            for p in prefixes:
                yield from scan_prefix(store, p, m, now, grace_s, page_size, stats, tally)
    finally:
        store.close()
    yield stats_row(stats.as_dict())


def stats_row(counts: dict[str, int]) -> Row:
    # Stats ride in the key column as "name=value,..." so every row has one schema.
    return (STATS, ",".join(f"{k}={v}" for k, v in counts.items()), 0, 0.0, "")


def parse_stats_row(row: Row) -> dict[str, int]:
    return {k: int(v) for k, v in (item.split("=") for item in row[1].split(","))}


def split_prefixes(prefixes: int, tasks: int) -> list[list[int]]:
    """Contiguous, near-equal ranges of prefixes, one per task."""
    tasks = max(1, min(tasks, prefixes))
    bounds = [prefixes * i // tasks for i in range(tasks + 1)]
    return [list(range(bounds[i], bounds[i + 1])) for i in range(tasks)]
