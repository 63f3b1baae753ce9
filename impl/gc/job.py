"""One GC round as a PySpark job: options checked, the lease, the cluster view and M, then
the Spark stages (`stage.py`), and the round's record, whatever ended it.

Driver: read the reports and compute M with the model, then hand the listing and deleting
to the executors (`stage.py`). Every round that gets past option validation writes its
deletion record (`record.py`), counted from its deletion journal (`journal.py`), except
one a signal ended before it wrote anything (`RoundStop.before_round`: no round began).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING

from epochgc.impl import errorline
from epochgc.impl.gc.admin import read_admin_state
from epochgc.impl.gc.errors import GcError, NotAStore, ReportError, StoreUnreadable
from epochgc.impl.gc.killpoint import reach
from epochgc.impl.gc.lease import DEFAULT_LEASE_S, Lease, LeaseBusy
from epochgc.impl.gc.manifest import check_manifest_outside_data
from epochgc.impl.gc.monitor import HealthVerdict, assess, stale_reason
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.gc.record import new_round_id
from epochgc.impl.gc.reports import PARTITIONS_KEY, REPORT_READERS, ClusterView, read_cluster_view
from epochgc.impl.gc.sequence import SequenceError, check_room
from epochgc.impl.gc.session import launched_by_spark_submit
from epochgc.impl.gc.stage import _Round, _with_spark
from epochgc.impl.gc.stop import RoundStop, SignalAgain, deadline_timer
from epochgc.impl.gc.summary import SPARK_STOPPED, GcSummary, Refusal
from epochgc.impl.gc.text import printable
from epochgc.impl.gc.versioning import check_versioning, dry_run_note
from epochgc.impl.shortlist import short_tail
from epochgc.impl.store.base import ObjectStore, StoreError
from epochgc.impl.store.driverbound import current as driver_bound
from epochgc.model.cluster import GcEpoch, partition_epochs
from epochgc.model.keys import PREFIXES

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_gc(
    spark: SparkSession | Callable[[], SparkSession | None],
    open_store: Callable[[], ObjectStore],
    options: GcOptions = GcOptions(),  # frozen: a shared default is safe
    *,
    clock: Callable[[], float] = time.time,
    say: Callable[[str], None] | None = None,
    stop: RoundStop | None = None,
    control: Callable[[], ObjectStore] | None = None,
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
    `.error` set). `control`: opens the store for the reads before the round (default
    `open_store`; the CLI's bounds S3's reads and says a read that waits: issue 41). A
    signal before the round begins (`RoundStop.before_round`) ends it at once and writes
    nothing: the summary says `interrupted`, `unstarted`, no record."""
    options.validate()
    now = clock()
    summary = GcSummary(dry_run=options.dry_run, started_at=now, round_id=new_round_id(now))
    own_stop = stop is None  # its helper threads end with the round (`RoundStop.close`)
    stop = stop if stop is not None else RoundStop()
    started = time.monotonic()
    record = not options.dry_run  # a dry run writes nothing anywhere (issue 29)
    timer = None if options.deadline_s is None else deadline_timer(stop, options.deadline_s)
    held: list[Lease] = []  # released only once the record is written (below)
    try:
        try:
            _round(spark, open_store, control or open_store, options, now, clock, say,
                   summary, stop, held)
        except (NotAStore, StoreUnreadable, SequenceError) as e:
            # Nothing is written into a directory that is not a store (a mistyped path), not
            # even a record (issue 29), nor into one whose first read failed (newuser9 K4:
            # a record numbered and PUT where nothing could be read); nor a record that
            # could not be ordered (N8: raised only by `check_room`, before the round
            # writes or deletes anything).
            record = False
            summary.error = str(e)
            summary.listing_complete = False  # raised before any listing (newuser13 Q8)
            e.summary = summary
            raise
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt) and stop.cut_short:
                # Before the round wrote anything (newuser8 I10: a Ctrl-C said "ending the
                # round", waited 10 minutes for a read, then exited 1 with "its record
                # stands"): nothing to record, nothing held; the signal's exit code.
                record = False
                summary.interrupted = stop.reason or "SIGINT"
                summary.unstarted = True
                return summary
            # Whatever ended the round (a store, a Spark job, a bug, a second Ctrl-C), the
            # record and the exit code say so: never `done` with exit 0.
            summary.error = summary.error or describe(e)
            if isinstance(e, KeyboardInterrupt) and summary.interrupted is None:
                summary.interrupted = stop.reason or "SIGINT"
            bound = driver_bound()
            if (isinstance(e, StoreError | GcError) and summary.interrupted is None
                    and bound is not None and bound.silent.is_set()):
                # The stop's request found the store silent and its write was not retried
                # (newuser10 L4): the round ended by the stop, so the stop's exit code.
                summary.interrupted = stop.reason
            if isinstance(e, StoreError):
                err = GcError(str(e))
                err.summary = summary
                raise err from e
            # Any other exception keeps its type and carries the summary (the CLI reports it).
            with contextlib.suppress(AttributeError):
                e.summary = summary  # type: ignore[attr-defined]
            raise
        finally:
            # A later signal is said, never raised, from here on (newuser3 N1: a second Ctrl-C
            # landing here left no record, or a live lease that refused rounds for 10 minutes).
            with stop.finishing(record, bool(held), options.dry_run):
                if timer is not None:
                    timer.cancel()
                summary.seconds = time.monotonic() - started
                # Its JVM gone under spark-submit (the stage's finding, or `watch_jvm`'s):
                # the command's exit code is spark-submit's, not the driver's to record
                summary.exit_unseen = (summary.interrupted == SPARK_STOPPED
                                       and launched_by_spark_submit())
                lost = _lease_lost(open_store, held) if record else None
                if lost is not None and summary.interrupted is None and summary.error is None:
                    # newuser5 G3: a lease removed (`reset --force --even-if-running`) after
                    # the watch's last look; the record says so, never `done`.
                    summary.interrupted = "lease-lost"
                    if say is not None:
                        say(f"gc: {lost}")
                    # Found only now, after the round returned: its work is whole as the
                    # stage counted it (newuser8 I1: a round that had listed and deleted
                    # all recorded `listing_complete: false`); `listing_complete` stays.
                elif summary.interrupted is not None:
                    # A stopped round never claims a complete listing (newuser3 N1: one
                    # stopped before its tasks said `listing_complete: true`, listed 0).
                    summary.listing_complete = False
                # A signal after a stop of another kind ends the command by it; from here a
                # signal changes nothing (newuser14 R1; `RoundStop.decide`).
                summary.signal_after_stop = stop.decide()
                try:
                    if record:
                        _write_record(open_store, summary, options, leased=bool(held))
                finally:
                    # The lease is held until the record is written (issue 38 item 1): a round
                    # without its lease has its record, so whoever takes the lease over may
                    # take every journal without a record for a dead round's.
                    for lease in held:
                        lease.release()
    except BaseException as e:
        # Whatever escaped, even from the record's own writing, carries the round's summary:
        # the CLI's fallback knows nothing of the round (newuser3 N1: `deleted 0`, `record
        # null`, "nothing was deleted" after 1,500 deletes).
        if getattr(e, "summary", None) is None:
            with contextlib.suppress(AttributeError):
                e.summary = summary  # type: ignore[attr-defined]
        raise
    finally:
        if own_stop:
            stop.close()
    return summary


def _lease_lost(open_store: Callable[[], ObjectStore], held: list[Lease]) -> str | None:
    """Why the round's lease is no longer its own, as of one last look before its record
    (None: it is, no lease was held, or the store cannot tell: a failed request claims
    nothing)."""
    for lease in held:
        if lease.lost is not None:
            return lease.lost
        try:
            store = open_store()
            try:
                return lease.look(store)
            finally:
                store.close()
        except (StoreError, OSError):
            return None
    return None


def check_is_store(store: ObjectStore) -> None:
    """NotAStore unless the store holds `_cluster/partitions.json` (a regular object);
    StoreUnreadable if that cannot be read (the round then writes nothing either)."""
    try:
        found = store.head(PARTITIONS_KEY)
    except StoreError as e:
        raise StoreUnreadable(f"cannot read {PARTITIONS_KEY}: {e}; nothing was written") from e
    if found is None:
        why = store.missing_root() or f"no {PARTITIONS_KEY}"
        raise NotAStore(f"{store.describe()} is not an epochgc store ({why}); "
                        "nothing was written")


def describe(e: BaseException) -> str:
    """A round's failure for its record and its error line: our own errors' messages; an
    OSError in the C library's words (errorline.os_error), said to be Spark's when PySpark
    raised it; anything else with its class, which says what went wrong (`KeyError: 'x'`)."""
    if isinstance(e, GcError | StoreError | SignalAgain):
        return str(e)
    if isinstance(e, OSError):
        return ("Spark's driver: " if errorline.in_spark(e) else "") + errorline.os_error(e)
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def _write_record(
    open_store: Callable[[], ObjectStore], summary: GcSummary, options: GcOptions,
    *, leased: bool = True,
) -> None:
    """Write the round's record (its END first, with a journal); a failure is kept in
    `summary.record_error` with what to do (`record_advice`). `leased`: whether the round
    took the store's lease (a round blocked, paused or refused before it took none)."""
    from epochgc.impl.gc.record import number_round, record_document, write_record
    from epochgc.impl.gc.recover import drop_own_end, write_own_end

    try:
        store = open_store()
        try:
            number_round(store, summary)  # END and the record carry the round's number
            recovered = False
            if summary.journal is not None:  # END: the journal's last word on the round
                # over a recovery's END (the round taken for dead): marked, so that a
                # record PUT that fails now still ends as this END (review rev38o finding 3)
                recovered = write_own_end(store, summary.journal, record_document(summary, {}))
                reach("end-written")
            summary.record = write_record(store, summary, asdict(options))
            if recovered and summary.journal is not None:
                with contextlib.suppress(StoreError):  # the next look removes it
                    drop_own_end(store, summary.journal)
            reach("record-written")
        finally:
            store.close()
    except (StoreError, OSError) as e:  # a round's outcome stands; the record is reported
        summary.record_error = str(e)
        bound = driver_bound()
        if bound is not None and bound.silent.is_set():
            summary.record_error = f"the store does not answer ({e})"
        # newuser10 L4/L5: stopped on a store gone silent; newuser13 Q2: any record not
        # written (a store that refuses, too): say what records it later (the dead-round
        # recovery reads the journal back; without one nothing was deleted and only the
        # lease is left). Its lease stays held (its release fails as the record did).
        # newuser18 U3b: without a lease taken there is none to remove (a blocked round,
        # or one whose lease the store refused): `reset --force` is not said then.
        summary.record_advice = (
            "`epochgc gc-admin reset --force` (same --store) records it later from its "
            f"journal {summary.journal} once the store answers, and removes its lease"
            if summary.journal is not None
            else "nothing was deleted (no journal was started); `epochgc gc-admin reset "
            "--force` (same --store) removes its lease" if leased
            else "nothing was deleted and no lease was taken: nothing to clean up; this "
            "output is the round's only account")


def _round(
    spark: SparkSession | Callable[[], SparkSession | None],
    open_store: Callable[[], ObjectStore],
    control: Callable[[], ObjectStore],
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
    store = control()  # reads only, until the round begins (`stop.round_begins`)
    try:
        check_is_store(store)  # before anything is written, a record included
        if not options.dry_run:
            # Its record must be numbered and ordered (newuser3 N8): a damaged sequence, or
            # one at its end, refuses the round before it writes anything (no record: it
            # could not be ordered), naming the marker.
            check_room(store)
        # Issue 30: a store whose GC an operator paused refuses real rounds (fail closed:
        # an unreadable pause state counts as paused). A dry run deletes nothing: it runs.
        admin = read_admin_state(store)
        if admin.paused and not options.dry_run:
            summary.paused = admin.why()
            summary.refusal = Refusal.PAUSED
            note(f"gc: {printable(summary.paused)}")  # from the store: escaped (K6)
            return
        if admin.paused:
            # A dry run deletes nothing, so it runs (exit 0), but says the store is paused
            # and that a real round would not run (newuser41: not a word of it, exit 0).
            summary.paused_note = (f"dry run on a paused store: {admin.why()}; a real round "
                                   "would be refused (exit 3)")
            note(f"gc: {printable(summary.paused_note)}")
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
        if options.dry_run:  # it deletes nothing: it runs, and says what a round would do
            summary.versioned_note = dry_run_note(store, options.allow_versioned)
            if summary.versioned_note is not None:
                note(f"gc: {summary.versioned_note}")
        else:
            check_versioning(store, options.allow_versioned)  # before anything is listed
    finally:
        store.close()
    if stop.requested:
        # Issue 41 F5: a stop that came while the store was read (SIGINT at 0.3 s) was
        # said ("ending the round"), then work was announced after it ("listing 1000
        # prefixes"): the round ends here, before a decision, the lease, Spark or a
        # listing.
        summary.interrupted = stop.reason
        return
    decision = view.gc_epoch()
    model_blocked = decision.blocked is not None  # not the monitor's (which names nodes)
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
    if model_blocked and decision.blocked is not None and view.stale_nodes:
        # The cause first (newuser12 P7): nodes that stopped reporting leave partitions
        # without a fresh report; `short_tail` still shortens the list after it.
        summary.blocked = f"{stale_reason(view.stale_nodes)}; {decision.blocked}"
    summary.M = decision.M
    if decision.blocked is not None or decision.M is None:
        # The full list stays in the record and --json; the line names the first ones
        # (newuser9 K9: lines of ~20,000 characters on a cluster of 1,800 partitions).
        why = short_tail(summary.blocked) if summary.blocked else "nothing collectible"
        note(f"gc: no collection this round ({why})")
        return
    m = decision.M
    note(f"gc: M={m} (snapshot revision {view.revision}); listing {PREFIXES} prefixes")

    if not options.dry_run:
        # The conditional-write probe (the lease's precondition) before the round begins:
        # its requests are bounded and said as the reads are, and a signal ends it at once
        # (newuser10 L6: a slow DeleteObjects held `gc` silent, and a Ctrl-C with it, 60 s
        # per attempt). The lease's own store then knows this server (`S3Store._PROBED`).
        probe = control()
        try:
            probe.require_conditional_writes()
        finally:
            # A probe cut short may have written its object (newuser10 L10: the line then
            # said "nothing was written"): the summary names it.
            summary.probe_left = getattr(probe, "probe_left", None)
            probe.close()
    # From here the round writes to the store (its lease) or starts Spark: a signal stops
    # it gracefully, and a round with a lease gets its record.
    stop.round_begins()
    if not options.dry_run:
        # One round at a time on a store (issue 29): held from before Spark starts to
        # after its record (`run_gc` releases it); refused naming the holder.
        lease = Lease(open_store, summary.round_id)
        try:
            lease.acquire()
        except GcError as e:
            summary.refusal = Refusal.LEASE  # turned away: nothing of it started
            summary.lease_busy = isinstance(e, LeaseBusy)
            raise
        held.append(lease)

        def lost(why: str) -> None:
            note(f"gc: {why}; stopping")
            stop.request("lease-lost")

        # Renewed from now on: the recovery below may read back many journals and waits
        # each dead round's stop bound (review rev38m finding 4: renewals started after it,
        # so a long recovery left the lease unsure, or let it expire before its first
        # renewal).
        lease.keep(lost)
        # Before anything else (issue 38 item 1): the rounds whose driver died get their
        # records. Holding the lease, no other round may be running.
        summary.recovered = _recover(open_store, summary.round_id, note, stop)
        if stop.requested:
            # A signal or the deadline ended the recovery's wait (review rev38n finding
            # 6): nothing of this round was started; the dead rounds keep their STOP and
            # the next round records them.
            summary.interrupted = stop.reason
            return
    _with_spark(spark, _Round(open_store, options, view, m, now, clock, say, summary, stop,
                              held[0].firm if held else None,
                              held[0].duration_s if held else DEFAULT_LEASE_S,
                              held[0].look if held else None))


def _recover(open_store: Callable[[], ObjectStore], round_id: str,
             note: Callable[[str], None], stop: RoundStop) -> list[str]:
    """Record every dead round (`recover.recover_dead_rounds`); what could not be done is
    said and left for the next look (this round's own deletes are safe either way). A
    request to stop ends the wait before their read-back: they stay unrecorded."""
    from epochgc.impl.gc.recover import (
        left_line,
        recover_dead_rounds,
        unrecordable_line,
        waiting_line,
    )

    waited: list[str] = []  # the rounds whose wait began (newuser7 H7)

    def waiting(seconds: float, rounds: list[str]) -> None:
        waited[:] = rounds
        note(f"gc: {waiting_line(seconds, rounds)}")

    try:
        store = open_store()
        try:
            done = recover_dead_rounds(
                store, f"round {round_id}", lambda: {round_id}, waiting=waiting,
                left=lambda s, rounds: note(f"gc: {left_line(s, rounds)}"),
                stop=stop, damaged=lambda e: note(f"gc: warning: {unrecordable_line(e)}"))
        finally:
            store.close()
    except (StoreError, OSError) as e:
        note(f"gc: warning: unfinished rounds' journals not read back: {e}")
        return []
    left = [r for r in waited if r not in {d.round_id for d in done}]
    if stop.requested and left:
        # Only when the wait for dead rounds was under way, naming them (newuser7 H7: said
        # with no unfinished round, for a signal before Spark started).
        many = len(left) > 1
        note(f"gc: {stop.reason} while waiting for round{'s' if many else ''} "
             f"{', '.join(left)}: {'they keep their' if many else 'it keeps its'} STOP and "
             f"{'are' if many else 'is'} recorded by the next round or `gc-admin reset`")
    for r in done:
        at_least = "at least " if r.lower_bound else ""  # unreadable entries: a lower bound
        note(f"gc: round {r.round_id}'s driver ended before {r.gone_before()}: recorded as "
             f"{printable(r.outcome)}, {at_least}{r.deleted:,} key(s) deleted"
             f"{r.gone_text()} ({r.record})")
    return [r.round_id for r in done]


def min_partition_epoch(view: ClusterView) -> int | None:
    """The lowest partition GC epoch M(p) (max over a partition's fresh replica reports);
    None when a partition has none (the round is blocked) or the table is empty."""
    best = partition_epochs(list(view.partitions), view.counted())
    values = [v for v in best.values() if v is not None]
    return min(values) if values and len(values) == len(best) else None
