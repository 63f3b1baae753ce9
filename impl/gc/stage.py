"""The Spark side of one GC round: task sizing, the streaming list-and-delete stage, the dry
run's listing, the manifest, and the counts read back from the deletion journal.

Executors list the 1000 prefixes (early stop above M), classify keys with the model and, in
a real round, delete eligible keys while the listing continues, each task re-reading M
before its first delete (`stream.py`, SPEC R21a). A dry run lists everything, re-reads M on
the driver and writes the would-be manifest. Per-key rows stay on the executors (a persisted
RDD); the driver only ever sees per-task counts and a few samples.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from epochgc.impl.gc.beacon import BeaconListener, driver_host
from epochgc.impl.gc.bounds import (
    CONNECT_TIMEOUT_S,
    LOOK_FRESH_S,
    READ_TIMEOUT_S,
    send_within_s,
    stop_within_s,
)
from epochgc.impl.gc.drivertree import of_session
from epochgc.impl.gc.duration import format_duration
from epochgc.impl.gc.errors import GcError
from epochgc.impl.gc.gate import Gate
from epochgc.impl.gc.journal import (
    KNOWN_LIMIT,
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
from epochgc.impl.gc.lease import DEFAULT_LEASE_S
from epochgc.impl.gc.manifest import check_manifest_absent, manifest_target
from epochgc.impl.gc.monitor import HealthVerdict
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.gc.progress import stage_progress
from epochgc.impl.gc.recheck import Blocked, Go, Refused, recheck_before_delete
from epochgc.impl.gc.reports import REPORT_READERS, ClusterView, read_cluster_view
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
from epochgc.impl.gc.session import cancel_on_stop, context_stopped
from epochgc.impl.gc.sparkerrors import _spark_errors, interrupt_under
from epochgc.impl.gc.stop import RoundStop
from epochgc.impl.gc.stream import TaskResult, list_and_delete_task
from epochgc.impl.gc.summary import SPARK_STOPPED, GcSummary
from epochgc.impl.gc.text import GONE_WHERE_SHORT
from epochgc.impl.gc.text import keys as n_keys
from epochgc.impl.gc.watch import RoundWatch, go_on, watch_store
from epochgc.impl.signals import checkpoint
from epochgc.impl.store.base import ObjectStore, StoreError
from epochgc.impl.store.url import sized_for
from epochgc.model.keys import PREFIXES, parse_key

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


_SAMPLES = 20
_PREFIXES_PER_TASK = 50
_TASKS_PER_LOCAL_CORE = 2
_LOCAL_MASTER = re.compile(r"local(?:\[(\*|[1-9][0-9]*)(?:\s*,\s*[0-9]+)?\])?")


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
    # The round's lease held with a margin (`Lease.firm`); None: no lease (a dry run).
    lease_firm: Callable[[], bool] | None = None
    lease_s: float = DEFAULT_LEASE_S  # its duration: what the stop bounds derive from
    # One look at the lease in the store (`Lease.look`): None while it is the round's.
    lease_look: Callable[[ObjectStore], str | None] | None = None

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
    summary = rnd.summary
    prefix = journal_prefix(summary.round_id)
    # Kept open for STOP too (issue 41): a store opened when the signal comes starts a new
    # S3 client first (a second or more on a loaded driver, before any task can see STOP).
    store = rnd.open_store()
    try:
        try:
            # START, before any task can delete: a round that dies now still names its
            # journal, and one that cannot write it deletes nothing (it could not account
            # for it).
            write_marker(store, prefix, START, {
                "round": summary.round_id, "M": rnd.m, "snapshot_revision": rnd.view.revision,
                "started_at": summary.started_at, "options": asdict(rnd.options),
                # how long a recovery waits after writing STOP before reading back
                # (bounds.py)
                "stop_within_s": stop_within_s(rnd.lease_s),
                # and the lease it derives from: a later version's recovery waits at least
                # its own bound for that lease (review rev38z11 finding 2, `recover.py`)
                "lease_s": rnd.lease_s,
                # where its tasks run: a recovery on this host may know them gone
                **of_session(spark)})
            reach("start-written")
        except StoreError as e:
            raise GcError(f"cannot write the deletion journal {prefix}: {e}; nothing was "
                          "deleted") from e
        summary.journal = prefix
        _delete_stage(spark, rnd, groups, listers, deleters, prefix, store)
    finally:
        store.close()


def _delete_stage(spark: SparkSession, rnd: _Round, groups: list[list[int]], listers: int,
                  deleters: int, prefix: str, store: ObjectStore) -> None:
    """`_streaming_round` once START is written: STOP armed (written with `store`), the
    watch running, the stage."""
    summary, stop, note = rnd.summary, rnd.stop, rnd.note

    cutoff = StageCutoff(spark.sparkContext, stop_grace_s(), job_group(summary.round_id))

    stop.means = (f"no new delete batch; waiting for the batches in flight (up to "
                  f"{format_duration(cutoff.grace_s)}, then the tasks are cancelled)")
    # once STOP is durable, no task starts another batch: the cutoff's bound starts
    arm_stop_marker(stop, store, prefix, note, after=cutoff.start)

    def unhealthy(verdict: HealthVerdict) -> None:
        summary.health = verdict.as_dict()
        summary.safety_blocked = True
        note(f"gc: {verdict.why()}; stopping")

    def lease_look(store: ObjectStore) -> str | None:
        why = rnd.lease_look(store) if rnd.lease_look is not None else None
        if why is not None:
            note(f"gc: {why}; stopping")
        return why

    # Its reads bounded as a command's control reads (newuser11 M14; `watch_store`).
    watch = RoundWatch(watch_store(rnd.open_store, rnd.say), stop, rnd.clock,
                       rnd.options.max_report_age_s, rnd.options.watch_interval_s,
                       unhealthy, stop_key=prefix + STOP, firm=rnd.lease_firm,
                       lease_look=lease_look)
    watch.start()  # looks once before returning: a pause written since `_round` checked
    try:
        _stage(spark, rnd, groups, listers, deleters, prefix, watch.close, cutoff, watch)
    except Exception as e:
        # A second signal's interrupt that a later py4j call's error replaced as it
        # unwound (`interrupt_under`; the stage's own `finally`: `setLocalProperty`) is the
        # interrupt: the round ends as "again", not as a failed stage.
        if (ki := interrupt_under(e)) is not None:
            raise ki from None
        raise
    finally:
        cutoff.over()
        watch.close()
        if watch.paused is not None:
            summary.paused = watch.paused.why()  # who paused it and why, in the record


@contextlib.contextmanager
def _spark_ended(sc: Any) -> Iterator[None]:
    """A job whose SparkContext was stopped under it (its JVM ended) as a GcError, whatever
    py4j raised: a refused connection is a ConnectionRefusedError, not py4j's own error
    (newuser13 Q11: it took the path of a driver-side bug)."""
    try:
        yield
    except GcError:
        raise
    except Exception as e:
        if (ki := interrupt_under(e)) is not None:  # a signal's, replaced on its way out
            raise ki from None
        if not context_stopped(sc):
            raise
        raise GcError(f"delete phase failed: {SPARK_STOPPED_LINE}", deleting=True) from e


def arm_stop_marker(stop: RoundStop, store: ObjectStore, prefix: str,
                    note: Callable[[str], None],
                    after: Callable[[], None] = lambda: None,
                    at_latest_s: float | None = None) -> None:
    """Any request to stop the round from now on (a signal, the deadline, the watch: a
    pause, bad health, `lease-unsure`, `watch-late`) writes its STOP marker, with the
    reason: tasks without the driver's gate HEAD it before each batch. Written with the
    round's open `store` (issue 41: a store opened when the signal comes starts a new S3
    client first); `after` runs once it is durable, once its write has failed, or
    `at_latest_s` (default `STOP_WRITE_WAIT_S`) after the request, whichever comes first
    (it may run more than once: `StageCutoff.start` is idempotent). newuser10 L5: on a
    store gone silent the PUT was retried for minutes (botocore: 10 attempts, 60 s each),
    and a failed one never ran `after` at all, so the stage's cutoff ("up to 20s, then the
    tasks are cancelled") never started. A batch cut off before STOP is durable is
    resolved as one cut off after it is: by asking the store (`journal.py`)."""
    wait_s = STOP_WRITE_WAIT_S if at_latest_s is None else at_latest_s

    def write_stop() -> None:
        late = threading.Timer(wait_s, after)
        late.daemon = True
        late.start()
        try:
            write_marker(store, prefix, STOP, {"reason": stop.reason})
        finally:
            late.cancel()
            after()

    stop.arm(write_stop, note)


def _listener(sc: Any, say: Callable[[str], None] | None) -> BeaconListener | None:
    """The driver's end of the tasks' progress counts, when there is a display for them;
    on the address executors reach the driver at (`spark.driver.host`). A driver that
    cannot bind one shows tasks only (progress is advisory)."""
    if say is None:
        return None
    try:
        return BeaconListener(driver_host(sc.getConf().get)).start()
    except OSError:
        return None


STOP_GRACE_S = 20.0  # how long a stopped stage's batches in flight may take (see below)
# How long the STOP marker's write may take before the grace starts without it (a store
# that answers writes it in well under a second; `arm_stop_marker`).
STOP_WRITE_WAIT_S = 20.0
STOP_GRACE_ENV = "EPOCHGC_GC_TEST_STOP_GRACE"  # test-only: that bound, in seconds


def stop_grace_s() -> float:
    value = os.environ.get(STOP_GRACE_ENV)
    return float(value) if value else STOP_GRACE_S


class StageCutoff:
    """A bound on a stopped stage (issue 41: a Ctrl-C mid-round took 18 s on moto under
    load). Once STOP is written (`start`), the tasks get `grace_s` to finish their batches
    in flight and end; then the job is cancelled: a request still under way (botocore
    retries one up to 10 times, 60 s read timeout each) and tasks not started yet (which
    would start, open a store and re-read M only to stop) are not waited for. A cancelled
    attempt's intent without its outcome is resolved by asking the store (`journal.py`), as
    for an attempt that was killed. `over` (the stage has ended) disarms it, so that no
    later job (the manifest) is cancelled."""

    def __init__(self, sc: Any, grace_s: float, group: str | None = None) -> None:
        self._sc = sc
        self.grace_s = grace_s
        self._group = group  # the round's job group: only its jobs are cancelled
        self._lock = threading.Lock()
        self._over = False
        self._timer: threading.Timer | None = None
        self.fired = False

    def start(self) -> None:
        with self._lock:
            if self._over or self._timer is not None:
                return
            self._timer = threading.Timer(self.grace_s, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _fire(self) -> None:
        with self._lock:  # held through the cancel: `over` cannot pass it halfway
            if self._over:
                return
            self.fired = True
            cancel_on_stop(self._sc, self._group)

    def over(self) -> None:
        with self._lock:
            self._over = True
            if self._timer is not None:
                self._timer.cancel()


def _gate(sc: Any, rnd: _Round, watch: RoundWatch | None) -> Gate | None:
    """The driver's answer to its tasks' "go on?" (`gate.py`), on the address executors
    reach the driver at (`watch.go_on`: not asked to stop, the lease firm, the STOP marker
    looked at lately). None if no socket can be bound: the tasks then ask the store for
    the STOP marker, as before."""
    try:
        return Gate(driver_host(sc.getConf().get),
                    go_on(rnd.stop, rnd.lease_firm, watch, LOOK_FRESH_S))
    except OSError:
        return None


def _stage(
    spark: SparkSession, rnd: _Round, groups: list[list[int]], listers: int, deleters: int,
    prefix: str, deleting_over: Callable[[], None] = lambda: None,
    cutoff: StageCutoff | None = None,
    watch: RoundWatch | None = None,
) -> None:
    """The list-and-delete stage of `_streaming_round` and its accounting from the journal.
    `deleting_over` is called once no task of the stage runs, before the read-back: the
    watch stops there, as nothing is left for it to stop (issue 38, S3 at the limit: its
    looks during the read-back were 65 of a round's 323 requests beyond the least; and a
    pause written during the read-back interrupted nothing, so it must not say it did)."""
    options, summary, stop, note = rnd.options, rnd.summary, rnd.stop, rnd.note
    open_store, view = rnd.open_store, rnd.view
    sc = spark.sparkContext
    listener = _listener(sc, rnd.say)
    gate = _gate(sc, rnd, watch)
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
        journal=JournalTarget(prefix, driver=Driver.this_process(),
                              gate=None if gate is None else gate.target,
                              known_limit=known_limit(sc, len(groups)),
                              send_within_s=send_within_s(rnd.lease_s)),
        report_keys=view.report_keys,  # the re-read reads them while it lists them
        beacon=None if listener is None else listener.target,
    )
    # A recomputed, retried or speculative attempt lists and deletes again, which is
    # harmless (a key already gone is not listed, a deleted key stays deleted); each one
    # journals what it did, and the counts come from the journal.
    rows = sc.parallelize(groups, len(groups)).mapPartitions(
        lambda it: task(p for group in it for p in group)
    )
    failure: GcError | None = None
    results: list[TaskResult] = []
    quiesced = False  # STOP written and the stage's tasks waited for (a failed stage)
    # The stage runs in a job group of its own: what is waited for and cancelled below is
    # its tasks only, not those of other jobs of the caller's SparkSession (review rev38s
    # finding 4); the caller's own group and description come back after it.
    group = job_group(summary.round_id)
    caller_props = {k: sc.getLocalProperty(k) for k in _GROUP_PROPERTIES}
    try:
        t = time.monotonic()
        sc.setJobGroup(group, "epochgc gc: list and delete")
        try:
            # Stopped already (the watch's first look, a signal): no task starts, so none
            # can delete before it reads the STOP marker written meanwhile.
            if not stop.requested:
                with stage_progress(sc, "gc: listing and deleting", rnd.say, listener,
                                    deletes=True, stopped=lambda: stop.requested), \
                        _spark_errors("delete"), _spark_ended(sc):
                    try:
                        results = rows.collect()
                    finally:
                        # However the job ended, an attempt still running (a failed
                        # stage's others, a speculative copy) is told "no" from now on.
                        if gate is not None:
                            gate.close()
        except GcError as e:
            # The watch ends before the STOP `_quiesce` writes: it would take that STOP for
            # another process's (`stop-marker`) and the failed round for interrupted.
            deleting_over()
            cut = cutoff if cutoff is not None and cutoff.fired and stop.requested else None
            gone = context_stopped(sc)
            if gone:
                # newuser13 Q11: under spark-submit the JVM is the parent; a SIGTERM to it
                # (a scheduler's stop) or a terminal's Ctrl-C runs its shutdown hook, which
                # stops the SparkContext (its py4j gateway then refuses connections). The
                # job failed because Spark ended, not a task: a stop, whose tasks are gone
                # with their executors; what they deleted is read from the journal (a
                # request they had sent is waited for, `_wait_for_sent`), never zeros.
                if not stop.requested:  # a further request would end the waits it led to
                    stop.request(SPARK_STOPPED)
                note(f"gc: {SPARK_STOPPED_LINE}; what its tasks deleted is read from the "
                     "journal")
            elif cut is not None:  # cancelled by the stop's bound: a stop, not a failure
                note(f"gc: {stop.reason}: the batches in flight took longer than "
                     f"{format_duration(cut.grace_s)}: the tasks still running were "
                     "cancelled; what they deleted is read from the store")
            else:
                failure = e
            # The stage failed (a task crashed, an executor was killed), but its other
            # attempts may still be deleting: the journal is read back only once none runs,
            # or a batch landing after the read-back would be in no record (issue 38).
            # A stop requested writes its own STOP (`arm_stop_marker`, from its thread): a
            # second write said the store's failure twice, and its wait twice (newuser12
            # P15, a store gone mid-round).
            # Spark gone: it runs no task, and cannot be asked (each call would fail).
            if not gone:
                _quiesce(sc, open_store, prefix, group, write_stop=not stop.requested,
                         on_error=note)
            quiesced = True
        except BaseException as exc:
            # A second signal (KeyboardInterrupt) or a driver-side bug: no task may go on
            # deleting behind a round that has ended; what they did is in the journal.
            # After an interrupt py4j has just shut its sockets down (`interrupt_under`): a
            # cancel that fails then must not replace the interrupt and skip the STOP and
            # the read-back below; the gate is closed and STOP follows, so no task starts
            # another batch either way.
            with (contextlib.suppress(Exception) if isinstance(exc, KeyboardInterrupt)
                  else contextlib.nullcontext()):
                cancel_on_stop(sc, group)
            summary.journal_read = False
            # A requested stop's STOP is its armed write's (newuser15 S7: a SIGINT after
            # the monitor's stop wrote a second, "stage failed", its wait said on a silent
            # store after the first one's failure); only an unrequested end writes one.
            with contextlib.suppress(Exception):
                _quiesce(sc, open_store, prefix, group, write_stop=not stop.requested)
            _read_back_now(summary, open_store, prefix, [])
            raise
        summary.delete_seconds = summary.list_seconds = time.monotonic() - t
    finally:
        if cutoff is not None:
            cutoff.over()  # before any later job
        if not context_stopped(sc):  # a stopped one has no jobs to come (newuser13 Q11)
            for k, v in caller_props.items():
                sc.setLocalProperty(k, v)  # type: ignore[arg-type]  # None: unset, as before
        if listener is not None:
            listener.close()
        if gate is not None:
            gate.close()
    # newuser14 R1(a): a signal that stops the round at once (`SignalAgain`: a second one,
    # or the first after a pause's or the monitor's stop) that landed from here to the
    # counts left them at 0 (the read-back cut short), and the round's final record said
    # "deleted 0" with its lease released while thousands of keys were gone. The counts
    # are unknown until the journal is read back: said so until then, and such a signal
    # finishes the read-back, without its waits, before the round ends (`_read_back_now`).
    summary.journal_read = False  # until it is read back: deletions unknown, not none
    try:
        if stop.reason is None and any(r.deleted.stopped for r in results):
            # A task stopped though this driver asked none to: it had no answer from the gate
            # in time, or found a STOP marker another process wrote. Its listing is partial
            # and the record must say so.
            stop.request("task-stopped")
        deleting_over()  # a look under way ends first: its stop request still counts below
        if not quiesced:
            # The stage is over: a request from now on writes no STOP of its own (this
            # one is written here) and is said as what the round does now.
            stop.disarm()
            stop.means = ("the delete stage is over; writing its STOP marker, then reading "
                          "the journal back and writing the record")
            # Review rev38q finding 3: an attempt of this stage still running (a speculative
            # copy being killed, a task of an executor taken for lost) that has no answer from
            # the closed gate falls back to the STOP marker, which a completed round did not
            # write: it deleted after the read-back, in no record. STOP (one PUT a round),
            # written once the watch has ended (it would take it for another process's), then
            # the tasks Spark still runs are waited for (the job is over: Spark kills the other
            # attempts of a partition once one succeeded, and none of a failed stage; no
            # cancel, which would reach jobs not ours). An attempt that asks from
            # now on is told no (the gate refuses, or it finds STOP); only a batch told "go"
            # before the gate closed can still land, and its task is one Spark runs, waited
            # for here. Not waited: the send bound (`send_within_s`, minutes) for an executor
            # Spark no longer sees (taken for lost yet running): every round would pay it.
            _quiesce(sc, open_store, prefix, group, reason="stage over", on_error=note,
                     cancel=False)
            quiesced = True
        stop.means = "no batch is in flight; reading the journal back and writing the record"
        summary.interrupted = stop.reason
        stop.work_over()  # a stop from now on stops nothing (newuser15 S4)
        # What the returned attempts wrote comes back with their results: only the entries of
        # attempts that did not return (killed, lost, a speculative copy) are read from the
        # store (issue 38, S3 at the limit: one GET per entry was 80 of a round's requests).
        totals = _read_journal(open_store, prefix, known_entries(results), functools.partial(
            _wait_for_sent, stop, note, sent_applied_s(open_store)),
            returned={r.attempt.name() for r in results},
            stopped={r.attempt.name() for r in results if r.deleted.stopped})
    except KeyboardInterrupt:
        summary.interrupted = summary.interrupted or stop.reason
        if not quiesced:  # its STOP and its wait for the tasks were cut short: done first
            with contextlib.suppress(Exception):
                _quiesce(sc, open_store, prefix, group, reason="stage over", cancel=False)
        _read_back_now(summary, open_store, prefix, results)
        raise
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
    listed_elsewhere(summary, totals)
    if stop.reason is not None or failure is not None or len(results) < len(groups):
        # A stopped task stops listing, a failed one returns nothing: the listing counts
        # are those of what the returned tasks listed (issue 41 item 3).
        partial_listing(summary, totals)
        why = (f"round interrupted ({stop.reason})" if stop.reason is not None
               else "round failed")
        note(f"gc: {why}: listing partial, at least {n_keys(summary.listed)} listed, "
             f"{summary.eligible:,} eligible; {summary.deleted:,} deleted{_gone(summary)} "
             f"(journal {prefix})")
    else:
        # One number format per line (issue 41 F5: "8,000 eligible, 8000 deleted").
        note(f"gc: listed {n_keys(scanned.listed)}, {scanned.eligible:,} eligible, "
             f"{summary.deleted:,} deleted (journal {prefix})")
        checkpoint("deletes-over")  # the signal tests' point: too late to stop anything
    if failure is not None:
        raise GcError(
            f"{failure}; {summary.deleted:,} key(s) were deleted before it{_gone(summary)}, "
            f"journal {prefix}",
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


# The stop reason of a round whose Spark ended under it (newuser13 Q11, `summary.py`), and
# its line.
SPARK_STOPPED_LINE = ("Spark stopped under the round (its driver JVM ended: under spark-submit, "
                      "a signal to spark-submit or its JVM stops it first)")


QUIESCE_LIMIT_S = 300.0  # a bound for a wedged cluster, not a timing assumption
# The local properties a job group sets (`SparkContext.setJobGroup`), restored after the stage.
_GROUP_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


def job_group(round_id: str) -> str:
    """The Spark job group of a round's list-and-delete stage."""
    return f"epochgc-gc-{round_id}"


def _quiesce(sc: Any, open_store: Callable[[], ObjectStore], prefix: str, group: str,
             write_stop: bool = True, reason: str = "stage failed",
             on_error: Callable[[str], None] | None = None, cancel: bool = True) -> None:
    """After the stage (failed, or over): STOP with `reason` (no attempt starts another
    batch; not `write_stop`: it is there already, with its reason), cancel the round's job
    `group`, and wait until Spark runs no task of it, so the journal read back after this
    holds every batch (an in-flight one finishes and is journaled, or its attempt is killed
    first; not `cancel`: none is cancelled, only waited for). Other jobs of the application
    are neither cancelled nor waited for (review rev38s finding 4). A STOP that cannot be
    written leaves only the wait; a wait that reaches `QUIESCE_LIMIT_S` ends (both said to
    `on_error`)."""
    try:
        if write_stop:
            store = open_store()
            try:
                write_marker(store, prefix, STOP, {"reason": reason})
            finally:
                store.close()
    except (StoreError, OSError) as e:
        if on_error is not None:
            on_error(f"gc: warning: the journal's STOP marker ({reason}) not written: {e}")
    if cancel:
        sc.cancelJobGroup(group)
    deadline = time.monotonic() + QUIESCE_LIMIT_S
    while (running := _running_tasks(sc, group)) and time.monotonic() < deadline:
        time.sleep(0.05)
    if running and on_error is not None:
        on_error(f"gc: warning: {running} task(s) of this round's stage still run "
                 f"{format_duration(QUIESCE_LIMIT_S)} after it ended ({reason}): the journal "
                 "is read back without them; a batch they finish later is in no record")


def _running_tasks(sc: Any, group: str) -> int:
    """Tasks of the round's job `group` still running: the active tasks of every stage of
    its jobs, from Spark's status tracker (`StatusTracker.getJobIdsForGroup`,
    `getJobInfo(..).stageIds`, `getStageInfo(..).numActiveTasks`:
    https://spark.apache.org/docs/latest/api/python/reference/api/pyspark.StatusTracker.html).
    A stage that has completed or failed keeps its count until its last task has ended
    (Spark's AppStatusListener keeps such a stage live until then, SPARK-24415), so the
    killed attempts of a failed or cancelled stage and a speculative copy being killed are
    counted."""
    tracker = sc.statusTracker()
    running = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job is not None else ():
            stage = tracker.getStageInfo(stage_id)
            if stage is not None:
                running += int(stage.numActiveTasks)
    return running


# How long after an attempt has ended a DeleteObjects it had sent may still be applied:
# bounds.py's model, a connect and a first answer (`CONNECT_TIMEOUT_S + READ_TIMEOUT_S`,
# 70 s), what a recovery waits for a request already sent.
SENT_APPLIED_S = CONNECT_TIMEOUT_S + READ_TIMEOUT_S
# The wait for it (looked up at each call: a test applies the held request there instead).
SENT_WAIT_SLEEP: Callable[[float], None] = time.sleep


def sent_applied_s(open_store: Callable[[], ObjectStore]) -> float:
    """`SENT_APPLIED_S` for a store behind a server; 0 for a local directory, whose deletes
    are system calls of the task's own process: a process killed during one exits only
    once it has returned (a fatal signal is acted on when the call returns to user mode,
    signal(7)), so when Spark has seen the attempt end, nothing it asked for is pending."""
    return 0.0 if _is_local(open_store) else SENT_APPLIED_S


def _wait_for_sent(stop: RoundStop, note: Callable[[str], None], applied_s: float,
                   batches: int, ago_s: float = 0.0) -> bool:
    """Before the read-back asks the store about the keys of `batches` batches whose
    attempts neither finished them nor returned (killed by the stop's cutoff, a failed
    stage, a speculative copy Spark killed, an executor lost), or whose outcome names keys
    of unknown fate (a request that went unanswered: review rev38z finding 6): a request
    such an attempt had sent may still be applied by the server after the attempt has ended,
    and a key found still there would be counted an error though the request then deletes it
    (review rev38s finding 2). Wait `applied_s` (`sent_applied_s`) from now, less `ago_s`,
    how long before its outcome was written the latest unanswered request of those batches
    ended (their outcomes say, `read_journal`; 0 where one does not, or for a batch with no
    outcome). Measured from now, not from when Spark was last seen running a task of the
    stage (review rev38z4 finding 2): an attempt Spark no longer tracks (an executor taken
    for lost, a task still running at `QUIESCE_LIMIT_S`) may write its outcome after that;
    every outcome read was written before the driver read it, and this is called after the
    journal was read, so its request ended no later than `ago_s` before now, and a batch
    without outcome ended no later than now. The cost: the journal's listing and reading
    are added to a wait of at most `applied_s`. A key of unknown fate whose requests were
    all answered is not waited for. Not
    bounded so: an attempt Spark saw end whose process lives on (an executor taken for lost)
    and sends a batch it was told "go" for before the gate closed (`send_within_s` after
    that). A round whose every attempt returned, or whose other attempts' journals hold an
    outcome for every batch they sent, and no outcome a key of unknown fate, never comes
    here. A request to stop (a signal, --deadline; a further one if the round was stopped
    already) ends the wait: False then, and a key still there is of unknown fate, not an
    error."""
    left = applied_s - max(0.0, ago_s)
    if left <= 0:
        return True
    note(f"gc: up to {batches} delete batch(es) have no outcome (task attempts that did not "
         f"finish: killed or lost) or a request that went unanswered: waiting {left:.0f} s "
         f"(a request they sent may be applied up to {applied_s:.0f} s after they ended) "
         "before asking the store about their keys; a signal or the deadline ends the wait")
    sleep, before = SENT_WAIT_SLEEP, stop.requested
    try:
        if sleep is time.sleep:
            ended = stop.wait_further(left, before)
        else:  # injected (tests): called as it is, the stop looked at after it
            sleep(left)
            ended = stop.wait_further(0, before)
    except KeyboardInterrupt:  # a second signal: the operator insists
        ended = True
    if ended:
        note("gc: the wait was ended: keys of those batches still in the store are counted "
             "of unknown fate (a request in flight may yet delete them)")
    return not ended


def _read_back_now(summary: GcSummary, open_store: Callable[[], ObjectStore], prefix: str,
                   results: list[TaskResult]) -> None:
    """The journal read back for a round a signal ends at once (`SignalAgain`: the operator
    insists): no wait, so a key its killed tasks' requests may yet delete is of unknown fate,
    not an error (review rev38s finding 2). The requests are bounded as any stopped round's
    (`stop.driver_bound`: none retried, none sent once the store left one unanswered): on a
    store that answers it is short; one that fails leaves `journal_read` false, and the
    round's lines and record say the counts are not known (never 0: newuser14 R1(a))."""
    with contextlib.suppress(GcError):
        totals = _read_journal(open_store, prefix, known_entries(results),
                               before_asking=lambda n, ago: False,
                               returned={r.attempt.name() for r in results} if results else None,
                               stopped={r.attempt.name() for r in results if r.deleted.stopped})
        _count(summary, totals)
        if results:  # the tasks returned their listing counts
            scanned = ScanStats()
            for r in results:
                scanned.add(r.scanned)
            _fill_scan(summary, scanned)
            listed_elsewhere(summary, totals)
        partial_listing(summary, totals)  # a stopped round's listing is partial


def _count(summary: GcSummary, totals: JournalTotals) -> None:
    summary.deleted = len(totals.deleted)
    summary.already_gone = len(totals.already_gone)
    summary.changed = len(totals.changed)
    summary.errors = len(totals.errors)
    summary.unknown = len(totals.unknown)
    summary.bytes_deleted = totals.bytes_deleted
    summary.gone_unattributed = len(totals.gone_unattributed)
    summary.bytes_gone_unattributed = totals.bytes_gone_unattributed
    summary.max_deleted_epoch = max_epoch(totals.deleted)
    summary.delete_requests = totals.batches
    summary.error_samples.extend(totals.error_samples())
    summary.error_samples.extend(totals.unknown_samples())
    summary.unreadable_entries = totals.unreadable
    summary.journal_read = True


def partial_listing(summary: GcSummary, totals: JournalTotals) -> None:
    """Mark the listing counts partial and raise them to what the journal proves: every
    key it names as deleted, already gone, rewritten or failed was listed and eligible
    (issue 41 item 3: a SIGTERM'd round recorded eligible 12585, deleted 14585)."""
    proven = (set(totals.deleted) | totals.already_gone | totals.changed | set(totals.errors)
              | set(totals.unknown) | set(totals.gone_unattributed))
    summary.listing_complete = False
    summary.eligible = max(summary.eligible, len(proven))
    summary.eligible_bytes = max(summary.eligible_bytes,
                                 totals.bytes_deleted + totals.bytes_gone_unattributed)
    summary.listed = max(summary.listed, summary.eligible)
    summary.fetched = max(summary.fetched, summary.listed)


def listed_elsewhere(summary: GcSummary, totals: JournalTotals) -> None:
    """Add to the returned attempts' listing counts the keys only attempts that did not
    return named (`JournalTotals.listed_elsewhere`): a task Spark retried lists its
    partition again without the keys its failed attempt's requests removed, so the record
    said eligible below deleted + gone_unattributed (review rev38x, "not verified" 1).
    `listed` stays a lower bound there (what such an attempt listed and found not eligible
    is not journaled)."""
    extra = totals.listed_elsewhere
    summary.eligible += len(extra)
    summary.eligible_bytes += sum(extra.values())
    summary.listed += len(extra)
    summary.fetched += len(extra)


def max_epoch(keys: Iterable[str]) -> int | None:
    """The highest epoch among deleted keys (None if none), parsing one key per directory:
    every key `level_zero/data/NNN/EPOCH/name` of a directory has its epoch, and a round's
    100k keys sit in about 5,000 directories (a parse per key was 0.15-0.28 s of the
    driver's work after the stage, issue 29)."""
    one_per_dir = {k.rpartition("/")[0]: k for k in keys}
    return max((parse_key(k).epoch for k in one_per_dir.values()), default=None)


def _read_journal(open_store: Callable[[], ObjectStore], prefix: str,
                  known: Mapping[str, bytes] | None = None,
                  before_asking: Callable[[int, float], bool] | None = None,
                  returned: Collection[str] | None = None,
                  stopped: Collection[str] = ()) -> JournalTotals:
    store = open_store()
    try:
        return read_journal(store, prefix, known=known, before_asking=before_asking,
                            returned=returned, stopped=stopped)
    except StoreError as e:  # it cannot be listed; entries that cannot be read are skipped
        raise GcError(f"the deletion journal {prefix} cannot be read back: {e}",
                      deleting=True) from e
    finally:
        store.close()


def known_limit(sc: Any, tasks: int) -> int:
    """Bytes of journal entries each task may return with its result: all tasks' together at
    most half of spark.driver.maxResultSize (Spark aborts a job whose results pass it; 0
    means no limit), and at most `KNOWN_LIMIT` each."""
    try:
        most = int(sc._jsc.sc().conf().getSizeAsBytes("spark.driver.maxResultSize", "1g"))
    except Exception:  # no JVM view of the conf: Spark's default
        most = 1 << 30
    if most <= 0:
        return KNOWN_LIMIT
    return min(KNOWN_LIMIT, most // (2 * max(1, tasks)))


def known_entries(results: Iterable[TaskResult]) -> dict[str, bytes]:
    """The journal entries the returned attempts wrote (name under the journal -> bytes)."""
    known: dict[str, bytes] = {}
    for r in results:
        known.update(r.journal)
    return known


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
    would-be manifest: nothing is deleted, so there is nothing to overlap.

    A stop (SIGINT, SIGTERM, --deadline) cancels the listing job (issue 41: the dry run
    listed on to its end, wrote --list and exited 0): it deletes nothing, so there is no
    marker to write and no batch to let finish; it ends `interrupted` and writes neither
    the manifest nor the --list file, which would look complete."""
    summary, stop = rnd.summary, rnd.stop
    try:
        finished = _dry_listing(spark, rnd, groups)
    except Exception:
        if not stop.requested:
            raise
        # The job failed because it was cancelled (or failed as it was): either way the
        # operator asked to stop, and nothing was written.
        finished = False
    if not finished:
        summary.interrupted = stop.reason


def _dry_listing(spark: SparkSession, rnd: _Round, groups: list[list[int]]) -> bool:
    """The dry run's job: list, classify, re-read M, write the would-be manifest and
    --list; each step only if no stop was requested before it. False if one was."""
    options, summary, stop, note = rnd.options, rnd.summary, rnd.stop, rnd.note
    # Issue 41 F6: a dry run stopped before its listing counts were taken said
    # `listing_complete: true` with `listed: 0`; complete only once every task's are in.
    summary.listing_complete = False
    sc = spark.sparkContext
    # From another thread: the main thread is inside the job's `collect`; the signal
    # handler only records the request (`impl.gc.stop`).
    stop.means = "cancelling the listing (a dry run deletes nothing)"
    stop.arm(lambda: cancel_on_stop(sc), note, "cancel the listing")
    listener = _listener(sc, rnd.say)
    scan = functools.partial(scan_task, rnd.open_store, rnd.m, rnd.now, options.grace_s,
                             options.page_size,
                             beacon=None if listener is None else listener.target)
    rows = sc.parallelize(groups, len(groups)).mapPartitions(
        lambda it: scan(p for group in it for p in group)
    )
    rows = rows.persist(_storage_level())
    try:
        t = time.monotonic()
        sc.setJobDescription("epochgc gc: list and classify")
        with stage_progress(sc, "gc: listing", rnd.say, listener,
                            stopped=lambda: rnd.stop.requested), _spark_errors("listing"):
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
        if stop.requested:  # came as the listing ended: its counts are not the whole
            return False
        _fill_scan(summary, scanned)
        summary.listing_complete = True
        note(f"gc: listed {n_keys(scanned.listed)}, {scanned.eligible:,} eligible")
        summary.failed_check = _failed_check(scanned, options)
        if scanned.eligible:
            # Re-read before the manifest: if M went backwards, nothing decided with the
            # old reports may be listed as deletable.
            recheck = _recheck(rnd.open_store, rnd.clock(), options.max_report_age_s)
            verdict = recheck_before_delete(rnd.m, recheck.gc_epoch())
            if isinstance(verdict, Blocked):
                summary.blocked = verdict.why
                summary.safety_blocked = True
                return True
            if isinstance(verdict, Refused):
                summary.refused = verdict.why
                return True
            assert isinstance(verdict, Go)
        if stop.requested:
            return False
        if options.manifest is not None:  # what would be deleted, after the re-read
            _write_manifest(spark, rows.filter(lambda r: r[0] == ELIGIBLE), options.manifest)
            summary.manifest = options.manifest
        if options.list_keys is not None:  # the same keys, one a line (Delta's DRY RUN)
            keys = rows.filter(lambda r: r[0] == ELIGIBLE).map(lambda r: r[1])
            found = sorted(keys.toLocalIterator())
            if stop.requested:  # toLocalIterator may end early when its job is cancelled
                return False
            _list_keys(found, options.list_keys, summary)
        return True
    finally:
        rows.unpersist()
        sc.setJobDescription(None)  # type: ignore[arg-type]
        if listener is not None:
            listener.close()


def _list_keys(keys: list[str], target: str, summary: GcSummary) -> None:
    """Write the would-be-deleted keys to `target` (created, never overwritten), or keep
    them for the CLI to print on stdout ("-")."""
    if target == "-":
        summary.would_delete = keys
        return
    made = False
    try:
        with open(target, "x", encoding="utf-8") as f:
            made = True
            f.writelines(k + "\n" for k in keys)
    except OSError as e:
        from epochgc.impl import errorline  # the driver's: click stays out of the tasks

        # A part of the list would read as the whole (newuser25 H5: 50,000 bytes left under
        # `ulimit -f`, unsaid, and the next run refused the existing file): ours, removed.
        removed = ""
        if made:
            with contextlib.suppress(OSError):
                os.unlink(target)
                removed = "; the partial list was removed"
        raise GcError(f"--list file {target}: {errorline.os_error(e, with_file=False)}"
                      f"{removed}") from e
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


def _gone(summary: GcSummary) -> str:
    """A stopped or failed stage's keys gone unattributed, after its deleted count: tasks
    killed mid-request leave them (rev38v finding 3), so a crash line without them would
    not add up to what left the store."""
    if not summary.gone_unattributed:
        return ""
    return f" ({summary.gone_unattributed:,} more left the store {GONE_WHERE_SHORT})"
