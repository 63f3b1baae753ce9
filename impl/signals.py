"""Interrupts, one way for every long-running command (issue 41): SIGINT (Ctrl-C, to the
process or to its whole process group), SIGTERM (`kill`, `timeout`, a scheduler) and
SIGHUP (a terminal's hangup: a dropped ssh session) end the command after its own cleanup
ran, with exit code 128 + the signal's number (130, 143, 129), as a shell reports a
process a signal killed (POSIX `sh`, "Exit Status for Commands"; bash(1) "EXIT STATUS"),
and then by the signal itself (impl/entry.py: a script running the command stops too).

- `install()` (the `epochgc` group does it first thing): the first SIGINT or SIGTERM
  raises `Interrupted` in the main thread, as Python's own handler raises
  KeyboardInterrupt for SIGINT; every `finally` unwinds. Later signals do not raise again:
  they only say that the command is stopping, so the cleanup the first one started (stop
  the processes the command started, remove its temp directory, write its records) is
  never cut short halfway. Cleanups are bounded instead (a node gets 10 s after SIGTERM,
  then SIGKILL).
- `run(coro)`: `asyncio.run` where the first of both signals is recorded at once and
  cancels the main task (`loop.call_soon_threadsafe`; not `loop.add_signal_handler`, whose
  dispatch through the loop lost a signal that came as the task ended, see `run`); the
  task unwinds its `finally` blocks and its TaskGroups, then `Interrupted` is raised from
  `run`.
- `checkpoint(name)`: the test hook. `EPOCHGC_TEST_SIGNAL=NAME:SIGNAL[:group]` makes the
  command send itself SIGNAL (or its process group) when it reaches the point NAME, so a
  test signals a command at a known point (start-up, Spark start-up, mid-work) instead
  of sleeping and hoping. The points each command has are listed in `POINTS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")

# SIGHUP (issue 41, newuser9 K3): "Hangup detected on controlling terminal or death of
# controlling process" (signal(7)); a dropped ssh session or a closed terminal window makes
# the kernel send it to the terminal's foreground process group (POSIX, "General Terminal
# Interface", 11.1.10 "Modem Disconnect"). Its default action ended a round with no word,
# no record and a live lease: it stops a command as SIGTERM does, exit 129.
# SIGQUIT (Ctrl-\) keeps Python's default, a hard quit (core dump), on purpose: the one
# way left to end a command at once; `gc-admin reset --force` records the round it killed.
# Not when SIGHUP was ignored at start (`nohup`, impl/entry.py `hup_ignored`).
# Not SIGINT either when it was ignored at start (newuser19 V4): a non-interactive shell
# starts `cmd &` so (bash(1), SIGNALS: "When job control is not in effect, asynchronous
# commands ignore SIGINT and SIGQUIT in addition to these inherited handlers"), for a
# terminal's Ctrl-C to stop only the script's foreground command; Python itself keeps such
# a SIG_IGN (its `signal` docs: SIGINT is translated into KeyboardInterrupt "if the parent
# process has not changed it"), and so does this command (impl/entry.py `int_ignored`).
def _stopping_signals() -> tuple[signal.Signals, ...]:
    from epochgc.impl.entry import hup_ignored, int_ignored

    return ((() if int_ignored() else (signal.SIGINT,)) + (signal.SIGTERM,)
            + (() if hup_ignored() else (signal.SIGHUP,)))


SIGNALS = _stopping_signals()
HOOK_ENV = "EPOCHGC_TEST_SIGNAL"

# Named points of each command, for the hook (and the tests that walk them).
POINTS: dict[str, tuple[str, ...]] = {
    "demo": ("start", "spark-start", "work"),
    "chaos": ("start", "spark-start", "work"),
    # spark-launch: as the JVM is being started (impl/gc/session.py); mid-round: the batch
    # hook of impl/gc/delete.py.
    # deletes-over: the stage has ended, its record not written yet (impl/gc/stage.py).
    # summary: after the summary is printed, just before the exit (the round's record is
    # written by then).
    # round-over: the round ended, Spark not yet stopped, nothing said. restored: the
    # round's handlers given way to the late signal's (review41b B3). list-begin,
    # list-line, list-done: a dry run's `--list -` before its first line, after it, after
    # its last (the summary not yet written).
    "gc": ("start", "spark-launch", "spark-start", "deletes-over", "round-over", "restored",
           "list-begin", "list-line", "list-done", "summary"),
    # reset-removed: `gc-admin reset` has removed the lease, not yet recorded the round.
    "gc-admin reset": ("reset-removed",),
    # claim: no owner found in the store, its cluster id not yet created there.
    "cluster start": ("start", "claim", "nodes-up"),
    "conform": ("start", "work", "generated"),
    # built: a record of a batch built, the batch not sent (newuser16 S13); work: a batch
    # uploaded, not yet acknowledged; batch-end: the batch acknowledged and
    # recorded, its event loop's task past its last await (newuser5 G5); acked: between
    # batches.
    "produce": ("start", "built", "work", "batch-end", "acked"),
    # change-sent: a request a node may act on (rpc.APPLIED_ONCE_SENT) written, not answered.
    "topic create": ("change-sent",),
    "topic delete": ("change-sent",),
    "gc-admin advance-epoch": ("change-sent",),
    # barrier-started: the controller answered with the candidate, none waited for yet.
    "barrier": ("barrier-started",),
    # node-stopped: a node stopped, the next not yet asked.
    "cluster stop": ("node-stopped",),
    # round-removed: `gc-admin expire --apply` has removed a round, and said so.
    "gc-admin expire": ("round-removed",),
    # line: a partition's line written (the first), the next partition not yet read (the
    # last partition's line is written under `finishing`); closing: the last partition
    # read, its line held until the connections are closed.
    "consume": ("line", "closing"),
    # result: a step's result line written (the first one: a hook fires once).
    "replay": ("result",),
    # record: a record read (the first); checked: a record checked against the model.
    "check-trace": ("record", "checked"),
}
# Every command's, as its own code (its click callback) begins (impl/cli.py `_mark_begun`):
# the start of the window newuser15 S3 found (tests/impl/test_began_signal_said.py).
BEGAN_POINT = "began"
# Every command's, once its code returned (or exited), its result complete (impl/cli.py),
# and as click's `sys.exit` unwinds (impl/entry.py `run`): newuser19 V1, V2.
ENDED_POINT = "ended"
EXIT_POINT = "exit"
# A command's, as its last output begins, its result decided (`finishing`).
FINISHING_POINT = "finishing"
# Every command's, before its module is imported (impl/cli.py): not walked by the matrix.
LOAD_POINT = "load"
# While this module itself is imported by impl/cli.py, before any handler of ours: the
# window of newuser3 N5 (a Ctrl-C right after Enter).
IMPORT_POINT = "import"


class Interrupted(KeyboardInterrupt):
    """The command was interrupted by `signum`. A KeyboardInterrupt, so that asyncio, click
    and every `except Exception` treat it as Ctrl-C: it propagates, it is never swallowed
    as an error."""

    def __init__(self, signum: int, detail: str | None = None) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        # What the command did before it stopped, said on the one interrupt line
        # (newuser8 I7: conform printed its own line and then the group's).
        self.detail = detail

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


_received: int | None = None  # the first signal, once one came


def received() -> int | None:
    """The first SIGINT or SIGTERM this process received since `install` (the run's; each
    in-process run's group installs anew), or None."""
    return _received


# The first signal's Interrupted was raised where Python ignores exceptions (a `__del__`, a
# weakref callback such as an import lock's) and only reported as unraisable: newuser3 N6,
# a Ctrl-C lost, the command ran on to exit 0. The stop is sticky: `check` raises it again,
# and so does the next signal.
_swallowed = False


# What the command has done so far, for its interrupted line (issue 41, newuser15 S3: a
# signal after the command's code began and before it said what it had done ended with a
# bare "epochgc gc-admin: interrupted by SIGINT"). Never empty once the command's code has
# begun (impl/cli.py `_mark_begun` sets `NOTHING_YET`): a command replaces it as its first
# write gets under way (`doing`), so every interrupted line says what was done.
NOTHING_YET = "nothing was written yet"
# The line of a signal that came before any command's own code ran (while Python or the
# command's module loaded, while its options were read): nothing was done (newuser14 R8:
# an early Ctrl-C of `barrier` / `cluster stop` said only "interrupted by SIGINT").
BEFORE_BEGAN = "before the command began: nothing was done"
_done: str | Callable[[], str] | None = None  # None: the command's own code has not begun


def doing(what: str | Callable[[], str]) -> None:
    """From now on, a signal's line says `what` was done (or may have been). A callable
    is asked when the line is said: a loop's count (replay's steps, check-trace's records)
    costs one increment a step, not a sentence (newuser16 S10)."""
    global _done
    _done = what


def done_so_far() -> str:
    """What a signal's line says was done: `doing`'s last words, `BEFORE_BEGAN` before
    the command's code began. Never empty: no interrupted line is bare."""
    said = _done() if callable(_done) else _done
    return said or BEFORE_BEGAN


def unblock_output() -> bool:
    """stdout and stderr that cannot take a line now (poll(2) finds neither room nor an
    error: a pipe whose reader stopped reading, `2>&1 | less` left open) are pointed at
    /dev/null. Called for a signal after the first: a write blocked on them is interrupted
    by the signal and, retried once the handler returns (PEP 475), goes nowhere, so the
    command ends as the first signal said (newuser22 Y2: with stderr such a pipe, every
    signal's own line blocked on it and only SIGKILL ended the command). Never for the
    first signal: output a reader is merely slow to take is not thrown away. True if
    this run's output went to /dev/null so (now or at an earlier call): a helper thread
    may be left blocked in a write to the pipe, not worth waiting for."""
    global _unblocked
    from epochgc.impl import closedout

    for fd in (1, 2):
        try:
            poller = select.poll()
            poller.register(fd, select.POLLOUT)
            if poller.poll(0):  # room, or an error a write reports at once
                continue
        except (OSError, ValueError):
            continue
        _unblocked = True
        if fd == 1 and closedout.drop():
            continue
        with contextlib.suppress(OSError):
            closedout.to_devnull(fd)
    return _unblocked


_unblocked = False  # `unblock_output` pointed stdout or stderr at /dev/null in this run


def _say(line: str) -> None:
    """A handler's own line to stderr: straight to fd 2 if the main thread is inside a
    write to stderr itself (a reentrant write to a buffered stream raises RuntimeError);
    nothing if stderr is closed or gone."""
    try:
        sys.stderr.write(line)
        sys.stderr.flush()
    except RuntimeError:
        with contextlib.suppress(OSError):
            os.write(2, line.encode("utf-8", "backslashreplace"))
    except (OSError, ValueError, AttributeError):
        pass


def _note(signum: int) -> bool:
    """Record `signum`; True if it is the first (or the first one's stop was swallowed)."""
    global _received, _swallowed
    if _received is not None and not _swallowed:
        name = signal.Signals(signum).name
        unblock_output()  # a cleanup's line blocked on a reader that never reads (Y2)
        _say(f"epochgc: {name}: already stopping (cleaning up)\n")
        return False
    if _received is None:
        _received = signum
    _swallowed = False
    return True


def _unraisable(args: Any) -> None:
    """sys.unraisablehook: an interrupt Python had to ignore is kept for `check` (and said
    by no traceback); anything else goes to Python's own hook."""
    global _swallowed
    if args.exc_type is not None and issubclass(args.exc_type, KeyboardInterrupt):
        _swallowed = _received is not None
        return
    _unraisable_before(args)


_unraisable_before = sys.unraisablehook  # the hook `install` chains to


def check() -> None:
    """Raise the first signal's `Interrupted` again if it was raised where Python ignored it
    (`_unraisable`). Called at every named point (`checkpoint`), when an event loop starts
    (`run`) and when the handlers are installed."""
    global _swallowed
    if _swallowed:
        _swallowed = False
        raise interrupted()


_deferring = 0  # inside `deferred()`: a first signal is recorded, raised on leaving
_pending = False  # a first signal recorded and not raised yet


# Once the command's work is complete, a signal no longer changes its exit code (newuser19
# V1, V2): the rule `gc` has kept since newuser41 item 11 (impl/gc/stop.py
# `absorb_late_signal`), for every command. A signal that came as a command ended (its
# verdict written, "cluster ready" said) raised `Interrupted` on the way out: "nothing was
# written yet" after check-trace's verdict, click's "Aborted!" or a traceback while
# click's `sys.exit(0)` unwound (exit 1), or, once CPython's finalization had reset the
# handlers, a silent death by the signal of a run that had completed (`cluster start`
# with its nodes left running and exit 130).
_result: int | None = None  # the exit code, once the work is complete (`complete`)
_finishing = 0  # inside `finishing()`: the last output being written, its result decided
_held: int | None = None  # the first signal that came while `finishing`
_late_said = 0  # late signals said (`_say_late`)
_namer: list[Callable[[], str | None]] = []  # the running command's full name (`named`)
ENDED = "after the command ended: its result stands"  # a late signal's words


def named(name: Callable[[], str | None]) -> None:
    """How a late signal's line names the command (the `epochgc` group: its deepest
    context's name, `cluster start`)."""
    _namer[:] = [name]


def complete(exit_code: int | None) -> None:
    """The command's work is complete: its result is decided and its output written. From
    now on a SIGINT, SIGTERM or SIGHUP does not change the exit code (`exit_code`, or 1 if
    the output it was to write could not be: impl/closedout.py): it is said in one line,
    `epochgc CMD: SIGINT after the command ended: its result stands, exit code 0`, and
    otherwise ignored. A command calls it where it decides its result (after its verdict,
    after "cluster ready"); the `epochgc` group calls it for every command once its code
    returned (impl/cli.py). Not for a run a signal interrupted: it ends by that signal;
    nor in-process. Call from the main thread."""
    global _result, _held
    from epochgc.impl import closedout
    from epochgc.impl.entry import ending_by, exits_here

    if ending_by() is not None or not exits_here():
        # A signal decided the code (the process ends by it); or the command runs
        # in-process (a test's CliRunner), whose process must still stop on a Ctrl-C:
        # there, one `finishing` held is raised as before.
        held, _held = _held, None
        if held is not None and ending_by() is None:
            raise Interrupted(held)
        return
    code = closedout.exit_code(exit_code)  # flushes stdout: a failed write is known now
    _result = code if code is not None else 0
    held, _held = _held, None
    if held is not None:
        _say_late(held)


def completed() -> int | None:
    """The exit code the command's complete work decided (`complete`), or None."""
    return _result


@contextlib.contextmanager
def finishing(exit_code: int | None) -> Iterator[None]:
    """The command's last output, its result (`exit_code`) decided: written under this,
    and then the work is `complete`. A first signal while it is written is held, not
    raised (the output is whole, not cut by a signal that comes as it is written), and
    said as a late signal once it is out; a second one raises the first one's
    `Interrupted` (the first decides the exit code), so that a write blocked on a reader
    that never reads still ends on a Ctrl-C. If the output's code raises, the work is not
    complete: a held signal is raised then, as the run's interrupt. Leaves stdout
    flushed. Call from the main thread."""
    global _finishing
    _finishing += 1
    try:
        checkpoint(FINISHING_POINT)  # the signal tests' point: the output not yet written
        try:
            yield
        except SystemExit as e:  # the output's code exits with its result (conform)
            _complete_flushed(e.code if isinstance(e.code, int) or e.code is None else 1)
            raise
        except KeyboardInterrupt:  # a second signal: the held one decided it (`_first`)
            raise
        except BaseException as e:
            # The output failed: the work is not complete, so a signal held meanwhile is
            # the run's first signal, not a late one (review41a R7: left in `_held`, it
            # was raised as the NEXT in-process run's own interrupt). Raised here with
            # what failed, as the handler would have raised it.
            held = _release()
            if held is None:
                raise
            _note(held)
            raise Interrupted(held, f"{done_so_far()}; its last output failed: {e}") from e
        # Complete before `_finishing` drops: no bytecode between the two where a signal
        # would be neither held nor late (the newuser19 probe found that window: an
        # "interrupted ... nothing was written yet" after check-trace's verdict).
        _complete_flushed(exit_code)
    finally:
        _finishing -= 1


def _complete_flushed(exit_code: int | None) -> None:
    """`complete`, stdout flushed first (a failed flush is said by impl/closedout.py)."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    complete(exit_code)


def _release() -> int | None:
    """The signal `finishing` holds, no longer held."""
    global _held
    held, _held = _held, None
    return held


def _first(signum: int) -> int:
    """The signal that decides how an interrupted run ends: one `finishing` held, if a
    second came while it held it (review41a R8: the second, SIGTERM after a held SIGINT,
    ended the run 143), else `signum`. The second one only cuts the output short (a write
    blocked on a reader that never reads), as gc's rule has it: the first signal decides
    (impl/gc/README.md)."""
    held = _release() if _finishing else None
    if held is not None:
        unblock_output()  # the write it cuts, and the interrupted line after it (Y2)
    return held if held is not None else signum


def taken_late(signum: int) -> bool:
    """Take `signum` as a late signal if the work is complete (said now) or its last output
    is being written (held: `finishing`); True if taken (the handler does nothing more).
    Every handler of ours asks it first, `gc-admin`'s own too."""
    global _held
    if _result is not None:
        _say_late(signum)
        return True
    if _finishing and _held is None:
        _held = signum
        return True
    return False


def _say_late(signum: int) -> None:
    """A late signal's line. It may come while the main thread writes to stderr itself (a
    reentrant write to a buffered stream raises RuntimeError): then straight to fd 2."""
    global _late_said
    _late_said += 1
    if _late_said > 1:  # the exit's last flush blocked on a reader that never reads (Y2)
        unblock_output()
    name = _namer[0]() if _namer else None
    who = f"epochgc {name}" if name else "epochgc"
    _say(f"{who}: {signal.Signals(signum).name} {ENDED}, exit code {_result}\n")


def ignore_late_at_exit() -> None:
    """At exit, after the last atexit call (impl/entry.py), a signal that can no longer
    change the exit code is ignored: CPython's finalization then resets every handler
    Python installed to the default action (`_PySignal_Fini`), which ended a completed run
    by the signal, with no line (newuser19 V2). SIG_IGN is left in place."""
    if _result is None:
        return
    for s in SIGNALS:
        if signal.getsignal(s) is _handler:
            signal.signal(s, signal.SIG_IGN)


def take(signum: int) -> int | None:
    """What a handler of ours does with `signum` (the group's, `run`'s, gc-admin's own):
    None when it is to do nothing more: a late signal (said, or held while the last
    output is written), or one after the run's first (said "already stopping", and
    stdout and stderr that take nothing pointed at /dev/null). Else the signal that ends
    the run, recorded as its first: one `finishing` held, if any, decides (newuser23 F2:
    gc-admin's own handler raised the second, SIGTERM after a held SIGINT, and its line
    blocked on a pipe nobody read: F1)."""
    if taken_late(signum):
        return None
    signum = _first(signum)
    return signum if _note(signum) else None


def _handler(signum: int, _frame: FrameType | None) -> None:
    global _pending
    first = take(signum)
    if first is not None:
        if _deferring:
            _pending = True
            return
        raise Interrupted(first)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A cleanup that must not stop halfway (stop the nodes, remove the temp directory):
    a first SIGINT or SIGTERM that comes while it runs is raised as `Interrupted` once it
    is done, not in its middle."""
    global _deferring, _pending
    _deferring += 1
    try:
        yield
    except KeyboardInterrupt:  # already stopping (ours, or one the body raised)
        _deferring -= 1
        if not _deferring:
            _pending = False
        raise
    except BaseException as e:
        # The cleanup failed while a signal waited for its end (a review of this module:
        # the failure propagated and the signal stayed pending, raised by the next
        # `deferred()` to end, a later in-process run's): the run ends by its signal, the
        # failure as the cause.
        _deferring -= 1
        if _pending and not _deferring:
            _pending = False
            raise interrupted() from e
        raise
    _deferring -= 1
    if _pending and not _deferring:
        _pending = False
        raise interrupted()


def install() -> None:
    """SIGINT and SIGTERM raise `Interrupted` (the first one) in the main thread. A signal
    the entry point kept while the modules loaded (`impl.entry`) is raised now."""
    from epochgc.impl.entry import take_early

    # A run begins: nothing of an earlier in-process run's signals stays (a review of this
    # module: click's CliRunner runs several commands in one process, each through the
    # group, and a first signal of the next run was taken as a second one, "already
    # stopping", and ignored). In a real process this is the first call: they are unset.
    _forget()
    for s in SIGNALS:
        signal.signal(s, _handler)
    global _unraisable_before
    if sys.unraisablehook is not _unraisable:
        _unraisable_before = sys.unraisablehook
        sys.unraisablehook = _unraisable
    early = take_early()
    if early and _note(early[0]):
        if len(early) > 1:
            # A second came too before the handlers were in place (the start-up window):
            # a later signal, as one after them is (newuser24 G1: lost, the first one's
            # line blocked on a stderr nobody read and only a third signal ended it).
            unblock_output()
        raise Interrupted(early[0])
    check()


def _forget() -> None:
    """No signal received, none pending, held or swallowed, no result decided, nothing
    said done (review41b B5: the next in-process run's early signal said the last run's
    words)."""
    global _received, _swallowed, _pending, _held, _result, _done, _late_said, _unblocked
    _done = None
    _late_said = 0
    _unblocked = False
    _received = None
    _swallowed = False
    _pending = False
    _held = None
    _result = None


def ignore_further() -> None:
    """The command was interrupted and has cleaned up; it only exits now: later SIGINTs
    and SIGTERMs are ignored. newuser3 N11: a second Ctrl-C during the interpreter's
    shutdown ended the demo by the signal (status -2) after it had said "interrupted by
    SIGINT": CPython's finalization resets every handler Python installed to SIG_DFL
    (`_PySignal_Fini`, Python/pylifecycle.c `Py_FinalizeEx`, after the atexit calls), and
    leaves an ignored signal ignored. A process that ignores SIGINT still ends on SIGKILL."""
    for s in SIGNALS:
        signal.signal(s, signal.SIG_IGN)


def record(signum: int) -> None:
    """A command's own handler took `signum` as the run's first signal and raises
    `Interrupted` itself (gc's, before its round began): recorded here too, so that the
    group's handler, back in place while the command unwinds, takes the next one as a
    later signal (newuser22 Y2: it took it as the first and raised again, and a write
    blocked on a reader that never reads was cut only by the third signal)."""
    global _received
    if _received is None:
        _received = signum


def interrupted(signum: int | None = None) -> Interrupted:
    """The `Interrupted` of the signal received (or `signum`), to raise where a command
    noticed it itself (a stop flag, a cancelled task)."""
    sig = signum if signum is not None else _received
    return Interrupted(sig if sig is not None else signal.SIGINT)


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` where SIGINT and SIGTERM cancel the main task; once it has
    unwound, `Interrupted` is raised (even if the task swallowed the cancellation, or had
    already ended when the signal came)."""

    got: list[int] = []  # a signal that came while this ran
    cancel: list[Callable[[str], object]] = []  # once the main task runs: cancel it

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        # A Python-level handler, not `loop.add_signal_handler` (newuser5 G5): the loop's
        # handler only writes the signal to the loop's self-pipe, and the loop dispatches it
        # later. A signal after the main task's last await was then lost: the loop stopped
        # (run_until_complete) before it read the pipe, or the handler had been removed and
        # `_handle_signal` drops it ("Assume it's some race condition", CPython 3.11
        # Lib/asyncio/unix_events.py). This handler records it in the main thread at once;
        # the cancel goes through `call_soon_threadsafe`, which wakes the loop.
        first = take(signum)
        if first is not None:
            got.append(first)
            if cancel:
                with contextlib.suppress(RuntimeError):  # the loop is already closed
                    cancel[0](signal.Signals(first).name)

    async def guarded() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        cancel.append(lambda msg: loop.call_soon_threadsafe(task.cancel, msg))
        if got:  # came while the loop was being made: the work does not start
            raise asyncio.CancelledError(signal.Signals(got[0]).name)
        with _wakeup(loop):
            return await main

    try:
        check()  # a stop that was swallowed before the loop started
        # Restored as they were: `_handler`, or a command's own (gc-admin's).
        before = {s: signal.getsignal(s) for s in SIGNALS}
        try:
            # Inside the `try`: one the swap's own pending-signal check raises (a handler
            # being replaced) still has every handler put back (review41b B6).
            _swap(dict.fromkeys(SIGNALS, on_signal))
            result = asyncio.run(guarded())
        except asyncio.CancelledError:
            if got:
                raise Interrupted(got[0]) from None
            raise
        finally:
            _swap({s: h if h is not None else _handler for s, h in before.items()})
    finally:
        # Interrupted before the main task's first step (newuser5 G5: "coroutine
        # '_produce_batch' was never awaited" at exit): closing a coroutine that never
        # started only marks it closed; one that ran has been finished by asyncio.run.
        if inspect.getcoroutinestate(main) == inspect.CORO_CREATED:
            main.close()
    if got:
        raise Interrupted(got[0])
    return result


def _swap(handlers: dict[signal.Signals, Any]) -> None:
    """Every handler of `handlers` installed with the signals blocked (pthread_sigmask(3)):
    one that comes meanwhile is delivered, to the new handler, as the mask is restored
    (review41b B6: a SIGINT between two `signal.signal` calls ran a finished run's handler,
    which ignored it). The mask is the calling thread's: a signal another thread takes
    meanwhile is run by the main thread at its next check, which `signal.signal` itself
    makes before it sets a handler (CPython's signal_signal_impl); a handler that raises
    there leaves that handler unset, so it is set again, every handler is set, and the
    first such exception is raised once they are (review41c C4)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, handlers)
    pairs = list(handlers.items())
    raised: BaseException | None = None
    done, tries = 0, 0
    try:
        while done < len(pairs):
            try:
                while done < len(pairs):
                    signal.signal(*pairs[done])
                    done += 1
            except BaseException as e:  # a handler's, taken on the way: raised once all are set
                tries += 1
                if tries > 8:  # not a handler's: signal.signal's own refusal
                    raise
                raised = raised or e
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    if raised is not None:
        raise raised


@contextlib.contextmanager
def _wakeup(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """Wake `loop` when a signal comes. A signal the kernel gives another thread (any thread
    that does not block it may take a process-directed signal, signal(7)) does not
    interrupt the main thread's epoll_wait, so the Python-level handler would wait for the
    loop's next event; the C-level handler writes the signal's number to the wakeup fd
    (`signal.set_wakeup_fd`), which the loop watches here."""
    rsock, wsock = socket.socketpair()
    for s in (rsock, wsock):
        s.setblocking(False)

    def drain() -> None:
        with contextlib.suppress(OSError):
            while rsock.recv(4096):
                pass

    loop.add_reader(rsock.fileno(), drain)
    before = signal.set_wakeup_fd(wsock.fileno(), warn_on_full_buffer=False)
    try:
        yield
    finally:
        signal.set_wakeup_fd(before)
        loop.remove_reader(rsock.fileno())
        rsock.close()
        wsock.close()


async def cancel_all() -> None:
    """Cancel every other task of the running loop and wait for them to end: an
    interrupted main task's cleanup (stop the nodes, close connections) runs after its
    workload has stopped, not under it (asyncio.run cancels them only after the main task
    has returned)."""
    me = asyncio.current_task()
    others = [t for t in asyncio.all_tasks() if t is not me]
    for t in others:
        t.cancel()
    await asyncio.gather(*others, return_exceptions=True)


# Read once, at import, and removed from the environment: the processes the command starts
# (nodes, the Spark JVM, a port) never see it.
_hook = os.environ.pop(HOOK_ENV, None)


def take_hook(name: str) -> tuple[signal.Signals, bool] | None:
    """The hook's signal and whether it goes to the process group, if EPOCHGC_TEST_SIGNAL
    names the point `name` (consumed: once per process); for a point that is not in this
    process's own code (the Spark JVM's launch, `impl.gc.session`)."""
    global _hook
    if not _hook:
        return None
    point, _, rest = _hook.partition(":")
    if point != name:
        return None
    _hook = None
    sig_name, _, target = rest.partition(":")
    return signal.Signals[sig_name or "SIGINT"], target == "group"


def checkpoint(name: str) -> None:
    """The test hook: if EPOCHGC_TEST_SIGNAL names the point `name`, send the signal it
    names to this process (or, with `:group`, to its process group) now. The signal is
    delivered before this returns when called from the main thread; from another thread
    the main thread handles it at its next bytecode. Also where a swallowed stop is raised
    again (`check`)."""
    global _hook
    check()
    if not _hook:
        return
    point, _, rest = _hook.partition(":")
    if point != name:
        return
    _hook = None  # once per process
    sig_name, _, target = rest.partition(":")
    sig = signal.Signals[sig_name or "SIGINT"]
    # The test measures from here how long the command takes to exit.
    print(f"epochgc: test hook: {sig.name} at {name} t={time.time():.3f}", file=sys.stderr,
          flush=True)
    if target == "group":
        os.killpg(os.getpgid(0), sig)
    else:
        os.kill(os.getpid(), sig)


checkpoint(IMPORT_POINT)  # the test hook's earliest point (see IMPORT_POINT)
