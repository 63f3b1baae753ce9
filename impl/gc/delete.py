"""What one Spark task does in the delete phase: batched deletes, a few requests in flight."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from dataclasses import asdict, dataclass, fields

from impl.gc.pools import submitter
from impl.store.base import MAX_DELETE_BATCH, DeleteResult, ObjectStore, StoreError

_SAMPLES = 5  # failed-delete messages each task reports to the driver


@dataclass
class DeleteStats:
    deleted: int = 0
    errors: int = 0
    delete_requests: int = 0
    bytes_deleted: int = 0

    def add(self, other: DeleteStats) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def batches(items: Iterable[tuple[str, int]], size: int) -> Iterator[list[tuple[str, int]]]:
    batch: list[tuple[str, int]] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def delete_keys(
    store: ObjectStore,
    items: Iterable[tuple[str, int]],
    batch_size: int = MAX_DELETE_BATCH,
    concurrency: int = 4,
    on_error: Callable[[str, str], None] | None = None,
    pool: Executor | None = None,
) -> DeleteStats:
    """Delete (key, size) items in batches with at most `concurrency` requests in flight.
    `pool`: a long-lived pool of `concurrency` workers to borrow (`impl.gc.pools`).

    A StoreError for a whole request counts its keys as errors (they are listed again next
    round); any other exception is a bug or a crash and propagates.
    """
    if not 1 <= batch_size <= MAX_DELETE_BATCH:
        raise ValueError(f"batch size must be in 1..{MAX_DELETE_BATCH}, got {batch_size}")
    stats = DeleteStats()

    def one(batch: list[tuple[str, int]]) -> tuple[list[tuple[str, int]], DeleteResult]:
        keys = [k for k, _ in batch]
        try:
            return batch, store.delete_batch(keys)
        except StoreError as e:
            return batch, DeleteResult(len(keys), dict.fromkeys(keys, str(e)))

    def account(fut: Future[tuple[list[tuple[str, int]], DeleteResult]]) -> None:
        batch, result = fut.result()
        stats.delete_requests += 1
        stats.deleted += result.deleted
        stats.errors += len(result.errors)
        stats.bytes_deleted += sum(s for k, s in batch if k not in result.errors)
        if on_error is not None:
            for key, why in result.errors.items():
                on_error(key, why)

    with submitter(pool, max(1, concurrency), "epochgc-delete") as submit:
        pending: set[Future[tuple[list[tuple[str, int]], DeleteResult]]] = set()
        for batch in batches(items, batch_size):
            if len(pending) >= concurrency:  # bounded: never queue the whole key set
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    account(fut)
            pending.add(submit(one, batch))
        for fut in pending:
            account(fut)
    return stats


def delete_task(
    open_store: Callable[[], ObjectStore],
    batch_size: int,
    concurrency: int,
    rows: Iterator[tuple[str, str, int, float]],
) -> Iterator[tuple[dict[str, int], list[str]]]:
    """Spark `mapPartitions` body over eligible rows; yields this task's counts and a few
    "key: why" samples of failed deletes."""
    samples: list[str] = []

    def sample(key: str, why: str) -> None:
        if len(samples) < _SAMPLES:
            samples.append(f"{key}: {why}")

    store = open_store()
    try:
        items = ((r[1], r[2]) for r in rows)
        yield delete_keys(store, items, batch_size, concurrency, sample).as_dict(), samples
    finally:
        store.close()
