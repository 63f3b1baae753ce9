"""What one Spark task does in the delete phase: batched deletes, a few requests in flight,
each batch journaled before and after its request (`journal.py`).

Only the DeleteObjects request holds one of the `concurrency` delete slots; each batch's
STOP check and journal writes run in the same worker before and after it, outside the slot,
so batch k+1's intent is written while batch k deletes (issue 38, S3 at the limit: with the
three round trips and the serial STOP check inside the slot, a slot carried a request about
half the time). The order per batch is unchanged: intent durable, then the request, then
its outcome; the outcome rides in the next batch's intent when that batch is ready (the
listing holds it, waiting for a slot), else it is written alone (`JournalWriter.done`).
The STOP check is the task's "go on?" to its driver where it has one (`gate.py`)."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from dataclasses import asdict, dataclass, fields

from epochgc.impl.gc.beacon import Tally
from epochgc.impl.gc.journal import JournalWriter
from epochgc.impl.gc.killpoint import reach
from epochgc.impl.gc.pools import InlineExecutor, submitter
from epochgc.impl.store.base import (
    MAX_DELETE_BATCH,
    DeleteResult,
    ObjectStore,
    StoreError,
    send_clock,
)

# (key, size, age_s, version): what a delete needs (the version listed, for a conditional
# delete), and what the journal and manifest record (all but the version).
Doomed = tuple[str, int, float, str]
# Test-only (issue 29, signal tests): a path; the first batch journaled in this process
# creates `<path>.reached` and waits for the round's STOP marker, so a test can signal
# the `epochgc gc` process at a known point instead of sleeping and hoping.
PAUSE_ENV = "EPOCHGC_GC_TEST_PAUSE"
# Test-only (issue 41): a path; the first batch whose intent is written in this process
# creates `<path>.reached` and is held there, its request never sent, until its task is
# killed (or `_PAUSE_LIMIT_S`): a request that does not end, so that a test sees a stop
# not wait for it without bound.
HOLD_ENV = "EPOCHGC_GC_TEST_HOLD"
_PAUSE_LIMIT_S = 300.0
# Workers per delete slot: a batch's chain is STOP check, intent, request, outcome, one
# round trip each, of which only the request holds a slot; four chains per slot keep it busy.
PIPELINE = 4


@dataclass
class DeleteStats:
    deleted: int = 0
    already_gone: int = 0  # absent when deleted: removed by someone else
    changed: int = 0  # skipped by a conditional delete: rewritten since it was listed
    errors: int = 0
    delete_requests: int = 0
    bytes_deleted: int = 0
    stopped: int = 0  # 1 if the task stopped early at the round's STOP marker
    # Issue 30 (production's "backpressure seconds"): how long the task's listing waited
    # for a free delete slot (every one of its `concurrency` requests in flight; with one
    # request run in the task's own thread, the time of each request).
    backpressure_s: float = 0.0

    def add(self, other: DeleteStats) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def batches(items: Iterable[Doomed], size: int) -> Iterator[list[Doomed]]:
    batch: list[Doomed] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def delete_keys(
    store: ObjectStore,
    items: Iterable[Doomed],
    batch_size: int = MAX_DELETE_BATCH,
    concurrency: int = 4,
    on_error: Callable[[str, str], None] | None = None,
    pool: Executor | None = None,
    journal: JournalWriter | None = None,
    tally: Tally | None = None,
) -> DeleteStats:
    """Delete (key, size, age_s) items in batches with at most `concurrency` requests in
    flight. `pool`: a long-lived pool of `concurrency` workers to borrow (`impl.gc.pools`).
    `journal`: each batch is journaled before its request (a batch that cannot be is not
    sent: the StoreError propagates) and after it; before each batch's intent the round's
    STOP marker is checked (in the batch's worker, beside the other batches' requests), and
    once it is seen no further batch starts (those whose intent is written finish and are
    journaled). Up to `PIPELINE` x `concurrency` batches are in the workers at once, at
    most `concurrency` of them in a request. `tally`: keys deleted, added as each answer
    arrives (for the progress display only; what is recorded comes from the journal).

    A StoreError for a whole request counts its keys as errors (they are listed again next
    round); any other exception is a bug or a crash and propagates.
    """
    if not 1 <= batch_size <= MAX_DELETE_BATCH:
        raise ValueError(f"batch size must be in 1..{MAX_DELETE_BATCH}, got {batch_size}")
    stats = DeleteStats()

    slots = threading.BoundedSemaphore(concurrency)
    stop = threading.Event()  # a worker saw the STOP marker: no further batch starts

    def one(batch: list[Doomed]) -> tuple[list[Doomed], DeleteResult | None]:
        asked = send_clock()  # before the "go on?": the batch's bound counts from here
        if journal is not None and (stop.is_set() or journal.stop_requested()):
            stop.set()
            journal.not_coming()  # the outcomes that waited for this intent go alone
            return batch, None  # not journaled, not sent: listed again next round
        with _bounded(store, journal, asked):
            seq = journal.intent(batch) if journal is not None else 0
            reach("intent-written")
            _test_hold()
            with slots:  # the request alone holds a slot: the journal writes overlap others'
                result = _send(store, batch)
        reach("batch-deleted")
        if tally is not None:
            tally.add(deleted=result.deleted)
        if journal is not None:
            journal.done(seq, result)
            reach("done-written")
            _test_pause(journal)
        return batch, result

    def account(fut: Future[tuple[list[Doomed], DeleteResult | None]]) -> None:
        batch, result = fut.result()
        if result is None:
            stats.stopped = 1
            return
        stats.delete_requests += 1
        stats.deleted += result.deleted
        stats.already_gone += len(result.gone)
        stats.changed += len(result.changed)
        stats.errors += len(result.errors)
        kept = result.errors.keys() | result.gone | result.changed
        stats.bytes_deleted += sum(s for k, s, _, _ in batch if k not in kept)
        if on_error is not None:
            for key, why in result.errors.items():
                on_error(key, why)

    inline = pool is None and concurrency == 1
    if inline:
        # One request at a time: run it in this thread. A pool thread would only hand the
        # interpreter lock back and forth with the caller's listing (issue 29). A listing
        # in lister threads (S3's default) still runs ahead meanwhile; one in this thread
        # stands still while the request runs.
        pool = InlineExecutor()
    # The test hook pauses one worker until STOP: with one chain per slot the next batch's
    # STOP check waits for it, so the paused batch is the only one deleted (as the signal
    # tests rely on); the pipeline's depth changes no record, only what overlaps.
    depth = max(1, concurrency) * (1 if os.environ.get(PAUSE_ENV) else PIPELINE)
    with submitter(pool, depth, "epochgc-delete") as submit:
        pending: set[Future[tuple[list[Doomed], DeleteResult | None]]] = set()
        try:
            for batch in batches(items, batch_size):
                if journal is not None:
                    # This batch is ready: the outcomes of the batches that finish before
                    # its intent is written ride in that intent, no PUT of their own
                    # (issue 38); with no batch ready (the listing behind) each goes alone.
                    journal.coming()
                submitted = False
                try:
                    if len(pending) >= depth:  # bounded: never queue the whole key set
                        waited = time.monotonic()
                        done, pending = wait(pending, return_when=FIRST_COMPLETED)
                        stats.backpressure_s += time.monotonic() - waited
                        for fut in done:
                            account(fut)
                    # A finished batch's exception (a bug or a crash) stops the loop now,
                    # not `depth` batches later.
                    for fut in [f for f in pending if f.done()]:
                        pending.discard(fut)
                        account(fut)
                    if stop.is_set():
                        stats.stopped = 1
                        break
                    sent = time.monotonic()
                    pending.add(submit(one, batch))
                    submitted = True
                    if inline:  # the listing waited for this request: the metric says so
                        stats.backpressure_s += time.monotonic() - sent
                finally:
                    if journal is not None and not submitted:
                        journal.not_coming(flush=False)  # the end of the task flushes
        finally:
            # Whatever ends the loop (a listing error too), the batches in flight finish
            # and are journaled before the task ends, their outcomes too.
            wait(pending)
            if journal is not None:
                _flush(journal)
        for fut in pending:
            account(fut)
    return stats


def _bounded(store: ObjectStore, journal: JournalWriter | None,
             asked: float) -> contextlib.ExitStack:
    """A batch's intent and delete are sent within the journal's `send_within_s` of the
    "go on?" asked at `asked` (issue 38, review rev38m finding 2: the recovery's wait rests
    on it, `bounds.py`); past it a request is not sent (StoreError; a delete's keys are
    then resolved by asking the store)."""
    bound = contextlib.ExitStack()
    if journal is not None and journal.send_within_s is not None:
        deadline = asked + journal.send_within_s
        bound.enter_context(store.send_by(deadline))
        if journal.store is not store:
            bound.enter_context(journal.store.send_by(deadline))
    return bound


def _flush(journal: JournalWriter) -> None:
    """The outcomes still waiting for an intent, written alone. If one cannot be, its batch
    is an intent without outcome, resolved by asking the store; the error propagates unless
    another already does (`sys.exc_info`: this runs in a `finally`)."""
    if sys.exc_info()[0] is None:
        journal.flush()
        return
    with contextlib.suppress(StoreError):
        journal.flush()


def _send(store: ObjectStore, batch: list[Doomed]) -> DeleteResult:
    try:
        # Conditional: an object rewritten since it was listed is skipped (`changed`).
        return store.delete_if_unchanged([(k, v) for k, _, _, v in batch])
    except StoreError as e:
        return DeleteResult(len(batch), dict.fromkeys((k for k, _, _, _ in batch), str(e)))


def _test_pause(journal: JournalWriter) -> None:
    path = os.environ.get(PAUSE_ENV)
    if not path:
        return
    try:
        os.close(os.open(path + ".reached", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return  # only the first batch of the round pauses
    deadline = time.monotonic() + _PAUSE_LIMIT_S
    while not journal.stop_requested() and time.monotonic() < deadline:
        time.sleep(0.02)


def _test_hold() -> None:
    path = os.environ.get(HOLD_ENV)
    if not path:
        return
    try:
        os.close(os.open(path + ".reached", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return  # only the first batch of the round is held
    time.sleep(_PAUSE_LIMIT_S)
