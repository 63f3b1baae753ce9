"""`epochgc gc-admin show|pause|start|reset|expire --store URL`: GC operations on a store
(issues 30, 38, 41).

- `show`: the cluster's M and each partition's GC epoch M(p), the safety monitor's verdict,
  paused or not, the lease holder, and the last round's record (`--json` for one object).
  It first records any round whose driver died mid-round (`recover.py`).
- `pause [--reason TEXT] [--by WHO]`: new rounds refuse (exit 3); a running round stops at
  its next delete batch (its driver polls the state), its record saying `interrupted: paused`.
- `start`: resumes.
- `reset [--force]`: removes the GC lease only (see `admin.reset_lease`); refused while a
  round holds a live lease unless `--force`, and with it while the holder's process runs on
  this host unless `--even-if-running` too; then records any dead round, as `show` does.
- `expire [--older-than 30d] [--keep-last N] [--apply]`: removes old rounds' records,
  journals and sequence markers (`expire.py`); without `--apply`, a dry run.
- `advance-epoch --data-dir D --partition P`: break glass on a running local cluster: the
  partition's leader writes `advance_epoch(its cached cluster epoch)` now; refused where it
  cannot help (`impl/broker/breakglass.py`: the leader's cache lags the partition's epochs).

Every command first checks the location is an epochgc store (`_cluster/partitions.json`):
a mistyped path is refused before anything is written. Exit codes (`codes_for`, the
`--help` table): 0 done; 1 refused or failed; 2 `show`: a round would be blocked now
(health bad or unknown, no M); 3 `show`: GC is paused; 64 bad arguments; 69 a missing
extra (boto3 for an s3:// store); 130 / 143 / 129 interrupted by SIGINT / SIGTERM / SIGHUP.
`resume` is another name of `start` (issue 41 item 10: click's hint for a mistyped
`resume` was `reset`, which removes the lease).
"""

from __future__ import annotations

import getpass
import json
import math
import shlex
import signal
import socket
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import click

from epochgc.impl import closedout, errorline, jsonfailure, pathopt, signals
from epochgc.impl.entry import end_by
from epochgc.impl.exitcodes import ExitCode
from epochgc.impl.gc.admin import (
    AdminChange,
    AdminState,
    LeaseReset,
    ResetRefused,
    change_admin_state,
    new_admin_state,
    reset_lease,
)
from epochgc.impl.gc.duration import DURATION, at_most, format_duration
from epochgc.impl.gc.errors import GcError
from epochgc.impl.gc.expire import (
    DEFAULT_KEEP_LAST,
    DEFAULT_RETENTION_S,
    ExpireProgress,
    expire_rounds,
)
from epochgc.impl.gc.job import check_is_store
from epochgc.impl.gc.options import DEFAULT_MAX_REPORT_AGE_S, MAX_REPORT_AGE_S
from epochgc.impl.gc.record import iso_utc
from epochgc.impl.gc.recordread import DamagedRecord
from epochgc.impl.gc.recover import (
    NO_JOURNAL,
    Recovered,
    journal_started,
    left_line,
    live_rounds,
    recorded,
    recorded_as,
    recover_dead_rounds,
    stop_dead_rounds,
    unrecordable_line,
    waiting_line,
)
from epochgc.impl.gc.sequence import SequenceError
from epochgc.impl.gc.show import count_text, gc_state, iso, json_safe, render
from epochgc.impl.gc.summary import EXIT_USAGE
from epochgc.impl.gc.text import GONE_WHERE_SHORT, echo_safe, printable
from epochgc.impl.preflight import (
    PROBE_PREFIX,
    Refused,
    probe_write,
    require_modules,
    store_modules,
)
from epochgc.impl.signals import SIGNALS, checkpoint
from epochgc.impl.store.base import ObjectStore, StoreError
from epochgc.impl.store.patience import BadSetting, check_settings
from epochgc.impl.store.url import open_control, parse_store_url

__all__ = ["gc_admin", "gc_state"]

_STORE = click.option("--store", required=True, help="store URL or directory")
_ENDPOINT = click.option("--s3-endpoint", default=None, help="S3-compatible endpoint")
_SIGNAL_EXIT = {s: 128 + s for s in SIGNALS}  # SIGHUP unless ignored at start (nohup)
# A pause's reason and author as an operator may give them (issue 41): enough for a
# ticket and a sentence; longer is refused (64), not cut.
# A lease the store says is gone after the reset's own conditional delete (`LeaseReset.gone`).
GONE_SAID = "gone: removed by this request or another"
MAX_REASON_CHARS = 500
MAX_BY_CHARS = 255



class _Interrupted(BaseException):
    """SIGINT or SIGTERM while a gc-admin command runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.code = _SIGNAL_EXIT[signal.Signals(signum)]
        self.detail: str | None = None  # what may have been done (`_writing`)

    def line(self) -> str:
        # Never bare (newuser15 S3): what the command said it had done, else nothing yet.
        return f"interrupted by {self}: {self.detail or signals.done_so_far()}"


@contextmanager
def _writing(what: str, store: str, s3_endpoint: str | None) -> Iterator[None]:
    _say_writing(what, store, s3_endpoint)
    yield


def _say_writing(what: str, store: str, s3_endpoint: str | None) -> None:
    """A signal while `what` is written: its request may have gone out and been applied
    (newuser10 L3: a Ctrl-C on a slow `pause` said only "interrupted by SIGINT", exit 130,
    and the store was paused all the same): the line says so and where to look."""
    where = f"--store {shlex.quote(store)}" + (
        f" --s3-endpoint {shlex.quote(s3_endpoint)}" if s3_endpoint else "")
    # Said from before the request goes out until the command says what it wrote
    # (`closedout.done`): no moment where a signal's line says less (newuser15 S3).
    signals.doing(f"{what} may have been written (its request was under way): "
                  f"`epochgc gc-admin show {where}` says")


@contextmanager
def _signals() -> Iterator[None]:
    """SIGINT and SIGTERM end the command with 130 / 143 (not click's "Aborted!", exit 1);
    what it did so far is said by the command (expire) or was one write (the others)."""
    def handle(signum: int, _frame: FrameType | None) -> None:
        # Late (its output decided, `signals.finishing`: W3) or after the first: nothing
        # more; a held first one decides (newuser23 F1, F2).
        first = signals.take(signum)
        if first is not None:
            raise _Interrupted(first)

    previous = {s: signal.getsignal(s) for s in _SIGNAL_EXIT}
    try:
        for sig in _SIGNAL_EXIT:
            signal.signal(sig, handle)
    except ValueError:  # not the main thread (a test runner's): default handling
        previous = {}
    try:
        yield
    finally:
        for sig, h in previous.items():
            signal.signal(sig, h)


class _Usage(click.UsageError):
    exit_code = EXIT_USAGE


class _AdminCommand(click.Command):
    """Notes whether --json was asked (`jsonfailure`), for `_AdminGroup.invoke`."""

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        if parent is not None:
            jsonfailure.note_before_parsing(parent, self, args)
        ctx = super().make_context(info_name, args, parent=parent, **extra)
        jsonfailure.note_parsed(ctx)
        return ctx


class _AdminGroup(click.Group):
    """Bad arguments exit 64 (BSD EX_USAGE), as `epochgc gc`'s: 2 means "blocked" to a
    scheduler. A signal exits 130 / 143. With --json, a failure is also one JSON object on
    stdout (`jsonfailure`)."""

    command_class = _AdminCommand

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as e:
            said = errorline.usage_failure(e, e.ctx)
            if isinstance(said, errorline.NoCommand):  # `gc-admin` alone: its help
                raise said from None
            raise _Usage(e.format_message(), e.ctx) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            try:
                with _signals():
                    return super().invoke(ctx)
            except _Usage:
                raise
            except click.UsageError as e:
                raise _Usage(e.format_message(), e.ctx) from None
        except click.ClickException as e:
            jsonfailure.say(ctx, None, "error", e.format_message(),
                            e.exit_code)
            raise
        except _Interrupted as e:
            jsonfailure.say(ctx, None, "interrupted", e.line(), e.code)
            # The form `epochgc`'s group prints for a signal while the command loads
            # (newuser8 I7: "epochgc gc-admin:" then, "gc-admin:" later), naming the
            # subcommand as its error lines do (newuser15 S3: "epochgc gc-admin:" only).
            who = errorline.command_of(errorline.deepest(ctx)) or "gc-admin"
            echo_safe(f"epochgc {who}: {e.line()}", err=True)
            end_by(e.signum)  # the process ends by the signal (impl/entry.py)
            ctx.exit(e.code)


def _usage(msg: str) -> click.UsageError:
    return _Usage(msg)


class _Refused(errorline.Failure):
    """A gc-admin command that refused or failed (exit 1, the table's "failed"): one line
    `epochgc gc-admin <command>: error: <why>`, every command's error (impl/errorline.py;
    it was `gc-admin: <command>: <why>`, newuser13 Q9). A usage error (exit 64) has the
    usage lines above its own (issue 41 F5: `Error: expire refused ...`, exit 1, read as
    one)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.command = errorline.command_of(click.get_current_context(silent=True))


def _open(store: str, s3_endpoint: str | None) -> ObjectStore:
    try:  # a URL that names no store is a bad argument (64), as `epochgc gc` answers it
        spec = parse_store_url(store, s3_endpoint)
    except StoreError as e:
        raise _usage(str(e)) from None
    # A missing extra exits 69 naming it, as `gc` and `cluster start` answer it (issue 41
    # item 9: it was `No module named 'boto3'` inside a read error, exit 1).
    require_modules("gc-admin", store_modules(spec))
    try:  # a bad EPOCHGC_* setting is a usage error, nothing done (newuser13 Q5: 1)
        check_settings()
    except BadSetting as e:
        raise _usage(str(e)) from None
    try:
        # Its reads bounded and a read that waits said (issue 41, newuser8 I10: `show` on an
        # endpoint that accepts and never answers was silent for 6+ minutes).
        s = open_control(spec, lambda line: echo_safe(f"gc-admin: {line}", err=True))
        check_is_store(s)
    except (StoreError, GcError) as e:
        raise _Refused(str(e)) from None
    return s


@click.group("gc-admin", cls=_AdminGroup)
def gc_admin() -> None:
    """Pause, start, reset, show and expire the GC state of a store."""


def _json(doc: dict[str, Any]) -> None:
    """Issue 41 F12: pause, start/resume and reset had no --json (show and expire did), so
    a script driving gc-admin parsed text from four commands of six."""
    click.echo(json.dumps(doc, sort_keys=True, allow_nan=False))


def _state(state: AdminState) -> dict[str, Any]:
    return {"by": state.by, "reason": state.reason, **_at(state.at)}


def _at(at: float | None) -> dict[str, Any]:
    """When the state was written: `at` in ISO 8601 UTC, as every time in a round's record
    and `gc --json` (newuser10 L10: pause/resume --json alone said Unix seconds), and
    `at_unix` in Unix seconds, as `show --json`'s `paused_at` and `now` are (a script
    compares them)."""
    return {"at": iso_utc(at), "at_unix": at}


def _change(s: ObjectStore, decide: Callable[[AdminState], AdminState | None]
            ) -> AdminChange:
    try:
        return change_admin_state(s, decide)
    except StoreError as e:
        raise _Refused(str(e)) from None


def _operator() -> str:
    """Who runs this command: the login name and host (not this short-lived process's pid,
    which names nothing once it exits: issue 41 item 7)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        user = "uid?"
    return f"{user}@{socket.gethostname()}"


@gc_admin.command()
@_STORE
@_ENDPOINT
@click.option("--reason", default="",
              help="recorded with the pause and shown in refusals; at most "
                   f"{MAX_REASON_CHARS} characters; empty (the default): no reason given")
@click.option("--by", "by", default=None, metavar="WHO",
              help="who pauses (shown by `show` and in refusals); default user@host; at "
                   f"most {MAX_BY_CHARS} characters, not empty")
@click.option("--replace", is_flag=True,
              help="on a store already paused, replace its author and reason with these "
                   "(without it the first pause is kept)")
@click.option("--json", "as_json", is_flag=True, help="one JSON object on stdout")
def pause(store: str, s3_endpoint: str | None, reason: str, by: str | None,
          replace: bool, as_json: bool) -> None:
    """Pause GC: new rounds refuse, running ones stop at their next delete batch. On a
    store already paused the first pause (who, why, since when) is kept and named, unless
    --replace."""
    # Bounded before anything is read (issue 41): a 100,000-character reason was stored and
    # repeated in every refusal of every round.
    if len(reason) > MAX_REASON_CHARS:
        raise _usage(f"--reason is {len(reason):,} characters; at most {MAX_REASON_CHARS}")
    if by is not None and len(by) > MAX_BY_CHARS:
        raise _usage(f"--by is {len(by):,} characters; at most {MAX_BY_CHARS}")
    if by is not None and not by.strip():
        # newuser14 R5: `--by ''` recorded the default author, user@host, without a word:
        # a value given on purpose was replaced. An empty (or blank) author names nobody,
        # so it is a usage error, as an empty --store or --partition is; an empty --reason
        # is the default, "no reason given", and stays allowed.
        raise _usage(f"--by is {'empty' if not by else 'blank'}: give who pauses, or leave "
                     "--by out for the default (user@host)")
    s = _open(store, s3_endpoint)
    try:
        # Issue 41: a second pause replaced the first one's author and reason silently.
        # Read, decide and write as one conditional change (newuser16 S7: a pause raced by
        # a start on S3 was said done and lost): `before` is the state the write replaced.
        wanted = new_admin_state(True, reason, time.time(), by or _operator())

        def decide(now: AdminState) -> AdminState | None:
            if now.paused and not replace:
                return None
            _say_writing("the pause", store, s3_endpoint)  # from before its request
            return wanted

        change = _change(s, decide)
        before, state = change.before, change.written
        if state is not None:
            # newuser11 M9: a failed stdout write's line says the work was done.
            closedout.done("the pause was written" + (" (it replaces the earlier one)"
                                                      if before.paused else ""))
    finally:
        s.close()
    with signals.finishing(0):  # written: its output is the run's end (newuser20 W3)
        if state is None:  # kept as it is: its output is the run's end too (newuser22 Y1)
            if as_json:
                _json({"paused": True, "changed": False, **_state(before), "replaced": None})
                return
            since = f" since {iso(before.at)}" if before.at is not None else ""
            echo_safe(f"gc-admin: already paused by {printable(before.by or 'unknown')}"
                      f"{since} ({printable(before.reason or 'no reason given')}); kept as "
                      "it is (pass "
                      "--replace to replace who paused and why)")
            return
        if as_json:
            _json({"paused": True, "changed": True, **_state(state),
                   "replaced": _state(before) if before.paused else None})
            return
        # Escaped as `show` does (newuser9 K6: CR/LF forged a line, OSC set the title).
        echo_safe(f"gc-admin: paused by {printable(state.by)} "
                  f"({printable(state.reason or 'no reason given')})"
                  + (f"; replaces the pause by {printable(before.by or 'unknown')} "
                     f"({printable(before.reason or 'no reason given')})"
                     if before.paused else ""))


@gc_admin.command()
@_STORE
@_ENDPOINT
@click.option("--json", "as_json", is_flag=True, help="one JSON object on stdout")
def start(store: str, s3_endpoint: str | None, as_json: bool) -> None:
    """Resume GC after a pause."""
    s = _open(store, s3_endpoint)
    try:
        # newuser7: `pause --json` said whether it changed anything, `resume --json` did
        # not; a resume of a store that is not paused writes nothing. One conditional
        # change (newuser16 S7): `before` is the pause the write lifted.
        wanted = new_admin_state(False, "", time.time(), _operator())

        def decide(now: AdminState) -> AdminState | None:
            if not now.paused:
                return None
            _say_writing("the resume", store, s3_endpoint)  # from before its request
            return wanted

        change = _change(s, decide)
        if change.written is not None:
            closedout.done("the resume was written: GC runs again")  # newuser11 M9
        before = change.before
        state = change.written or before
    finally:
        s.close()
    with signals.finishing(0):  # written: its output is the run's end (newuser20 W3)
        if as_json:
            # Never paused: nobody resumed it (newuser8 I7: "by": "" beside "at": null).
            _json({"paused": False, "changed": before.paused, "by": state.by or None,
                   **_at(state.at)})
            return
        if not before.paused:
            click.echo("gc-admin: running (it was not paused; nothing changed)")
            return
        # newuser13 Q9: it said only "running": what was lifted is said, as `pause` says
        # what it kept or replaced (escaped as `show` does).
        since = f" since {iso(before.at)}" if before.at is not None else ""
        echo_safe(f"gc-admin: resumed: GC runs again on this store (it was paused by "
                  f"{printable(before.by or 'unknown')}{since}: "
                  f"{printable(before.reason or 'no reason given')})")


gc_admin.add_command(start, "resume")


@gc_admin.command()
@_STORE
@_ENDPOINT
@click.option("--force", is_flag=True,
              help="remove the lease even while it is live (its holder is known dead); "
                   "refused if its holder's process is running on this host")
@click.option("--even-if-running", is_flag=True,
              help="with --force: also when the holder's process is running on this host "
                   "(it is then stopped and recorded driver-gone, and may run beside the next "
                   "round until it sees the STOP)")
@click.option("--json", "as_json", is_flag=True, help="one JSON object on stdout")
def reset(store: str, s3_endpoint: str | None, force: bool, even_if_running: bool,
          as_json: bool) -> None:
    """Remove the GC lease (and nothing else: pause state, records and journals stay).
    Then records any round whose driver died before its end, as `show` does (with --force
    that includes the round that held the lease)."""
    if even_if_running and not force:
        raise _usage("--even-if-running goes with --force")
    s = _open(store, s3_endpoint)
    try:
        try:
            with _writing("the lease's removal", store, s3_endpoint):
                reset_done = reset_lease(s, time.time(), force, even_if_running)
        except ResetRefused as e:
            raise _Refused(str(e)) from None
        removed = reset_done.removed
        unjournaled = _unjournaled(s, reset_done)
        # newuser14 R3: a failed stdout write's line says what the reset did.
        removed_said = ", ".join(f"{k} {GONE_SAID}" if reset_done.gone else f"removed {k}"
                                 for k in removed)
        did = "; ".join([removed_said,
                         *(f"round {r}, which held it, ended {NO_JOURNAL}"
                           for r in unjournaled)]).strip("; ")
        closedout.done(did)
        if not did:
            # newuser22 Y3: "the lease's removal may have been written (its request was
            # under way)" was still a signal's words after "nothing to remove".
            signals.doing("nothing was removed: there was no lease to remove")
        if not as_json and removed_said:  # said before the recovery's wait (rev38n 4)
            click.echo("gc-admin: reset: " + removed_said)
            for r in unjournaled:
                echo_safe(f"gc-admin: reset: round {printable(r)}, which held it, ended "
                          f"{NO_JOURNAL}")
        unrecordable: list[dict[str, Any]] = []
        try:
            checkpoint("reset-removed")  # the signal tests' point: the lease is gone
            recovered, ended = _recover_dead(s, "gc-admin reset", unrecordable)
        except BaseException:
            # newuser3 N11: interrupted here, it said only "interrupted by SIGINT", with
            # the lease already removed.
            if removed:
                echo_safe(f"gc-admin: reset: {removed_said} before it was "
                          "stopped; a dead round not recorded yet is recorded by the next "
                          "GC round or `gc-admin reset`", err=True)
            raise
        if recovered:
            closedout.done("; ".join([*filter(None, [did]), *(
                f"recorded dead round {printable(r['round'])}: {printable(r['outcome'])}, "
                f"{count_text(r['deleted'])} key(s) deleted ({printable(r['record'])})"
                for r in recovered)]))
    finally:
        s.close()
    # Its last output under `finishing` (newuser22 Y3, Y4): a signal as it is written no
    # longer turns a done reset into "interrupted". "nothing to remove" is said here, at
    # the end: nothing is waited on after it.
    with signals.finishing(ExitCode.FAILED if unrecordable else 0):
        if as_json:
            # `ended`: rounds that recorded themselves (or were recorded by another look)
            # during the wait; how they ended was on stderr only (newuser8 N1).
            _json({"removed": removed, "recovered": recovered, "ended": ended,
                   "unrecordable": unrecordable, "no_journal": unjournaled})
        else:
            if not removed_said:
                click.echo("gc-admin: reset: nothing to remove")
            _say_recovered(recovered)
    if unrecordable:  # named on stderr and left: the operator must look (the table: 1)
        sys.exit(ExitCode.FAILED)


def _unjournaled(s: ObjectStore, done: LeaseReset) -> list[str]:
    """The round whose lease `done` removed, if it never started its deletion journal and
    has no record, and its process is not known to run (newuser14 R7: a round killed in
    Spark's start-up; a running one, `--even-if-running`, records itself on losing its
    lease). Its lease was its only trace: nothing was deleted, nothing is recorded."""
    holder = done.lease.holder or {}
    round_id = holder.get("round")
    if not done.removed or not isinstance(round_id, str) or done.lease.holder_running():
        return []
    try:
        if journal_started(s, round_id) or recorded(s, round_id):
            return []
    except StoreError:  # cannot tell: nothing said (the recovery below looks again)
        return []
    return [round_id]


def _say_recovered(recovered: list[dict[str, Any]]) -> None:
    for r in recovered:
        # "at least" when journal entries were unreadable (issue 41: N is a lower bound,
        # as `show` says).
        at_least = "at least " if r["unreadable"] or r["unknown"] else ""
        unread = (f" ({count_text(r['unreadable'])} journal entr(ies) unreadable)"
                  if r["unreadable"] else "")
        end = " (from its own END)" if r["from_end"] else ""
        gone = (f", {count_text(r['gone_unattributed'])} more left the store "
                f"{GONE_WHERE_SHORT} (its requests' or another writer's)"
                if r["gone_unattributed"] else "")
        echo_safe(f"gc-admin: recorded dead round {printable(r['round'])}{end}: "
                  f"{printable(r['outcome'])}, {at_least}{count_text(r['deleted'])} key(s) "
                  f"deleted{gone}{unread} "
                  f"({printable(r['record'])})")


# No record is older than this: a larger --older-than is a typo, not a retention.
MAX_OLDER_THAN_S = 100 * 365 * 86400.0


@gc_admin.command()
@_STORE
@_ENDPOINT
@click.option("--older-than", type=DURATION, default=format_duration(DEFAULT_RETENTION_S),
              show_default=True,
              help="remove rounds whose record was written longer ago than this (the "
                   "store's own time of the record)")
@click.option("--keep-last", type=click.IntRange(1, None), default=DEFAULT_KEEP_LAST,
              show_default=True,
              help="always keep this many most recent rounds that ran (a refusal, paused "
                   "or lease held, is not one: it expires by age alone)")
@click.option("--apply", "apply", is_flag=True,
              help="remove them; without it this is a dry run")
@click.option("--json", "as_json", is_flag=True, help="one JSON object on stdout")
def expire(store: str, s3_endpoint: str | None, older_than: float, keep_last: int,
           apply: bool, as_json: bool) -> None:
    """Remove old GC rounds' records, deletion journals and sequence markers (also the
    markers of a round with neither record nor journal: an interrupted expire's).

    Without --apply it is a DRY RUN: it lists what it would remove (rounds, objects,
    bytes) and writes and removes nothing in the store; run it first, then again with
    --apply. Never removed: the last --keep-last rounds, the highest sequence marker, the
    journal of a round that has no record (it may still be running, or its driver
    died: the next round or `gc-admin reset` records it), and a round whose record cannot be read
    (named, kept with its journal; exit 1). Default retention 30 days, as Delta
    Lake's log retention (delta.logRetentionDuration); Iceberg's expire_snapshots keeps
    5 days and the last snapshot by default.
    """
    if not (math.isfinite(older_than) and 0 <= older_than <= MAX_OLDER_THAN_S):
        # newuser3 N11: 99999999999999999999d was taken ("older than 8.64e+24s").
        raise _usage(f"--older-than must be between 0s and "
                     f"{format_duration(MAX_OLDER_THAN_S)} (100 years), got "
                     f"{older_than:.6g}s")
    s = _open(store, s3_endpoint)
    progress = ExpireProgress()

    def said(line: str) -> None:
        echo_safe(line, err=True)
        checkpoint("round-removed")  # the signal tests' point

    def writable() -> None:
        # newuser21 X8: a store it cannot write was found at the first removal. Checked
        # first, as `cluster start` and `chaos` check theirs (`preflight.store_writable`:
        # one small object written and removed), so a refusal removes nothing.
        why = probe_write(s, f"{PROBE_PREFIX}{uuid.uuid4().hex}",
                          b"epochgc gc-admin expire: a store it can write\n")
        if why is not None:
            raise _Refused(f"cannot write to the store, nothing was removed: {why}")

    try:
        plan = expire_rounds(s, time.time(), older_than, keep_last, apply, said, progress,
                             before_removing=writable)
        if plan.applied and (plan.rounds or plan.orphans):  # newuser14 R3: said if stdout
            # fails; inside the `try`, so a signal until then says how far it got too.
            closedout.done(f"removed {len(plan.rounds)} round(s) ({plan.removed:,} "
                           f"object(s), {plan.bytes:,} bytes)" + (
                               f" and the sequence markers of {len(plan.orphans)} round(s)"
                               if plan.orphans else ""))
    except _Interrupted as e:
        if progress.planned:  # what was done (newuser11 M12)
            e.detail = (f"{progress.removed} of {progress.planned} round(s) removed (each "
                        "removed whole leaves the store consistent; one cut short mid-way "
                        "is finished by the next run): `gc-admin expire --apply` again "
                        "removes the rest")
        raise
    except StoreError as e:
        raise _Refused(f"failed: {e}" + (f"; {progress.said()}" if apply else "")) from None
    except SequenceError as e:  # rounds it cannot order are never expired (newuser3 N8)
        raise _Refused(f"refused, nothing removed: {e}") from None
    finally:
        s.close()
    with signals.finishing(ExitCode.FAILED if plan.unreadable else 0):  # newuser22 Y4
        if as_json:
            click.echo(json.dumps(plan.as_dict(), sort_keys=True))
        else:
            for line in plan.lines():
                echo_safe(line)
    if plan.unreadable:  # named above and kept: the operator must look (exit-code table: 1)
        sys.exit(ExitCode.FAILED)


@gc_admin.command()
@_STORE
@_ENDPOINT
@click.option("--max-report-age", type=at_most(MAX_REPORT_AGE_S),
              default=format_duration(DEFAULT_MAX_REPORT_AGE_S), show_default=True,
              help="health reports older than this count as absent, as `epochgc gc` "
                   "(5m, 300s, 300)")
@click.option("--json", "as_json", is_flag=True, help="one JSON object on stdout")
def show(store: str, s3_endpoint: str | None, max_report_age: float, as_json: bool) -> None:
    """M and per-partition GC epochs, health, paused or not, lease, last round. First
    looks for rounds whose driver died (unless a live lease says it may still run): one
    with its END, or from a version before the stop bound, is recorded now; the others
    get their STOP and are shown as being recovered (the next round or `gc-admin reset`
    records them after their bound)."""
    closedout.output_is_work()  # its output is what it was asked for
    if not (math.isfinite(max_report_age) and max_report_age > 0):
        raise _usage(f"--max-report-age must be > 0 and finite, got {max_report_age!r}")
    s = _open(store, s3_endpoint)
    try:
        unrecordable: list[dict[str, Any]] = []
        # `show` writes only for a round whose driver died (its record, or its STOP):
        # what a signal's line says meanwhile (newuser15 S3).
        signals.doing("nothing was written unless a round's driver had died (`show` writes "
                      "such a round's record or its STOP marker)")
        recovered, recovering = _stop_dead(s, "gc-admin show", unrecordable)
        signals.doing(f"recorded {len(recovered)} and stopped {len(recovering)} dead "
                      "round(s)" if recovered or recovering
                      else "nothing was written (no dead round to record)")
        doc = gc_state(s, time.time(), max_report_age, recovered, recovering)
        doc["unrecordable"] = unrecordable
    finally:
        s.close()
    # The exit code says what a round would do now, as `epochgc gc`'s would (issue 41 item
    # 6: show exited 0 while M was blocked, so a script could not tell). Decided: the
    # output is the run's end, a signal no longer changes the code (newuser20 W3).
    code = show_exit_code(doc)
    with signals.finishing(code):
        if as_json:
            # Strict JSON (RFC 8259): whatever the store holds was read strictly
            # (load_strict), and a string UTF-8 cannot hold is given escaped, named under
            # `escaped`.
            safe, escaped = json_safe(doc)
            click.echo(json.dumps({**safe, "escaped": escaped}, sort_keys=True,
                                  allow_nan=False))
        else:
            for line in render(doc):
                echo_safe(line)
        sys.exit(code)


def show_exit_code(doc: dict[str, Any]) -> int:
    """`gc-admin show`'s code: paused (3) over blocked (2) over 0, as `gc` checks them (a
    round is blocked without M, and with M while the cluster is not known healthy)."""
    if doc.get("paused"):
        return int(ExitCode.PAUSED)
    if doc.get("M") is None or (doc.get("health") or {}).get("state") != "healthy":
        return int(ExitCode.BLOCKED)
    return int(ExitCode.OK)


def _say_waiting(seconds: float, rounds: list[str]) -> None:
    echo_safe(f"gc-admin: {waiting_line(seconds, rounds)}", err=True)


def _say_left(seconds: float, rounds: list[str]) -> None:
    echo_safe(f"gc-admin: {left_line(seconds, rounds)}", err=True)


def _say_meanwhile(round_id: str, how: str) -> None:
    echo_safe(f"gc-admin: round {round_id} was recorded during the wait {how}", err=True)


def _recovered(done: list[Recovered]) -> list[dict[str, Any]]:
    return [{"round": r.round_id, "record": r.record, "deleted": r.deleted,
             "unreadable": r.unreadable, "unknown": r.unknown,
             "gone_unattributed": r.gone_unattributed, "outcome": r.outcome,
             "from_end": r.from_end,
             "gone_before": r.gone_before()} for r in done]


def _unrecordable(e: DamagedRecord) -> dict[str, Any]:
    round_id = e.key.rpartition("/")[2].removesuffix(".json")
    return {"round": round_id, "key": e.key, "why": e.why}


def _recover_dead(s: ObjectStore, by: str, unrecordable: list[dict[str, Any]]
                  ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Record every dead round (`recover.recover_dead_rounds`, waiting their bound); a
    store this operator may only read (or any failure) is reported and leaves them for the
    next look. Returns the rounds recorded here, and those recorded meanwhile by someone
    else (`recorded_as`); a round whose record's key holds no object is said on stderr and
    added to `unrecordable`."""
    ended: list[dict[str, Any]] = []

    def damaged(e: DamagedRecord) -> None:
        unrecordable.append(_unrecordable(e))
        echo_safe(f"gc-admin: {unrecordable_line(e)}", err=True)

    def meanwhile(round_id: str, how: str) -> None:
        ended.append(recorded_as(s, round_id))
        _say_meanwhile(round_id, how)

    try:
        done = recover_dead_rounds(s, by, lambda: live_rounds(s, time.time()),
                                   waiting=_say_waiting, left=_say_left,
                                   meanwhile=meanwhile, damaged=damaged)
    except StoreError as e:
        echo_safe(f"gc-admin: warning: unfinished rounds not recorded: {e}", err=True)
        return [], ended
    return _recovered(done), ended


def _stop_dead(s: ObjectStore, by: str, unrecordable: list[dict[str, Any]]
               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`show`'s look at dead rounds, without waiting (review rev38n finding 4: it slept
    their bound, 240 s, before answering): those that need no wait recorded, STOP written
    to the others, shown as being recovered (recorded by the next round or `reset`)."""
    try:
        done, stopping = stop_dead_rounds(s, by, lambda: live_rounds(s, time.time()),
                                          damaged=lambda e: unrecordable.append(
                                              _unrecordable(e)))
    except StoreError as e:
        echo_safe(f"gc-admin: warning: unfinished rounds not recorded: {e}", err=True)
        return [], []
    return _recovered(done), [{"round": r.round_id, "wait_s": r.wait_s,
                               "record_after": r.record_after} for r in stopping]


@gc_admin.command("advance-epoch")
@click.option("--data-dir", required=True, type=pathopt.Path(file_okay=False),
              help="the local cluster's directory (epochgc cluster start --data-dir)")
@click.option("--partition", required=True, help="e.g. t/0")
@click.option("--json", "as_json", is_flag=True, help="one JSON object on stdout")
def advance_epoch(data_dir: str, partition: str, as_json: bool) -> None:
    """Break glass: the partition's leader advances it to its cached cluster epoch now.
    Exit 0 without a change where the partition already applies that epoch ("nothing to
    advance"); refused (exit 1) where it cannot help: the leader's cached epoch is below
    the epochs the partition already accepted."""

    from epochgc.impl.cluster.client import ProcClusterAccess, stderr_line
    from epochgc.impl.cluster.local import LocalCluster

    access = ProcClusterAccess(LocalCluster(data_dir).client_addrs(), say=stderr_line)

    async def go() -> dict[str, Any]:
        try:
            meta = await access.any_call(op="meta")
            if partition not in (meta.get("partitions") or {}):
                # newuser5 G7: "no leader known" (1) for a name the cluster never had;
                # `produce` and `consume` call it a usage error (64) and say so.
                raise Refused(f"--partition: partition {partition!r} is unknown to the "
                              "cluster: nothing advanced", ExitCode.USAGE)
            leader = ((meta.get("partitions") or {}).get(partition) or {}).get("leader")
            if not leader:
                return {"status": "error", "message": f"no leader known for {partition!r}"}
            return await access.call(int(leader), op="break_glass_advance", partition=partition)
        finally:
            await access.close()

    # Until its outcome is known (newuser15 S3: a signal's line said nothing).
    signals.doing(f"the advance of {partition} may have been sent: `epochgc cluster status "
                  f"--data-dir {shlex.quote(data_dir)} --json` shows its M(p)")
    try:
        try:
            # signals.run, not asyncio.run (newuser20 W7's class): this command's handler
            # raised inside one of the loop's callbacks (`call_soon` as the connections
            # closed) cut asyncio's own bookkeeping halfway, and asyncio.run's shutdown
            # then waited for good on a task nothing would wake.
            r = signals.run(go())
        except signals.Interrupted as i:  # the loop's: this command's own from here on
            raise _Interrupted(i.signum) from None
    except _Interrupted as e:
        nid = access.change_unanswered
        if nid is not None:  # sent, not answered: it may be applied (newuser10 L2's shape)
            e.detail = (f"the advance of {partition} had been sent to node {nid}, not "
                        "answered: it may have been applied (`epochgc cluster status "
                        f"--data-dir {shlex.quote(data_dir)} --json` shows its M(p))")
        raise
    # Its output is the run's end, a signal no longer changes the exit code (newuser20 W3,
    # as for pause/start).
    if r.get("status") == "nothing":  # already at that epoch: done, nothing changed
        with signals.finishing(0):
            if as_json:
                _json({"partition": partition, "changed": False,
                       "message": r.get("message")})
                return
            click.echo(f"gc-admin: advance-epoch: {r.get('message')}")
        return
    if r.get("status") != "ok":
        raise _Refused(f"{partition}: {r.get('status')}: {r.get('message', r)}")
    # newuser14 R3: a failed stdout write's line says the partition was advanced.
    closedout.done(f"{partition} was advanced to {r['advanced_to']}")
    with signals.finishing(0):
        if as_json:  # newuser13 Q8: the only gc-admin command without --json
            _json({"partition": partition, "changed": True, "advanced_to": r["advanced_to"],
                   "cached_epoch": r["cached_epoch"], "inactive_epoch": r["inactive_epoch"]})
            return
        click.echo(f"gc-admin: {partition} advanced to {r['advanced_to']} (cached cluster "
                   f"epoch {r['cached_epoch']}); M(p) now {r['inactive_epoch']}")
