"""One GC round as a PySpark job.

Driver: read the reports and compute M with the model; executors: list the 1000 prefixes
(early stop above M), classify keys with the model and, in a real round, delete eligible
keys while the listing continues, each task re-reading M before its first delete
(`stream.py`, SPEC R21a). A dry run lists everything, re-reads M on the driver and writes
the would-be manifest. Per-key rows stay on the executors (a persisted RDD); the driver
only ever sees per-task counts and a few samples.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from epochgc.impl.gc.admin import read_admin_state
from epochgc.impl.gc.errors import GcError, NotAStore, ReportError
from epochgc.impl.gc.journal import (
    END,
    START,
    STOP,
    Driver,
    JournalTarget,
    JournalTotals,
    journal_prefix,
    read_journal,
    write_marker,
)
from epochgc.impl.gc.killpoint import reach
from epochgc.impl.gc.lease import Lease
from epochgc.impl.gc.manifest import (
    check_manifest_absent,
    check_manifest_outside_data,
    has_scheme,
    manifest_target,
)
from epochgc.impl.gc.monitor import HealthVerdict, assess
from epochgc.impl.gc.progress import stage_progress
from epochgc.impl.gc.recheck import Blocked, Go, Refused, recheck_before_delete
from epochgc.impl.gc.record import new_round_id
from epochgc.impl.gc.reports import PARTITIONS_KEY, REPORT_READERS, ClusterView, read_cluster_view
from epochgc.impl.gc.scan import (
    ELIGIBLE,
    MALFORMED,
    REFUSED,
    STATS,
    ScanStats,
    parse_stats_row,
    scan_task,
    split_prefixes,
)
from epochgc.impl.gc.stop import RoundStop, deadline_timer
from epochgc.impl.gc.stream import TaskResult, list_and_delete_task
from epochgc.impl.gc.summary import GcSummary
from epochgc.impl.gc.versioning import check_versioning
from epochgc.impl.gc.watch import RoundWatch
from epochgc.impl.store.base import MAX_DELETE_BATCH, MAX_PAGE_SIZE, ObjectStore, StoreError
from epochgc.impl.store.url import sized_for
from epochgc.model.cluster import GcEpoch, partition_epochs
from epochgc.model.keys import PREFIXES, parse_key

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_GRACE_S = 12 * 3600.0
MIN_GRACE_S = 3600.0
DEFAULT_MAX_REPORT_AGE_S = 300.0
MAX_WATCH_INTERVAL_S = 3600.0  # the in-round watch's longest wait between looks
_SAMPLES = 20
_PREFIXES_PER_TASK = 50
_TASKS_PER_LOCAL_CORE = 2
_LOCAL_MASTER = re.compile(r"local(?:\[(\*|[1-9][0-9]*)(?:\s*,\s*[0-9]+)?\])?")


@dataclass(frozen=True)
class GcOptions:
    grace_s: float = DEFAULT_GRACE_S
    allow_short_grace: bool = False  # below MIN_GRACE_S only when set (--i-know-...)
    max_report_age_s: float = DEFAULT_MAX_REPORT_AGE_S
    dry_run: bool = False
    manifest: str | None = None  # a directory Spark writes (Parquet, or CSV if *.csv)
    skip_malformed: bool = False
    allow_versioned: bool = False  # run on a versioned bucket (deletes add delete markers)
    page_size: int = MAX_PAGE_SIZE
    delete_batch_size: int = MAX_DELETE_BATCH
    # Delete requests in flight per task; default 4 on S3 (a delete is a round trip) and 1
    # on a local directory, where the deletes run in the task's own thread: threads there
    # only contend for the interpreter lock (issue 29: a task body with 4 delete threads
    # made about 10 futex calls per key and ran at 0.6x of the same body with none).
    delete_concurrency: int | None = None
    # List requests in flight per task in a real round; default 4 on S3 (a list is a round
    # trip) and 1 on a local directory (threads only contend for the GIL there: the local
    # bench ran at half speed with 4).
    list_concurrency: int | None = None
    tasks: int | None = None  # Spark tasks for the listing; default listing_tasks()
    # Issue 29: stop the round (as SIGTERM would: batches in flight finish, END says
    # `interrupted`, exit 1) once it has run this long.
    deadline_s: float | None = None
    # A dry run's list of the keys it would delete, one a line: a file path, or "-" for
    # the `say` channel's caller to print (`GcSummary.would_delete`); dry runs only.
    list_keys: str | None = None
    # Issue 30: how often a real round's driver re-reads the pause state and the safety
    # monitor while it deletes (`watch.py`).
    watch_interval_s: float = 2.0

    def validate(self) -> None:
        if self.grace_s < 0:
            raise GcError(f"grace must be >= 0, got {self.grace_s:g}s")
        if self.grace_s < MIN_GRACE_S and not self.allow_short_grace:
            raise GcError(
                f"grace {self.grace_s:g}s is below the 1h safety minimum; objects that young "
                "may still be in flight (pass --i-know-grace-is-short to force)"
            )
        if not (math.isfinite(self.max_report_age_s) and self.max_report_age_s > 0):
            # NaN passed `<= 0` and made every report fresh (issue 30 review).
            raise GcError(f"max report age must be > 0 and finite, got "
                          f"{self.max_report_age_s!r}")
        if not 1 <= self.page_size <= MAX_PAGE_SIZE:
            raise GcError(f"page size must be in 1..{MAX_PAGE_SIZE}, got {self.page_size}")
        if not 1 <= self.delete_batch_size <= MAX_DELETE_BATCH:
            raise GcError(f"delete batch must be in 1..{MAX_DELETE_BATCH}")
        if self.delete_concurrency is not None and self.delete_concurrency < 1:
            raise GcError("delete concurrency must be >= 1")
        if self.list_concurrency is not None and self.list_concurrency < 1:
            raise GcError("list concurrency must be >= 1")
        if not 0 < self.watch_interval_s <= MAX_WATCH_INTERVAL_S:
            # inf made the watch thread die on Event.wait's OverflowError (issue 30 review).
            raise GcError(f"watch interval must be in (0, {MAX_WATCH_INTERVAL_S:g}] s, got "
                          f"{self.watch_interval_s!r}")
        if self.deadline_s is not None and not self.deadline_s > 0:
            raise GcError(f"deadline must be > 0, got {self.deadline_s:g}s")
        if self.list_keys is not None and not self.dry_run:
            raise GcError("--list only applies to --dry-run (a real round has --manifest)")
        if self.list_keys not in (None, "-") and os.path.lexists(str(self.list_keys)):
            raise GcError(f"--list file {self.list_keys} already exists; refusing to overwrite")
        if self.tasks is not None and not 1 <= self.tasks <= PREFIXES:
            raise GcError(f"tasks must be in 1..{PREFIXES}, got {self.tasks}")
        # A plain path fails fast here; every target is checked on its own file system
        # once Spark is up (`manifest.check_manifest_absent`).
        if (
            self.manifest is not None
            and not has_scheme(self.manifest)
            and os.path.exists(self.manifest)
        ):
            raise GcError(f"manifest path {self.manifest} already exists; refusing to overwrite")


def run_gc(
    spark: SparkSession | Callable[[], SparkSession | None],
    open_store: Callable[[], ObjectStore],
    options: GcOptions = GcOptions(),  # frozen: a shared default is safe
    *,
    clock: Callable[[], float] = time.time,
    say: Callable[[str], None] | None = None,
    stop: RoundStop | None = None,
) -> GcSummary:
    """Run one round. `open_store` must be picklable (e.g. a StoreSpec): every Spark task
    calls it to open its own store. `clock` is the wall clock used for object and report
    ages (inject it for determinism). `spark` may be a factory, called only when there is
    something to list, so a blocked round never pays for Spark start-up. `stop`: a request
    to stop early (signals, `--deadline`): the tasks stop at their next delete batch and the
    round ends `interrupted`. Raises GcError before any delete on bad input; returns a
    summary whose `exit_code` says how the round ended. Every round that gets past option
    validation writes its deletion record (`impl/gc/record.py`), counted from the round's
    deletion journal (`impl/gc/journal.py`); a round that fails, whatever the exception,
    writes its record (outcome `error`, exit 1) and raises: a StoreError as a GcError, any
    other exception as itself, each carrying the partial summary (`.summary`, with
    `.error` set)."""
    options.validate()
    now = clock()
    summary = GcSummary(dry_run=options.dry_run, started_at=now, round_id=new_round_id(now))
    stop = stop if stop is not None else RoundStop()
    started = time.monotonic()
    record = not options.dry_run  # a dry run writes nothing anywhere (issue 29)
    timer = None if options.deadline_s is None else deadline_timer(stop, options.deadline_s)
    held: list[Lease] = []  # released only once the record is written (below)
    try:
        _round(spark, open_store, options, now, clock, say, summary, stop, held)
    except NotAStore as e:
        # Nothing is written into a directory that is not a store (a mistyped path), not
        # even a record (issue 29).
        record = False
        summary.error = str(e)
        e.summary = summary
        raise
    except BaseException as e:
        # Whatever ended the round (a store, a Spark job, a bug, a second Ctrl-C), the
        # record and the exit code say so: never `done` with exit 0.
        summary.error = summary.error or _describe(e)
        if isinstance(e, KeyboardInterrupt) and summary.interrupted is None:
            summary.interrupted = stop.reason or "SIGINT"
        if isinstance(e, StoreError):
            err = GcError(str(e))
            err.summary = summary
            raise err from e
        # Any other exception keeps its type and carries the summary (the CLI reports it).
        with contextlib.suppress(AttributeError):
            e.summary = summary  # type: ignore[attr-defined]
        raise
    finally:
        if timer is not None:
            timer.cancel()
        summary.seconds = time.monotonic() - started
        try:
            if record:
                _write_record(open_store, summary, options)
        finally:
            # The lease is held until the record is written (issue 38 item 1): a round
            # without its lease has its record, so whoever takes the lease over may take
            # every journal without a record for a dead round's.
            for lease in held:
                lease.release()
    return summary


def check_is_store(store: ObjectStore) -> None:
    """NotAStore unless the store holds `_cluster/partitions.json` (a regular object)."""
    try:
        found = store.head(PARTITIONS_KEY)
    except StoreError as e:
        raise GcError(f"cannot read {PARTITIONS_KEY}: {e}") from e
    if found is None:
        raise NotAStore(f"{store.describe()} is not an epochgc store (no {PARTITIONS_KEY}); "
                        "nothing was written")


def _describe(e: BaseException) -> str:
    if isinstance(e, GcError | StoreError):
        return str(e)
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def _write_record(
    open_store: Callable[[], ObjectStore], summary: GcSummary, options: GcOptions
) -> None:
    from epochgc.impl.gc.record import number_round, record_document, write_record

    try:
        store = open_store()
        try:
            number_round(store, summary)  # END and the record carry the round's number
            if summary.journal is not None:  # END: the journal's last word on the round
                write_marker(store, summary.journal, END, record_document(summary, {}))
                reach("end-written")
            summary.record = write_record(store, summary, asdict(options))
            reach("record-written")
        finally:
            store.close()
    except (StoreError, OSError) as e:  # a round's outcome stands; the record is reported
        summary.record_error = str(e)


def _round(
    spark: SparkSession | Callable[[], SparkSession | None],
    open_store: Callable[[], ObjectStore],
    options: GcOptions,
    now: float,
    clock: Callable[[], float],
    say: Callable[[str], None] | None,
    summary: GcSummary,
    stop: RoundStop,
    held: list[Lease],
) -> None:
    note = say or (lambda _msg: None)
    if options.manifest is not None:
        check_manifest_outside_data(options.manifest, open_store)
    store = open_store()
    try:
        check_is_store(store)  # before anything is written, a record included
        # Issue 30: a store whose GC an operator paused refuses real rounds (fail closed:
        # an unreadable pause state counts as paused). A dry run deletes nothing: it runs.
        admin = read_admin_state(store)
        if admin.paused and not options.dry_run:
            summary.paused = admin.why()
            note(f"gc: {summary.paused}")
            return
        try:
            view = read_cluster_view(store, now, options.max_report_age_s, REPORT_READERS)
        except ReportError as e:
            # Fail closed, as the monitor judges the same read mid-round (`check_health`):
            # reports that cannot be read or are invalid leave the cluster's health unknown,
            # so the round is blocked (exit 2, `safety_blocked`), not failed (issue 41).
            verdict = HealthVerdict.unknown(f"the reports cannot be read: {e}")
            summary.health = verdict.as_dict()
            summary.blocked = verdict.why()
            summary.safety_blocked = True
            note(f"gc: no collection this round ({summary.blocked})")
            return
        check_versioning(store, options.allow_versioned)  # before anything is listed
    finally:
        store.close()
    decision = view.gc_epoch()
    health = assess(view)
    summary.health = health.as_dict()
    summary.min_partition_epoch = min_partition_epoch(view)
    if decision.blocked is not None:
        summary.safety_blocked = True  # the model's own check: a partition without reports
    elif decision.M is not None and not health.healthy:
        # The safety monitor (issue 30): M exists, but the cluster is not known healthy.
        decision = GcEpoch(None, health.why())
        summary.safety_blocked = True
    summary.revision = view.revision
    summary.stale_nodes = list(view.stale_nodes)
    summary.reports_used = [
        {"node": h.node, "written_at": h.written_at, "stored_at": h.stored_at, "age_s": h.age_s}
        for h in view.fresh
    ]
    summary.blocked = decision.blocked
    summary.M = decision.M
    if decision.blocked is not None or decision.M is None:
        note(f"gc: no collection this round ({decision.blocked or 'nothing collectible'})")
        return
    m = decision.M
    note(f"gc: M={m} (snapshot revision {view.revision}); listing {PREFIXES} prefixes")

    if not options.dry_run:
        # One round at a time on a store (issue 29): held from before Spark starts to
        # after its record (`run_gc` releases it); refused naming the holder.
        lease = Lease(open_store, summary.round_id)
        lease.acquire()
        held.append(lease)
        # Before anything else (issue 38 item 1): the rounds whose driver died get their
        # records. Holding the lease, no other round may be running.
        summary.recovered = _recover(open_store, summary.round_id, note)

        def lost(why: str) -> None:
            note(f"gc: {why}; stopping")
            stop.request("lease-lost")

        lease.keep(lost)
    _with_spark(spark, _Round(open_store, options, view, m, now, clock, say, summary, stop))


def _recover(open_store: Callable[[], ObjectStore], round_id: str,
             note: Callable[[str], None]) -> list[str]:
    """Record every dead round (`recover.recover_dead_rounds`); what could not be done is
    said and left for the next look (this round's own deletes are safe either way)."""
    from epochgc.impl.gc.recover import recover_dead_rounds

    try:
        store = open_store()
        try:
            done = recover_dead_rounds(store, f"round {round_id}", lambda: {round_id})
        finally:
            store.close()
    except (StoreError, OSError) as e:
        note(f"gc: warning: unfinished rounds' journals not read back: {e}")
        return []
    for r in done:
        note(f"gc: round {r.round_id} died before its end: recorded as killed, "
             f"{r.deleted} key(s) deleted ({r.record})")
    return [r.round_id for r in done]


@dataclass(frozen=True)
class _Round:
    """What every part of one round's Spark work reads: the store, the options, the
    cluster view and its M, the clocks, progress, the summary it fills and the stop flag."""

    open_store: Callable[[], ObjectStore]
    options: GcOptions
    view: ClusterView
    m: int
    now: float
    clock: Callable[[], float]
    say: Callable[[str], None] | None
    summary: GcSummary
    stop: RoundStop

    def note(self, msg: str) -> None:
        if self.say is not None:
            self.say(msg)


def _with_spark(given: SparkSession | Callable[[], SparkSession | None], rnd: _Round) -> None:
    from pyspark.sql import SparkSession

    # A factory returns None when the round was stopped while Spark was starting.
    spark = given if isinstance(given, SparkSession) else given()
    options = rnd.options
    if spark is None or rnd.stop.requested:  # before anything is deleted: nothing to journal
        rnd.summary.interrupted = rnd.stop.reason
        return
    if options.manifest is not None:
        check_manifest_absent(spark, options.manifest)
    # A fixed function of the prefix count and the master URL: defaultParallelism is
    # whatever executors have registered so far (2 on a fresh cluster), and would make the
    # split depend on timing.
    tasks = options.tasks or listing_tasks(PREFIXES, spark.sparkContext.master)
    groups = split_prefixes(PREFIXES, tasks)
    # Each task's client needs a connection per delete thread, per lister thread and per
    # report reader of its re-read of M (which runs while the listing starts).
    listers = options.list_concurrency or default_listers(rnd.open_store)
    deleters = options.delete_concurrency or default_deleters(rnd.open_store)
    rnd = replace(rnd, open_store=sized_for(
        rnd.open_store, deleters + listers + REPORT_READERS))
    if options.dry_run:
        _dry_round(spark, rnd, groups)
    else:
        _streaming_round(spark, rnd, groups, listers, deleters)


def default_listers(open_store: Callable[[], ObjectStore]) -> int:
    """4 list threads per task for a remote store, 1 for a local directory (see GcOptions)."""
    return 1 if _is_local(open_store) else 4


def default_deleters(open_store: Callable[[], ObjectStore]) -> int:
    """4 delete requests in flight per task for a remote store; 1 for a local directory,
    run in the task's own thread (see GcOptions)."""
    return 1 if _is_local(open_store) else 4


def _is_local(open_store: Callable[[], ObjectStore]) -> bool:
    return getattr(open_store, "kind", None) == "file"


def _streaming_round(
    spark: SparkSession, rnd: _Round, groups: list[list[int]], listers: int, deleters: int
) -> None:
    """List and delete in one stage (SPEC R21a): each task re-reads M before its first
    delete, then deletes eligible keys page by page while its listing continues, journaling
    each batch. The counts, the manifest and the record come from the journal."""
    summary, stop, note = rnd.summary, rnd.stop, rnd.note
    prefix = journal_prefix(summary.round_id)
    store = rnd.open_store()
    try:
        # START, before any task can delete: a round that dies now still names its journal,
        # and one that cannot write it deletes nothing (it could not account for it).
        write_marker(store, prefix, START, {
            "round": summary.round_id, "M": rnd.m, "snapshot_revision": rnd.view.revision,
            "started_at": summary.started_at, "options": asdict(rnd.options)})
        reach("start-written")
    except StoreError as e:
        raise GcError(f"cannot write the deletion journal {prefix}: {e}; nothing was deleted"
                      ) from e
    finally:
        store.close()
    summary.journal = prefix

    def write_stop() -> None:
        s = rnd.open_store()
        try:
            write_marker(s, prefix, STOP, {"reason": stop.reason})
        finally:
            s.close()

    stop.arm(write_stop, note)

    def unhealthy(verdict: HealthVerdict) -> None:
        summary.health = verdict.as_dict()
        summary.safety_blocked = True
        note(f"gc: {verdict.why()}; stopping")

    watch = RoundWatch(rnd.open_store, stop, rnd.clock, rnd.options.max_report_age_s,
                       rnd.options.watch_interval_s, unhealthy)
    watch.start()  # looks once before returning: a pause written since `_round` checked
    try:
        _stage(spark, rnd, groups, listers, deleters, prefix)
    finally:
        watch.close()
        if watch.paused is not None:
            summary.paused = watch.paused.why()  # who paused it and why, in the record


def _stage(
    spark: SparkSession, rnd: _Round, groups: list[list[int]], listers: int, deleters: int,
    prefix: str,
) -> None:
    """The list-and-delete stage of `_streaming_round` and its accounting from the journal."""
    options, summary, stop, note = rnd.options, rnd.summary, rnd.stop, rnd.note
    open_store, view = rnd.open_store, rnd.view
    sc = spark.sparkContext
    task = functools.partial(
        list_and_delete_task,
        open_store,
        rnd.m,
        rnd.now,
        options.grace_s,
        options.page_size,
        options.delete_batch_size,
        deleters,
        listers,
        rnd.clock,
        options.max_report_age_s,
        journal=JournalTarget(prefix, driver=Driver.this_process()),
        report_keys=view.report_keys,  # the re-read reads them while it lists them
    )
    # A recomputed, retried or speculative attempt lists and deletes again, which is
    # harmless (a key already gone is not listed, a deleted key stays deleted); each one
    # journals what it did, and the counts come from the journal.
    rows = sc.parallelize(groups, len(groups)).mapPartitions(
        lambda it: task(p for group in it for p in group)
    )
    failure: GcError | None = None
    results: list[TaskResult] = []
    try:
        t = time.monotonic()
        sc.setJobDescription("epochgc gc: list and delete")
        try:
            # Stopped already (the watch's first look, a signal): no task starts, so none
            # can delete before it reads the STOP marker written meanwhile.
            if not stop.requested:
                with stage_progress(sc, "gc: listing and deleting", rnd.say,
                                    (rnd.open_store, prefix)), \
                        _spark_errors("delete"):
                    results = rows.collect()
        except GcError as e:
            failure = e
            # The stage failed (a task crashed, an executor was killed), but its other
            # attempts may still be deleting: the journal is read back only once none runs,
            # or a batch landing after the read-back would be in no record (issue 38).
            _quiesce(sc, open_store, prefix)
        except BaseException:
            # A second signal (KeyboardInterrupt) or a driver-side bug: no task may go on
            # deleting behind a round that has ended; what they did is in the journal.
            sc.cancelAllJobs()
            summary.journal_read = False
            with contextlib.suppress(Exception):
                _quiesce(sc, open_store, prefix)
            with contextlib.suppress(GcError):
                _count(summary, _read_journal(open_store, prefix))
            raise
        summary.delete_seconds = summary.list_seconds = time.monotonic() - t
    finally:
        sc.setJobDescription(None)  # type: ignore[arg-type]
    summary.interrupted = stop.reason
    summary.journal_read = False  # until it is read back: deletions unknown, not none
    totals = _read_journal(open_store, prefix)
    _count(summary, totals)
    scanned = ScanStats()
    blocked: list[str] = []  # the tasks' re-reads that found no M
    stopped: list[str] = []  # those that found M moved backwards
    for r in results:
        scanned.add(r.scanned)
        summary.backpressure_s += r.deleted.backpressure_s  # a timing, not an audit count
        if isinstance(r.verdict, Blocked):
            blocked.append(r.verdict.why)
        elif isinstance(r.verdict, Refused):
            stopped.append(r.verdict.why)
        summary.malformed_keys.extend(r.malformed[: _SAMPLES - len(summary.malformed_keys)])
        summary.refused_samples.extend(r.refused[: _SAMPLES - len(summary.refused_samples)])
    _fill_scan(summary, scanned)
    note(f"gc: listed {scanned.listed} keys, {scanned.eligible} eligible, "
         f"{summary.deleted} deleted (journal {prefix})")
    if failure is not None:
        raise GcError(
            f"{failure}; {summary.deleted} key(s) were deleted before it, journal {prefix}",
            deleting=True,
        ) from failure
    if summary.errors:
        summary.error_samples.append(
            f"{summary.errors} key(s) could not be deleted; they are listed again next round"
        )
    if blocked:
        summary.blocked = blocked[0]
        summary.safety_blocked = True  # a partition without a report at the re-read
    if stopped:
        summary.refused = stopped[0]
    summary.failed_check = _failed_check(scanned, options)
    if options.manifest is not None and (summary.deleted or not (blocked or stopped)):
        # The keys really gone, from the journal; a round whose every task stopped at the
        # re-read (blocked or refused) deleted nothing and writes no manifest.
        manifest_rows = [(k, size, age) for k, (size, age) in sorted(totals.deleted.items())]
        with _spark_errors("manifest"):
            _write_manifest(spark, sc.parallelize(manifest_rows, max(1, len(groups))),
                            options.manifest)
        summary.manifest = options.manifest


QUIESCE_LIMIT_S = 300.0  # a bound for a wedged cluster, not a timing assumption


def _quiesce(sc: Any, open_store: Callable[[], ObjectStore], prefix: str) -> None:
    """After a failed stage: STOP (no attempt starts another batch), cancel the job, and
    wait until Spark runs no stage of this application, so the journal read back after
    this holds every batch (an in-flight one finishes and is journaled, or its attempt is
    killed first). A STOP that cannot be written leaves only the wait."""
    with contextlib.suppress(StoreError, OSError):
        store = open_store()
        try:
            write_marker(store, prefix, STOP, {"reason": "stage failed"})
        finally:
            store.close()
    sc.cancelAllJobs()
    deadline = time.monotonic() + QUIESCE_LIMIT_S
    while _running_tasks(sc) and time.monotonic() < deadline:
        time.sleep(0.05)


def _running_tasks(sc: Any) -> int:
    """Tasks running on the application's executors (the JVM status tracker's executor
    infos: a failed stage leaves the active stages before its killed tasks end)."""
    try:
        infos = sc._jsc.sc().statusTracker().getExecutorInfos()
        return sum(int(i.numRunningTasks()) for i in infos)
    except Exception:  # no JVM view: the active stages are the next best thing
        return len(sc.statusTracker().getActiveStageIds())


def _count(summary: GcSummary, totals: JournalTotals) -> None:
    summary.deleted = len(totals.deleted)
    summary.already_gone = len(totals.already_gone)
    summary.changed = len(totals.changed)
    summary.errors = len(totals.errors)
    summary.bytes_deleted = totals.bytes_deleted
    summary.max_deleted_epoch = max_epoch(totals.deleted)
    summary.delete_requests = totals.batches
    summary.error_samples.extend(totals.error_samples())
    summary.unreadable_entries = totals.unreadable
    summary.journal_read = True


def max_epoch(keys: Iterable[str]) -> int | None:
    """The highest epoch among deleted keys (None if none), parsing one key per directory:
    every key `level_zero/data/NNN/EPOCH/name` of a directory has its epoch, and a round's
    100k keys sit in about 5,000 directories (a parse per key was 0.15-0.28 s of the
    driver's work after the stage, issue 29)."""
    one_per_dir = {k.rpartition("/")[0]: k for k in keys}
    return max((parse_key(k).epoch for k in one_per_dir.values()), default=None)


def min_partition_epoch(view: ClusterView) -> int | None:
    """The lowest partition GC epoch M(p) (max over a partition's fresh replica reports);
    None when a partition has none (the round is blocked) or the table is empty."""
    best = partition_epochs(list(view.partitions), view.counted())
    values = [v for v in best.values() if v is not None]
    return min(values) if values and len(values) == len(best) else None


def _read_journal(open_store: Callable[[], ObjectStore], prefix: str) -> JournalTotals:
    store = open_store()
    try:
        return read_journal(store, prefix)
    except StoreError as e:  # it cannot be listed; entries that cannot be read are skipped
        raise GcError(f"the deletion journal {prefix} cannot be read back: {e}",
                      deleting=True) from e
    finally:
        store.close()


def _failed_check(scanned: ScanStats, options: GcOptions) -> str | None:
    """Malformed keys and refused entries are never deleted and, unless skipped, fail the
    round (R21), though the eligible keys beside them were deleted."""
    if not (scanned.malformed or scanned.refused) or options.skip_malformed:
        return None
    what = f"{scanned.malformed} malformed key(s)"
    if scanned.refused:
        what += f" and {scanned.refused} refused entr(ies) (links, special files)"
    return f"{what} under the data prefix, never deleted (pass --skip-malformed to accept them)"


def _dry_round(spark: SparkSession, rnd: _Round, groups: list[list[int]]) -> None:
    """A dry run lists everything first, then re-reads M once on the driver and writes the
    would-be manifest: nothing is deleted, so there is nothing to overlap."""
    options, summary, note = rnd.options, rnd.summary, rnd.note
    sc = spark.sparkContext
    scan = functools.partial(scan_task, rnd.open_store, rnd.m, rnd.now, options.grace_s,
                             options.page_size)
    rows = sc.parallelize(groups, len(groups)).mapPartitions(
        lambda it: scan(p for group in it for p in group)
    )
    rows = rows.persist(_storage_level())
    try:
        t = time.monotonic()
        sc.setJobDescription("epochgc gc: list and classify")
        with stage_progress(sc, "gc: listing", rnd.say), _spark_errors("listing"):
            stats_rows = rows.filter(lambda r: r[0] == STATS).collect()
            scanned = ScanStats()
            for r in stats_rows:
                scanned.add(ScanStats(**parse_stats_row(r)))
            if scanned.malformed:
                summary.malformed_keys = (
                    rows.filter(lambda r: r[0] == MALFORMED).map(lambda r: r[1]).take(_SAMPLES)
                )
            if scanned.refused:
                summary.refused_samples = (
                    rows.filter(lambda r: r[0] == REFUSED).map(lambda r: r[1]).take(_SAMPLES)
                )
        summary.list_seconds = time.monotonic() - t
        _fill_scan(summary, scanned)
        note(f"gc: listed {scanned.listed} keys, {scanned.eligible} eligible")
        summary.failed_check = _failed_check(scanned, options)
        if scanned.eligible:
            # Re-read before the manifest: if M went backwards, nothing decided with the
            # old reports may be listed as deletable.
            recheck = _recheck(rnd.open_store, rnd.clock(), options.max_report_age_s)
            verdict = recheck_before_delete(rnd.m, recheck.gc_epoch())
            if isinstance(verdict, Blocked):
                summary.blocked = verdict.why
                summary.safety_blocked = True
                return
            if isinstance(verdict, Refused):
                summary.refused = verdict.why
                return
            assert isinstance(verdict, Go)
        if options.manifest is not None:  # what would be deleted, after the re-read
            _write_manifest(spark, rows.filter(lambda r: r[0] == ELIGIBLE), options.manifest)
            summary.manifest = options.manifest
        if options.list_keys is not None:  # the same keys, one a line (Delta's DRY RUN)
            keys = rows.filter(lambda r: r[0] == ELIGIBLE).map(lambda r: r[1])
            _list_keys(sorted(keys.toLocalIterator()), options.list_keys, summary)
    finally:
        rows.unpersist()
        sc.setJobDescription(None)  # type: ignore[arg-type]


def _list_keys(keys: list[str], target: str, summary: GcSummary) -> None:
    """Write the would-be-deleted keys to `target` (created, never overwritten), or keep
    them for the CLI to print on stdout ("-")."""
    if target == "-":
        summary.would_delete = keys
        return
    try:
        with open(target, "x", encoding="utf-8") as f:
            f.writelines(k + "\n" for k in keys)
    except OSError as e:
        raise GcError(f"--list file {target}: {e}") from e
    summary.listed_to = target


def listing_tasks(prefixes: int, master: str | None = None) -> int:
    """Default number of listing tasks: one per 50 prefixes (20 for the 1000), enough to
    spread over a cluster, few enough that task launch (tens of ms each) stays small.

    On a local master (`local`, `local[N]`, `local[N,F]`, `local[*]`) the cores are fixed
    by the URL, and every task's launch is paid on them: an empty 20-task job took 0.7 s
    and 0.9 s of JVM CPU on local[2], a 4-task one 0.17 s (issue 29). There it is two
    tasks per core (at most the default), enough to even out one slow task."""
    default = max(1, -(-prefixes // _PREFIXES_PER_TASK))
    local = _LOCAL_MASTER.fullmatch(master or "")
    if local is None:
        return default
    cores = local.group(1) or "1"
    n = (os.cpu_count() or 1) if cores == "*" else int(cores)
    return max(1, min(default, _TASKS_PER_LOCAL_CORE * n))


def _fill_scan(summary: GcSummary, s: ScanStats) -> None:
    summary.listed = s.listed
    summary.fetched = s.fetched
    summary.list_requests = s.list_requests
    summary.eligible = s.eligible
    summary.eligible_bytes = s.eligible_bytes
    summary.skipped_too_new = s.skipped_too_new
    summary.skipped_too_young = s.skipped_too_young
    summary.malformed = s.malformed
    summary.refused_entries = s.refused


def _recheck(open_store: Callable[[], ObjectStore], now: float, max_age: float) -> ClusterView:
    store = open_store()
    try:
        return read_cluster_view(store, now, max_age, REPORT_READERS)
    finally:
        store.close()


def _storage_level() -> Any:
    from pyspark import StorageLevel

    return StorageLevel.MEMORY_AND_DISK


def _write_manifest(spark: SparkSession, rows: Any, path: str) -> None:
    """Executors write the rows' (key, size, epoch, age_s): `rows` holds (key, size, age_s)
    tuples, or the dry run's (ELIGIBLE, key, size, age_s) rows."""
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    schema = StructType(
        [
            StructField("key", StringType(), False),
            StructField("size", LongType(), False),
            StructField("epoch", LongType(), False),
            StructField("age_s", DoubleType(), False),
        ]
    )
    eligible = rows.map(lambda r: r if len(r) == 3 else r[1:]).map(
        lambda r: (r[0], r[1], parse_key(r[0]).epoch, r[2]))
    writer = spark.createDataFrame(eligible, schema).write.mode("errorifexists")
    target = manifest_target(path)  # a URI as given: only a plain path is made absolute
    if path.lower().endswith(".csv"):
        writer.option("header", "true").csv(target)
    else:
        writer.parquet(target)


@contextlib.contextmanager
def _spark_errors(phase: str) -> Iterator[None]:
    """Turn a failed Spark job into a GcError carrying the Python error's own last line."""
    try:
        yield
    except Exception as e:
        if type(e).__module__.startswith(("py4j", "pyspark")):
            raise GcError(
                f"{phase} phase failed: {spark_error_line(e)}", deleting=phase == "delete"
            ) from e
        raise


_ERR_LINE = re.compile(r"^([\w.]+(?:Error|Exception|Crash|Interrupt)): (.*)$")
_JAVA_LINE = re.compile(r"^(?::\s*|Caused by:\s*)?([\w.$]+(?:Error|Exception)):\s*(.*)$")


def spark_error_line(e: BaseException) -> str:
    """One line for a Spark error: the last `SomeError: message` line of the Python worker's
    traceback inside it, else the Java cause (the innermost `Caused by`, or the JVM's own
    exception line), never just "An error occurred while calling o130.csv"."""
    found = java = None
    for line in str(e).splitlines():
        m = _ERR_LINE.match(line.strip())
        if m and not m.group(1).startswith(("org.apache", "py4j", "java.")):
            found = f"{m.group(1).rsplit('.', 1)[-1]}: {m.group(2)}"
        j = _JAVA_LINE.match(line.strip())
        if j and not j.group(1).startswith("py4j") and (java is None or "Caused by" in line):
            java = f"{j.group(1).rsplit('.', 1)[-1]}: {j.group(2)}"[:300]
    return found or java or str(e).splitlines()[0][:300]
