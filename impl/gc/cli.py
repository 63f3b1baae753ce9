"""`epochgc gc`: one GC round from the command line (also the spark-submit entry point).

Exit codes (impl/exitcodes.py): 0 done; 1 incomplete (malformed keys without
--skip-malformed, delete errors, M moved backwards, an unreadable store, a failed Spark
job); 2 blocked round (health reports missing, unreadable or invalid; the safety monitor);
3 paused (a --dry-run on a paused store runs, exit 0, and says so on stderr);
64 bad arguments or an output path that cannot be written; 69 a missing extra;
130 / 143 / 129 interrupted (SIGINT / SIGTERM / SIGHUP).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import shutil
import signal
import sys
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import click

from epochgc.impl import closedout, errorline, jsonfailure, pathopt
from epochgc.impl.entry import end_by
from epochgc.impl.exitcodes import ExitCode
from epochgc.impl.gc.duration import SPAN, at_most, format_duration
from epochgc.impl.gc.errors import GcError
from epochgc.impl.gc.job import describe, run_gc
from epochgc.impl.gc.manifest import inside_data_problem, manifest_target
from epochgc.impl.gc.masterurl import master_problem
from epochgc.impl.gc.options import DEFAULT_MAX_REPORT_AGE_S, MAX_REPORT_AGE_S, GcOptions
from epochgc.impl.gc.reports import MAX_WRITTEN_AT
from epochgc.impl.gc.stop import (
    SIGNALS,
    STOPPED_AT_ONCE,
    HeldSignal,
    LateSignal,
    OutputProgress,
    Restore,
    RoundStop,
    absorb_late_signal,
    announce,
    driver_bound,
    hold_signals,
    install_signal_handlers,
    interruptible_output,
)
from epochgc.impl.gc.summary import EXIT_USAGE, GcSummary
from epochgc.impl.gc.text import GONE_WHERE_SHORT, echo_safe, printable
from epochgc.impl.preflight import (
    Refused,
    creatable_path,
    pushgateway_address,
    pushgateway_unreachable,
    require_spark,
    store_modules,
    writable_file,
)
from epochgc.impl.progress import Reporter
from epochgc.impl.signals import checkpoint
from epochgc.impl.store.base import StoreError
from epochgc.impl.store.driverbound import installed
from epochgc.impl.store.patience import (
    BadSetting,
    Patience,
    check_settings,
    waiting_line_after_s,
)
from epochgc.impl.store.url import StoreSpec, open_control, parse_store_url

# The GC's optional dependencies and the extra that installs each (`pip install
# 'epochgc[gc]'` installs both). They stay extras: the base install also serves the model,
# the Raft core and the cluster, and pyspark alone is ~300 MB and needs a Java runtime that
# pip cannot install anyway.
_NEEDS = {"pyspark": "spark", "boto3": "s3"}


class _Usage(click.UsageError):
    exit_code = EXIT_USAGE


class _GcCommand(click.Command):
    """Bad arguments exit 64, so that 2 always means "blocked round" to a scheduler. With
    --json, a failure before the round's own JSON (a bad argument, a missing extra) is one
    object on stdout too (`jsonfailure`, the shape gc-admin's failures have). Its errors
    are `epochgc gc: error: ...` run alone too (under spark-submit, impl/gc/submit.py), not
    click's `Error: ...` (impl/errorline.py)."""

    context_class = errorline.Context

    def make_context(
        self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any
    ) -> click.Context:
        if parent is not None:
            jsonfailure.note_before_parsing(parent, self, args)
        try:
            ctx = super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as e:
            if parent is not None:
                jsonfailure.say(parent, "gc", "error", e.format_message(), EXIT_USAGE)
                # Its usage and name when click's parser gave no context (s29a).
                raise errorline.shaped(e, parent) from None
            raise errorline.UsageFailure(e.format_message(), e.ctx) from None
        jsonfailure.note_parsed(ctx)
        return ctx

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException as e:
            code = EXIT_USAGE if isinstance(e, click.UsageError) else e.exit_code  # as `main`
            jsonfailure.say(ctx, "gc", "error", e.format_message(), code)
            raise errorline.shaped(e, ctx) from None


_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?", re.ASCII)  # float() also reads "nan", "٥"


class _UnixTime(click.ParamType):  # type: ignore[type-arg]
    """A wall-clock time in unix seconds: plain ASCII digits, finite, in the range a report's
    `written_at` may take (NaN or infinity would make every age NaN or infinite)."""

    name = "unix-seconds"

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        text = str(value).strip()
        if not _SECONDS.fullmatch(text) or not float(text) <= MAX_WRITTEN_AT:
            self.fail(
                f"{value!r} is not a time in unix seconds (digits, 0..{MAX_WRITTEN_AT:.0f})",
                param,
                ctx,
            )
        return float(text)


@click.command(cls=_GcCommand)
@click.option(
    "--store",
    "store_url",
    required=True,
    metavar="URL",
    help="Object store: a directory path, file:///path or s3://bucket/prefix.",
)
@click.option(
    "--s3-endpoint",
    metavar="URL",
    help="Endpoint of an S3-compatible server. Credentials come only from boto3's "
    "standard chain (env, config files, instance role).",
)
@click.option(
    "--grace",
    type=SPAN,  # beyond 100 years a typo, as --deadline (newuser9's notes)
    default="12h",
    show_default=True,
    help="Minimum object age, e.g. 12h, 30m, 600s.",
)
@click.option(
    "--i-know-grace-is-short", "short_grace", is_flag=True, help="Allow a grace period below 1h."
)
@click.option(
    "--max-report-age",
    type=at_most(MAX_REPORT_AGE_S),  # a year (options.py): beyond, the check is off
    default=format_duration(DEFAULT_MAX_REPORT_AGE_S),
    show_default=True,
    help="Health reports older than this count as absent.",
)
@click.option(
    "--deadline",
    type=SPAN,
    default=None,
    help="Stop the round after this long, as SIGTERM would: batches in flight finish and "
    "are journaled, the record says interrupted, exit 1.",
)
@click.option("--dry-run", is_flag=True, help="Delete nothing, write nothing in the store; "
              "count (and --manifest, --list) only.")
@click.option(
    "--list",
    "list_keys",
    type=pathopt.Path(dir_okay=False, allow_dash=True, give="a new file's path or '-'"),
    metavar="PATH|-",
    help="With --dry-run: write the keys it would delete, one a line, to PATH (a new "
    "file) or to stdout ('-', before the summary).",
)
@click.option(
    "--manifest-dir",
    "--manifest",
    "manifest",
    type=pathopt.Path(dir_okay=True, file_okay=True, give="a new directory's path"),
    metavar="DIR",
    help="Write the deleted (dry run: eligible) keys into this new directory, as the "
    "executors' part files: Parquet, or CSV with a header when DIR ends in .csv. A local "
    "path is made absolute at start; any Hadoop URI (s3a://...) is taken as given.",
)
@click.option(
    "--skip-malformed",
    is_flag=True,
    help="Exit 0 even if malformed keys or refused entries (links) were found: they are "
    "never deleted and always reported; the eligible keys beside them are deleted either "
    "way (spec R21a).",
)
@click.option(
    "--allow-versioned",
    is_flag=True,
    help="Run on a versioned S3 bucket, where a delete only adds a delete marker (refused "
    "by default).",
)
@click.option("--json", "as_json", is_flag=True,
              help="Print the summary as one JSON object on stdout. Where stdout and stderr "
              "are one stream (spark-submit merges the driver's stderr into its stdout; "
              "`> f 2>&1`), no progress and no summary lines are written to it.")
@click.option(
    "--master",
    metavar="URL",
    help="Spark master; default local[*], or spark-submit's when launched by it.",
)
@click.option(
    "--tasks",
    type=click.IntRange(1, 1000),
    help="Spark tasks for the 1000 prefixes (default 20, one per 50 prefixes; on a local "
    "master 2 per core, at most 20; on a cluster 2-4 per core evens out stragglers).",
)
@click.option(
    "--delete-concurrency",
    type=click.IntRange(1, 64),
    default=None,
    help="Delete requests in flight per task; default 4 on S3, 1 on a local directory "
    "(there the deletes run in the task's own thread).",
)
@click.option(
    "--list-concurrency",
    type=click.IntRange(1, 64),
    default=None,
    help="List requests in flight per task (each prefix is listed by one thread); "
    "default 4 on S3, 1 on a local directory.",
)
@click.option(
    "--delete-batch-size",
    type=click.IntRange(1, 1000),
    default=1000,
    show_default=True,
    help="Keys per delete request.",
)
@click.option(
    "--page-size",
    type=click.IntRange(1, 1000),
    default=1000,
    show_default=True,
    help="Keys per list request.",
)
@click.option(
    "--metrics-file",
    type=pathopt.Path(dir_okay=False),
    metavar="PATH",
    help="Write Prometheus metrics (node-exporter textfile format) here.",
)
@click.option("--pushgateway", metavar="HOST:PORT",
              help="Push Prometheus metrics here (HOST:PORT or an http(s) URL); a host that "
              "does not resolve is refused before the round (64), one that cannot be "
              "connected to now is a warning before it (the round runs).")
@click.option("--quiet", "-q", is_flag=True,
              help="No progress on stderr. Without it: a bar when stderr is a terminal that "
              "reports its width; elsewhere (a log, a pipe, a pty of 0 columns such as "
              "`script` run from no terminal) a line every 10 s and when a task finishes: "
              "tasks done, keys listed and deleted, keys/s, and an ETA by tasks (the only "
              "total known), or how long nothing moved.")
@click.option("--spark-log", is_flag=True,
              help="Keep Spark's own console log (default: its errors only).")
@click.option("--now", type=_UnixTime(), hidden=True, help="Wall clock override (tests).")
@click.option(
    "--i-know-now-is-ahead",
    "now_ahead",
    is_flag=True,
    hidden=True,
    help="Allow --now later than the real clock (tests that replay a fixed time).",
)
def gc(
    store_url: str,
    s3_endpoint: str | None,
    grace: float,
    short_grace: bool,
    max_report_age: float,
    deadline: float | None,
    dry_run: bool,
    list_keys: str | None,
    manifest: str | None,
    skip_malformed: bool,
    allow_versioned: bool,
    as_json: bool,
    master: str | None,
    tasks: int | None,
    delete_concurrency: int | None,
    list_concurrency: int | None,
    delete_batch_size: int,
    page_size: int,
    metrics_file: str | None,
    pushgateway: str | None,
    quiet: bool,
    spark_log: bool,
    now: float | None,
    now_ahead: bool,
) -> None:
    """Run one garbage-collection round of L0 objects as a PySpark job."""
    real = time.time()
    if now is not None and now > real and not now_ahead:
        # A clock ahead of the real one makes every object older than it is: 11h55m
        # ahead with --grace 12h deleted a 10-minute-old object (issue 29).
        raise _Usage(
            f"--now {now:.0f} is {now - real:.0f}s ahead of the real clock; objects would "
            "look older than they are (pass --i-know-now-is-ahead to force)"
        )
    try:
        spec = parse_store_url(store_url, s3_endpoint)
    except StoreError as e:
        raise _Usage(str(e)) from None
    bad_master = None if master is None else master_problem(master)
    if bad_master is not None:
        raise _Usage(bad_master)
    # Before the round (issue 41): the extras it imports, and the files it writes at its end
    # (a metrics file in a missing directory was only warned about after the round).
    require_spark("gc", store_modules(spec), workers_here=_local_master(master))
    try:  # a bad EPOCHGC_* setting: 64, before the lease (newuser13 Q5: 1, at the first read)
        check_settings()
    except BadSetting as e:
        raise _Usage(str(e)) from None
    if metrics_file is not None:
        metrics_file = writable_file(metrics_file, "--metrics-file")
        _outside_data(metrics_file, spec, "--metrics-file")
    if pushgateway is not None:
        pushgateway_address(pushgateway)
        down = pushgateway_unreachable(pushgateway)
        if down is not None and not (as_json and streams_merged()):
            # Said before the round, which runs: the push after it tries again (R4).
            echo_safe(f"epochgc gc: warning: --pushgateway {pushgateway}: {down}; the round "
                      "runs, and its metrics are pushed after it if the gateway answers then",
                      err=True)
    if list_keys == "-":
        closedout.output_is_work()  # the keys on stdout are what the dry run was asked for
    elif list_keys is not None:
        list_keys = writable_file(list_keys, "--list")
        _outside_data(list_keys, spec, "--list")
    if manifest is not None:
        manifest = manifest_target(manifest)  # absolute: the record names it wherever read
        # Before the lease and the record (newuser9 K5: the round's own check came after
        # both, exit 1 and an `error` record, where the fault table said 64 and none).
        _outside_data(manifest, spec, "--manifest")
        local = urlsplit(manifest)
        if local.scheme in ("", "file") and _local_master(master):
            # The driver's disk is where a local master's executors write; a cluster's
            # are elsewhere, and the JVM's probe (check_manifest_absent) asks them.
            creatable_path(local.path, "--manifest")
    options = GcOptions(
        grace_s=grace,
        allow_short_grace=short_grace,
        max_report_age_s=max_report_age,
        dry_run=dry_run,
        manifest=manifest,
        skip_malformed=skip_malformed,
        allow_versioned=allow_versioned,
        page_size=page_size,
        delete_batch_size=delete_batch_size,
        delete_concurrency=delete_concurrency,
        list_concurrency=list_concurrency,
        tasks=tasks,
        deadline_s=deadline,
        list_keys=list_keys,
    )
    try:
        options.validate()
    except GcError as e:
        raise _Usage(str(e)) from None

    # --json where stdout and stderr are one stream (spark-submit's PythonRunner starts the
    # driver's Python with `redirectErrorStream(true)` and copies that one pipe to its own
    # stdout, apache/spark core/.../deploy/PythonRunner.scala; also `> f 2>&1`): the JSON
    # object is all that stream gets, so a parser can read it (newuser41 item 13: the
    # progress lines came first). The object carries what those lines would say.
    merged = as_json and streams_merged()
    quiet = quiet or merged
    stop = RoundStop()
    launched: list[bool] = []  # whether the round started its own Spark JVM
    scratch: list[str] = []  # the directory its JVM's files go into (`spark_scratch`)

    # Lines on stderr unless --quiet; a progress bar (tasks, keys deleted, keys/s, ETA)
    # too when stderr is a terminal (impl/progress.py).
    say = Reporter(quiet)

    def session() -> Any:
        from pyspark import SparkContext

        from epochgc.impl.gc.session import (
            launched_by_spark_submit,
            spark_scratch,
            spark_session,
            start_interruptibly,
        )

        if stop.requested:
            return None  # no Spark to start for a round already stopped
        launched.append(SparkContext._gateway is None)  # this process starts the JVM
        if launched[-1] and not launched_by_spark_submit():
            # Its JVM's files in a directory of the command's own, removed on every exit
            # path once the JVM is gone (`spark_scratch`, newuser10 L10).
            scratch.append(spark_scratch())
        where = master or ("spark-submit's master" if launched_by_spark_submit() else "local[*]")
        stop.means = "stopping Spark's start-up; no key deleted yet"
        say(f"gc: starting Spark ({where})")
        # newuser18 U5: 68 s of silence before "All masters are unresponsive! Giving up."
        # A standalone master is tried 3 times, 20 s apart, before Spark gives up (Spark's
        # StandaloneAppClient: REGISTRATION_RETRIES = 3, REGISTRATION_TIMEOUT_SECONDS = 20).
        gives_up = ("; a standalone master that does not answer is given up after 60 s"
                    if (master or "").startswith("spark://") else "")
        # Every 10 s, as a wait for a store or a node is said (`patience.waiting`); a bad
        # setting of it was refused before the round (`check_settings`, 64).
        waiting_after_s = waiting_line_after_s()
        # A signal during start-up stops the starting JVM and the round at once (issue 41);
        # the context is made off the main thread, so PySpark's own SIGINT handler (cancel
        # every job, raise KeyboardInterrupt) never replaces ours.
        spark = start_interruptibly(
            lambda: spark_session(master, spark_log=spark_log,
                                  scratch=scratch[-1] if scratch else None),
            lambda: stop.requested,
            lambda s: say(f"gc: still starting Spark ({where}): {s:.0f} s{gives_up}"),
            waiting_after_s)
        if spark is not None and not stop.requested:
            # Spark is up: a stop now ends the round before its deletes (newuser10 L4: it
            # still said "stopping Spark's start-up" while START was being written).
            stop.means = "no key deleted yet; ending the round"
        return spark

    clock = (lambda: now) if now is not None else None
    # SIGINT / SIGTERM stop the round gracefully (`impl.gc.stop`): the tasks finish their
    # batches in flight, the journal holds them, END says `interrupted`, the exit code is
    # 128 + the signal's number, and --json and the metrics are written as on every path.
    # Until the round writes to the store, a signal ends the command at once (newuser8
    # I10: Ctrl-C waited 10 minutes for a read of a silent endpoint, then exited 1).
    stop.before_round()
    restore = install_signal_handlers(stop)
    from epochgc.impl.gc.session import launched_by_spark_submit

    if launched_by_spark_submit():
        # The JVM is this process's parent and gets a scheduler's SIGTERM: handed here, so
        # that it stops the round as this process's own would (newuser13 Q11).
        from epochgc.impl.gc.jvmsignals import forward_jvm_signals, watch_jvm
        from epochgc.impl.gc.summary import SPARK_STOPPED

        forward_jvm_signals()
        # A JVM gone under the driver (SIGKILL: no handler runs) stops the round wherever
        # it waits, not only in a call into Spark (s27a: an orphan in the recovery's wait)
        restore = _both(watch_jvm(lambda: stop.request(SPARK_STOPPED)), restore)
    if not merged:  # a signal is said when it comes, even with -q (issue 41)
        announce(stop, say if not quiet else lambda line: echo_safe(line, err=True))
    restored = False
    held: HeldSignal | None = None  # a --list - dry run's signal after its round
    after: LateSignal | None = None  # the first signal after the round's record
    try:
        # The driver's own requests: short attempts, said while they wait, and no retry
        # once a signal or the deadline stopped the round (newuser10 L4/L5: the START
        # PUT held a Ctrl-C for minutes on a store gone silent; `driverbound.py`).
        try:
            patience = Patience.from_env()
        except StoreError:  # a bad setting: the control reads name it
            patience = Patience()
        bound = driver_bound(stop, patience, lambda line: say(f"gc: {line}"))
        with installed(bound):
            summary = _run(spec, options, session, say, clock, stop)
        # A failed stdout write's line says what the round did (newuser14 R3).
        closedout.done(summary.done_words())
        checkpoint("round-over")  # the signal tests' point: the round ended, nothing said
        late = None if merged else lambda line: echo_safe(line, err=True)
        # Its record only if it has one (newuser9 K4, K11: said of a round that wrote none).
        stands = "its record stands" if summary.record is not None else "its outcome stands"
        if list_keys == "-":
            # The list on stdout is the dry run's work, still to be written (newuser10 L9:
            # a signal here, while Spark stopped, was said as "after the round ended ...
            # exit code 0" and ignored; the list then blocked on its unread pipe): held
            # until the output begins, where it ends the command, 128 + the signal.
            held = hold_signals()
        else:
            # Its record is written: a signal from now on does not change the exit code.
            after = absorb_late_signal(summary.exit_code, late, stands,
                                       stopped=stop.signalled is not None,
                                       abandon=stop.abandon)
        # The round's handlers give way only now, the next ones in place: restored first,
        # the `epochgc` group's handler was back in between, and a signal there ended a
        # round whose record says paused (3) by the signal, 143 (review41b B3).
        restore(handlers=False)
        restored = True
        checkpoint("restored")  # the signal tests' point: B3's window, now closed
        # One the round's handler took as the round ended (read only now: that handler no
        # longer runs) came before any the new handler took: it is the first, held for the
        # list, or the late one that gives up the push as a later one does.
        came = (signal.Signals[stop.reason] if stop.reason is not None
                and stop.reason in SIGNALS.values() and summary.interrupted is None else None)
        if came is not None:
            if held is not None:
                held.signum = came
            elif after is not None:
                after.signum = came
        if held is None and late is not None and came is not None:
            # It came once the deletes were over, too late to stop anything: the
            # round ended as its record says (newuser3 N10: a terminal's Ctrl-C at
            # the round's last line said nothing, where the same signal a moment
            # later did).
            when = ("while the round's record was written: the round had ended"
                    if stop.finishing_clean else "after the round ended")
            late(f"gc: {came.name} {when}: {stands}, exit code {summary.exit_code}")
    finally:
        try:
            if any(launched):  # stopped and waited for: no JVM outlives the command (41)
                from epochgc.impl.gc.session import stop_spark

                stop_spark(on_signal=stop.requested)
        finally:
            for directory in scratch:  # the JVM is gone: what it left goes too
                shutil.rmtree(directory, ignore_errors=True)
        if not restored:
            restore()
    _export(summary, metrics_file, pushgateway, None if merged else say,
            lambda: _gave_up(held if held is not None else after))
    # Output never raises (issue 38 item 7): keys are escaped (`text.printable`), and any
    # other text the stream's encoding cannot hold is written as an escape. A second
    # signal after the record cuts it short (`LateSignal.cuts`: review41b B1).
    with (after.cuts("the summary") if after is not None else contextlib.nullcontext()):
        _write_output(summary, held, late, stands, merged, as_json, list_keys)
    if summary.error is None:
        checkpoint("summary")  # the signal tests' point: the record written, the summary said
    _exit(summary)


def _write_output(summary: GcSummary, held: HeldSignal | None,
                  late: Callable[[str], None] | None, stands: str, merged: bool,
                  as_json: bool, list_keys: str | None) -> None:
    """The round's last output: its error's lines, or a dry run's `--list -` and the
    summary."""
    if summary.error is not None:
        if held is not None:  # nothing of the list to write: a held signal came late
            if held.signum is not None and late is not None:
                late(f"gc: {signal.Signals(held.signum).name} after the round ended: "
                     f"{stands}, exit code {summary.exit_code}")
            absorb_late_signal(summary.exit_code, late, stands)
        if summary.record_error is not None and not merged:
            # Its record's fate is said on this path too (newuser10 L4).
            echo_safe(f"gc: warning: deletion record not written: {summary.record_error}"
                      + (f"; {summary.record_advice}" if summary.record_advice else ""),
                      err=True)
        if not merged:
            echo_safe(failure_line(summary), err=True)
        if as_json:
            click.echo(summary.to_json())
        return
    keys = summary.would_delete or []
    # The list, and the summary after it on stdout, are the dry run's work: a signal while
    # they are written (their reader not reading, newuser9 K11), or one held since the
    # round ended (newuser10 L9), ends the command at once, 128 + the signal.
    progress = OutputProgress(len(keys))
    with (interruptible_output(progress.said, held) if held is not None
          else contextlib.nullcontext()):
        checkpoint("list-begin")  # the signal tests' point: nothing of the list written
        for key in keys:
            click.echo(printable(key))
            if not progress.begun:
                progress.begun = True
                checkpoint("list-line")  # the tests' point: the list's first line written
        if keys:
            sys.stdout.flush()
        # A reader that closed the pipe (`--list - | head -3`) is said as a signal's cut
        # is (newuser12 P10: exit 1 and not a word, with -q); the exit code stays 1.
        progress.listed = not closedout.reader_gone()
        checkpoint("list-done")  # the tests' point: the list written, the summary not
        _print_summary(summary, as_json, merged)
        sys.stdout.flush()  # written, not buffered, before a signal counts as late
        if list_keys == "-" and closedout.reader_gone():
            echo_safe(f"gc: {progress.said()}: the reader of stdout closed the pipe",
                      err=True)
    if held is not None:
        # All written: only now is a signal "after the round ended" (the exit code stays).
        absorb_late_signal(summary.exit_code, late, stands)


def _exit(summary: GcSummary) -> None:
    """Exit with the round's code; a round a signal interrupted (its exit code 128 + the
    signal's number) ends the process by that signal (impl/entry.py `end_by`)."""
    by = {name: sig for sig, name in SIGNALS.items()}.get(summary.signal or "")
    if by is not None and summary.exit_code == 128 + by:
        end_by(by)
    sys.exit(summary.exit_code)


def _print_summary(summary: GcSummary, as_json: bool, merged: bool) -> None:
    if summary.interrupted is not None and not merged and (
            as_json or not (one_terminal() or one_stream())):
        # Stderr's last line says so, even with -q or --json (issue 41 item 3: it was the
        # success-looking `gc: listed N keys, ...` progress line). Not when stdout's summary
        # below goes to the same terminal (newuser8 I9) or the same pipe or file (`> log
        # 2>&1`, `|& tee`: newuser12 P1): a person or a log read the line twice.
        echo_safe(summary.lines()[0], err=True)
    if summary.paused_note is not None and not merged:
        # even with -q or --json; escaped: who paused and why come from the store (K6)
        echo_safe(f"gc: {printable(summary.paused_note)}", err=True)
    if summary.versioned_note is not None and not merged:  # as the pause's (newuser12 P8)
        echo_safe(f"gc: {printable(summary.versioned_note)}", err=True)
    if as_json:
        for line in summary.lines()[1:] if not merged else ():
            echo_safe(line, err=True)
        click.echo(summary.to_json())
    else:
        for line in summary.lines():
            echo_safe(line)


def _outside_data(path: str, spec: StoreSpec, option: str) -> None:
    """Refused (64) if the command would write `path` under the store's data prefix."""
    problem = inside_data_problem(path, spec, option)
    if problem is not None:
        raise Refused(problem, ExitCode.USAGE)


def one_terminal() -> bool:
    """Whether stdout and stderr are the same terminal (the same character device:
    fstat's st_rdev), where a line written to both is seen twice."""
    try:
        if not (sys.stdout.isatty() and sys.stderr.isatty()):
            return False
        out, err = os.fstat(sys.stdout.fileno()), os.fstat(sys.stderr.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return out.st_rdev == err.st_rdev


def one_stream() -> bool:
    """Whether stdout and stderr are one open file or pipe (the same device and inode,
    fstat(2)), whatever it is: a line written to both is read twice."""
    try:
        out, err = os.fstat(sys.stdout.fileno()), os.fstat(sys.stderr.fileno())
    except (OSError, ValueError, AttributeError):  # no descriptor (a test runner's buffer)
        return False
    return (out.st_dev, out.st_ino) == (err.st_dev, err.st_ino)


def streams_merged() -> bool:
    """Whether stdout and stderr are one stream that is not a terminal (the same pipe or
    file: the same device and inode). A terminal is left alone: a person reads it."""
    try:
        if sys.stdout.isatty():
            return False
        out, err = os.fstat(sys.stdout.fileno()), os.fstat(sys.stderr.fileno())
    except (OSError, ValueError, AttributeError):  # a stream without a descriptor (a test
        return False                               # runner's buffer): not one stream
    return (out.st_dev, out.st_ino) == (err.st_dev, err.st_ino)


def _run(
    spec: StoreSpec,
    options: GcOptions,
    session: Callable[[], Any],
    say: Callable[[str], None],
    clock: Callable[[], float] | None,
    stop: RoundStop,
) -> GcSummary:
    """The round's summary, whatever happens: an exception (any type) becomes a summary
    with `error` set (the round's own, with its counts, when the round had started)."""
    try:
        checkpoint("start")  # the signal tests' point: before the store is read
        missing = missing_dependency(spec)
        if missing is not None:
            raise GcError(missing)
        spec().close()  # fail fast on an unreadable store, before Spark starts
        kwargs: dict[str, Any] = {"say": say, "stop": stop}
        if clock is not None:
            kwargs["clock"] = clock
        # The reads before the round: on S3 bounded, and a read that waits is said (newuser8
        # I10: 11 silent minutes on an endpoint that accepts and never answers).
        kwargs["control"] = lambda: open_control(spec, lambda line: say(f"gc: {line}"))
        return run_gc(session, spec, options, **kwargs)
    except BaseException as e:
        if isinstance(e, SystemExit):
            raise
        if isinstance(e, KeyboardInterrupt) and stop.cut_short:
            # A signal before the round (`stop.before_round`): nothing was written.
            return GcSummary(dry_run=options.dry_run, interrupted=stop.reason or "SIGINT",
                             listing_complete=False, unstarted=True)
        failed = getattr(e, "summary", None)
        if not isinstance(failed, GcSummary):
            text = describe(e)
            # The round never began: nothing was listed (newuser13 Q8: `--json` on a store
            # that does not exist said `"listing_complete": true`).
            failed = GcSummary(dry_run=options.dry_run, error=text, listing_complete=False)
            if isinstance(e, KeyboardInterrupt) or stop.requested:
                failed.interrupted = stop.reason or "SIGINT"
            failed.signal_after_stop = stop.decide()  # as run_gc's record (R1)
        return failed


def _both(first: Callable[[], None], then: Restore) -> Restore:
    def both(handlers: bool = True) -> None:
        first()
        then(handlers)

    return both


def failure_line(s: GcSummary) -> str:
    """A failed round's last line: its error, what was deleted, and, its record not
    written, what records it (newuser13 Q2: a store gone mid-round ended on the journal's
    read-back error, not on what to do; its lease stayed held)."""
    assert s.error is not None
    if s.lease_busy and not s.deleted and s.journal is None:
        # Another round holds the lease: turned away (2, retry later), a refusal as a
        # paused store's is, not an error (README: "a GC round blocked or paused is the
        # command's own report"; newuser23 F5: "epochgc gc: error: another GC round ...").
        return f"gc: round refused, nothing deleted: {s.error}; retry later"
    # A second signal is the operator's stop, not a failure (newuser11 M8).
    # With a journal there is something to record: the last line says how (without one,
    # the warning above it says "nothing was deleted ...; ... removes its lease").
    text = (f"{s.error}{_while_stopping(s)}; {_after(s)}"
            + (f"; its record was not written: {s.record_advice}"
               if s.record_advice and s.journal is not None else ""))
    if s.error.endswith(STOPPED_AT_ONCE):
        # A signal ended it at once: the command ends by that signal, and its last line
        # is every signalled command's (newuser15 S5: it was "gc: SIGINT again: ...").
        return (f"epochgc gc: interrupted by {s.signal}: {text}" if s.signal is not None
                else f"gc: {text}")
    return errorline.line("gc", text)


def _while_stopping(s: GcSummary) -> str:
    """What had stopped a round that then failed, unless its error says it (newuser14 R4:
    the --deadline passed while the stage-end STOP was retried on a silent store, and the
    last line named only the read-back's failure)."""
    assert s.error is not None
    if s.interrupted is None or s.interrupted in s.error or s.error.endswith(STOPPED_AT_ONCE):
        return ""
    why = ("its --deadline had passed" if s.interrupted == "deadline"
           else f"interrupted ({s.interrupted})")
    return f" (the round was stopping: {why})"


def _after(s: GcSummary) -> str:
    """What the operator must know after a failed round: what was deleted, and where the
    journal is (a failure after deletes is not "nothing was deleted")."""
    if s.journal is not None and not s.journal_read:
        # Nothing reads a recorded round's journal again (review rev38q finding 5: this
        # said "gc-admin show reads it again", which it does not); the journal stays.
        return (f"the deletion journal {s.journal} could not be read back, so which keys were "
                "deleted is not known; it names every key a delete was sent for")
    at_least = "at least " if s.unreadable_entries or s.unknown else ""
    if s.deleted or s.unreadable_entries or s.unknown or s.gone_unattributed:
        return (f"{at_least}{s.deleted:,} key(s) were deleted (journal {s.journal}"
                + (f", {s.unreadable_entries} entr(ies) unreadable" if s.unreadable_entries
                   else "")
                + (f", {s.unknown} key(s) whose deletion is unknown" if s.unknown else "")
                + (f", {s.gone_unattributed:,} more left the store {GONE_WHERE_SHORT}, by "
                   "its requests or another writer's"
                   if s.gone_unattributed else "")
                + "); keys not deleted yet are listed again next round")
    if s.journal is not None:
        return f"no key was deleted (journal {s.journal})"
    return "nothing was deleted"


def missing_dependency(spec: StoreSpec) -> str | None:
    """A one-line message naming the extra to install, if the round cannot import what it
    needs (pyspark always, boto3 for s3:// stores); None if everything is there."""
    for module, extra in _NEEDS.items():
        if module == "boto3" and spec.kind != "s3":
            continue
        try:
            importlib.import_module(module)
        except ImportError:
            return (
                f"{module} is not installed (this command needs it): "
                f"pip install 'epochgc[{extra}]' (or 'epochgc[gc]' for everything the GC uses)"
            )
    return None


def _local_master(master: str | None) -> bool:
    """Whether the executors run in the driver's process (Spark's `local` masters;
    None: local[*] unless spark-submit chose)."""
    if master is None:
        from epochgc.impl.gc.session import launched_by_spark_submit

        return not launched_by_spark_submit()
    return master == "local" or master.startswith("local[")


def _export(summary: GcSummary, metrics_file: str | None, pushgateway: str | None,
            say: Callable[[str], None] | None = None,
            abandoned: Callable[[], str | None] | None = None) -> None:
    if not (metrics_file or pushgateway):
        return
    from epochgc.impl.gc.metrics import export_metrics

    export_metrics(summary, metrics_file, pushgateway,
                   warn=lambda m: click.echo(f"epochgc gc: warning: {m}", err=True),
                   say=say, abandoned=abandoned)


def _gave_up(came: HeldSignal | LateSignal | None) -> str | None:
    """Why the metrics' push is given up: a signal after the round ended (newuser20 W4),
    held for a dry run's list or said as late; the round's exit code stands."""
    if came is None or came.signum is None:
        return None
    return f"interrupted by {signal.Signals(came.signum).name}"
