"""One Spark task of a real (not dry) round: list its prefixes and delete eligible keys
while the listing continues (issue 12; SPEC R21a).

Deleting an eligible key is safe whatever else the listing holds: safety depends only on M
and the key (R23/R24). So a task does not wait for the whole listing: eligible keys flow
page by page into `delete.delete_keys`, which keeps a few batches in flight. Before its
FIRST delete the task re-reads the reports (started with the listing, finished before that
delete: see `list_and_delete_task`); if the round is now blocked or M moved backwards, the
task deletes nothing and says why (the driver then refuses the round).
Malformed keys and refused entries are never deleted; they only make the outcome a failure.
What the task deleted is in the round's journal (`journal.py`), written batch by batch; its
one result (`TaskResult`) carries the listing's counts, samples and the re-read's verdict.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from epochgc.impl.gc.beacon import Beacon, BeaconTarget, Tally
from epochgc.impl.gc.delete import DeleteStats, Doomed, delete_keys
from epochgc.impl.gc.journal import Attempt, JournalTarget, JournalWriter, current_attempt
from epochgc.impl.gc.pools import TaskPools
from epochgc.impl.gc.recheck import Go, Verdict, recheck_before_delete
from epochgc.impl.gc.reports import REPORT_READERS, read_cluster_view
from epochgc.impl.gc.scan import ELIGIBLE, MALFORMED, Row, ScanStats, scan_prefix
from epochgc.impl.store.base import ObjectStore

_SAMPLES = 20  # malformed keys, refused entries and failed deletes each task reports
_CHUNK = 1000  # rows a lister thread hands over at once (about one page)
# Chunks queued per lister thread: with one chunk in each lister's hand, how far the
# listing may run ahead of the task's deletes (tests assert this bound, not a timing).
HANDOFF_PER_LISTER = 2
LISTER_THREAD = "epochgc-lister"


def listed(
    store: ObjectStore,
    prefixes: Iterable[int],
    m: int,
    now: float,
    grace_s: float,
    page_size: int,
    stats: ScanStats,
    threads: int,
    tally: Tally | None = None,
    halted: Callable[[], bool] | None = None,
) -> Generator[Row, None, None]:
    """The rows of `scan.scan_prefix` over `prefixes`, listed by `threads` threads (each
    prefix by one thread, in key order; prefixes in no particular order). On a far-away
    store a list request costs a round trip, and one lister in front of N delete threads
    would be the bottleneck: the listers run ahead of the deletes through a bounded queue.
    Closing the generator stops the listers. `tally`: keys listed, as they are. `halted`:
    asked before each list request (`scan_prefix`); True ends the listing."""
    if threads <= 1:
        for p in prefixes:
            yield from scan_prefix(store, p, m, now, grace_s, page_size, stats, tally, halted)
        return
    todo = iter(prefixes)
    lock = threading.Lock()
    stop = threading.Event()
    handoff: queue.Queue[list[Row] | BaseException | ScanStats] = queue.Queue(
        HANDOFF_PER_LISTER * threads)

    def put(item: list[Row] | BaseException | ScanStats) -> bool:
        while not stop.is_set():
            try:
                handoff.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def lister() -> None:
        mine = ScanStats()  # per thread: ScanStats.add is not atomic
        try:
            while not stop.is_set():
                with lock:
                    p = next(todo, None)
                if p is None:
                    break
                chunk: list[Row] = []
                for row in scan_prefix(store, p, m, now, grace_s, page_size, mine, tally,
                                       halted):
                    chunk.append(row)
                    if len(chunk) == _CHUNK:
                        if not put(chunk):
                            return
                        chunk = []
                if chunk and not put(chunk):
                    return
        except BaseException as e:  # handed to the consumer, which re-raises it
            put(e)
        put(mine)

    workers = [threading.Thread(target=lister, name=f"{LISTER_THREAD}-{i}", daemon=True)
               for i in range(threads)]
    for w in workers:
        w.start()
    try:
        finished = 0
        while finished < threads:
            item = handoff.get()
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, ScanStats):
                stats.add(item)
                finished += 1
                continue
            yield from item
    finally:
        stop.set()
        for w in workers:
            w.join()


def recheck(
    store: ObjectStore,
    m: int,
    clock: Callable[[], float],
    max_report_age_s: float,
    expect: tuple[str, ...] = (),
    pool: Executor | None = None,
) -> Verdict:
    """This task's verdict for its deletes with `m` (`recheck_before_delete`): the re-read
    of M, its reads in flight together (`reports.REPORT_READERS`; the reports the driver
    read, `expect`, alongside the listing), report ages as of `clock()`."""
    view = read_cluster_view(store, clock(), max_report_age_s, REPORT_READERS, expect, pool)
    return recheck_before_delete(m, view.gc_epoch())


class StopSeen:
    """Whether the round's STOP marker exists (or its driver is gone), asked before each
    list request (issue 41: STOP stopped a task's deletes but not its listing, which went
    on to its next full batch and another before a delete looked, 8-54 s on S3). The store
    is asked (one HEAD) at most once every `every_s` seconds of `monotonic`, the driver's
    life (a local read) every time: a HEAD per list page doubled a round's requests on S3,
    and a second's listing is what a stop may still cost. Once seen, no further request."""

    def __init__(self, journal: JournalWriter, every_s: float = 1.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._journal = journal
        self._every_s, self._monotonic = every_s, monotonic
        self._next = float("-inf")
        self.seen = False

    def __call__(self) -> bool:
        if self.seen:
            return True
        if self._journal.driver_gone():
            self.seen = True
            return True
        now = self._monotonic()
        if now >= self._next:
            self._next = now + self._every_s  # lister threads may race here: a look more
            if self._journal.stop_requested():
                self.seen = True  # a plain bool: lister threads only ever set it to True
        return self.seen


@dataclass(frozen=True)
class TaskResult:
    """What one task attempt returns to the driver. Its deletions are NOT counted from
    here: they are in the journal, which every attempt (failed, retried, speculative)
    writes. `journal` holds the entries this attempt wrote there, as written (name under the
    journal -> bytes; empty past `JournalTarget.known_limit`): the driver's read-back takes them
    instead of a GET each, and reads from the store only what did not come back."""

    attempt: Attempt
    scanned: ScanStats
    deleted: DeleteStats  # this attempt's own view, for its logs; the driver reads the journal
    verdict: Verdict | None  # the re-read's; None when the task had nothing to delete
    malformed: tuple[str, ...] = ()  # samples
    refused: tuple[str, ...] = ()  # samples of refused entries ("key (why)")
    error_samples: tuple[str, ...] = ()
    journal: Mapping[str, bytes] = field(default_factory=dict)


def list_and_delete_task(
    open_store: Callable[[], ObjectStore],
    m: int,
    now: float,
    grace_s: float,
    page_size: int,
    batch_size: int,
    concurrency: int,
    list_concurrency: int,
    clock: Callable[[], float],
    max_report_age_s: float,
    prefixes: Iterator[int],
    *,
    journal: JournalTarget,
    report_keys: tuple[str, ...] = (),
    pools: TaskPools | None = None,
    attempt: Attempt | None = None,
    beacon: BeaconTarget | None = None,
    list_stop_every_s: float = 1.0,
) -> Iterator[TaskResult]:
    """Spark `mapPartitions` body: yields one `TaskResult`. Every delete batch is journaled
    under `journal` (before and after its request) as this attempt (`attempt`, default the
    running Spark task's). `report_keys`: the reports the driver read, read again alongside
    the re-read's listing. `pools`: long-lived pools to borrow instead of starting threads
    (`impl.gc.pools`; for REPORT_READERS readers and `concurrency` deleters). `beacon`:
    where to send the running counts of keys listed and deleted (`impl.gc.beacon`).
    `list_stop_every_s`: how often the listing asks the store for the STOP marker
    (`StopSeen`)."""
    scanned = ScanStats()
    malformed: list[str] = []
    refused: list[str] = []
    failed: dict[str, str] = {}
    verdict: list[Verdict] = []
    store = open_store()
    me = attempt if attempt is not None else current_attempt()

    def on_error(key: str, why: str) -> None:
        if len(failed) < _SAMPLES:
            failed.setdefault(key, why)

    jstore = store if journal.open_store is None else journal.open_store()
    writer = JournalWriter(jstore, journal, me)
    # The re-read of M runs while the first pages are listed (issue 12: after the
    # first page it cost three more round trips before any delete). It keeps the order
    # the model needs (SPEC R31: `gc_compute`, then deletes each checked against that
    # M): it starts after the driver computed M (this task exists only with it), and
    # the task's first delete waits for its verdict (below); listing only reads, so it
    # may run on either side of it. At the first delete the re-read is older by the
    # listing before the first eligible key: each later delete of the task already
    # relies on a re-read older than that. Its verdict (or error) counts only if the
    # task has something to delete, as when it ran on demand.
    if pools is not None:
        pools.check(REPORT_READERS, concurrency)
    ahead = (ThreadPoolExecutor(1, thread_name_prefix="epochgc-recheck") if pools is None
             else pools.recheck)
    again = ahead.submit(recheck, store, m, clock, max_report_age_s, report_keys,
                         None if pools is None else pools.reports)

    beaconing = Beacon(beacon, me.name())
    tally = beaconing.tally

    halted = StopSeen(writer, list_stop_every_s)

    def eligible() -> Iterator[Doomed]:
        rows = listed(store, prefixes, m, now, grace_s, page_size, scanned, list_concurrency,
                      tally, halted)
        try:
            for row in rows:
                if row[0] != ELIGIBLE:
                    into = malformed if row[0] == MALFORMED else refused
                    if len(into) < _SAMPLES:
                        into.append(row[1])
                    continue
                if not verdict:  # never a delete before the re-read's verdict
                    verdict.append(again.result())
                if not isinstance(verdict[0], Go):
                    return
                yield row[1:]  # (key, size, age, version): one slice, not four lookups
        finally:
            rows.close()  # stops the lister threads

    try:
        with beaconing:
            stats = delete_keys(store, eligible(), batch_size, concurrency, on_error,
                                None if pools is None else pools.delete, writer, tally)
        if halted.seen:  # the listing stopped at STOP: the task stopped (listing partial)
            stats.stopped = 1
    finally:
        # The re-read is done with the store before it closes (cancelled if not begun).
        if pools is None:
            ahead.shutdown(cancel_futures=True)
        else:
            again.cancel()
            wait([again])
        store.close()
        if jstore is not store:
            jstore.close()
    yield TaskResult(
        me, scanned, stats, verdict[0] if verdict else None, tuple(malformed), tuple(refused),
        tuple(f"{k}: {why}" for k, why in failed.items()), writer.written(),
    )
