"""The delete phase, key by key: which keys a task really deleted (for the deletion record).

A Spark task deletes its eligible keys with `delete.delete_keys` and then emits one row per
key it deleted, plus one row of counts. The keys are spooled to a task-local temporary file
while they stream into the deletes, so a task holds only its failed keys in memory, never
its whole share of the eligible set.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator

from impl.gc.delete import DeleteStats, delete_keys
from impl.store.base import ObjectStore

DELETED = "D"
COUNTS = "C"
_SAMPLES = 5  # failed-delete messages each task reports to the driver
Row = tuple[str, str, int, float]


def delete_with_outcome(
    open_store: Callable[[], ObjectStore],
    batch_size: int,
    concurrency: int,
    emit_keys: bool,
    rows: Iterator[Row],
) -> Iterator[Row]:
    """Spark `mapPartitions` body over eligible rows (kind, key, size, age_s): yields, when
    `emit_keys` (a manifest was asked for), (DELETED, key, size, age_s) for every key that is
    gone now (deleted, or already gone); then (COUNTS, json of the task's DeleteStats and a
    few error samples, 0, 0.0)."""
    failed: dict[str, str] = {}

    def on_error(key: str, why: str) -> None:
        failed.setdefault(key, why)

    store = open_store()
    with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:

        def items() -> Iterator[tuple[str, int]]:
            for r in rows:
                if emit_keys:
                    spool.write(json.dumps([r[1], r[2], r[3]]) + "\n")
                yield r[1], r[2]

        try:
            stats = delete_keys(store, items(), batch_size, concurrency, on_error)
        finally:
            store.close()
        spool.seek(0)
        for line in spool:
            key, size, age = json.loads(line)
            if key not in failed:
                yield (DELETED, key, size, age)
    samples = [f"{k}: {why}" for k, why in list(failed.items())[:_SAMPLES]]
    yield (COUNTS, json.dumps({"stats": stats.as_dict(), "samples": samples}), 0, 0.0)


def parse_counts(row: Row) -> tuple[DeleteStats, list[str]]:
    doc = json.loads(row[1])
    return DeleteStats(**doc["stats"]), list(doc["samples"])
