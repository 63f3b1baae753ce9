"""A closed standard output (`epochgc ... | head -1`, `| true`) is never by itself a
failure of work that was done (newuser3 N2: every command exited 1 once its reader had
gone, after acknowledging records, creating a topic, pausing GC or finishing a round whose
record says exit code 0; under `set -o pipefail` a script then retries a produce and
duplicates its records).

- `guard()` (the `epochgc` group does it first): stdout becomes a stream whose writes,
  once the reader is gone, are dropped: the first EPIPE (Python ignores SIGPIPE, so a
  write to a pipe without a reader fails with EPIPE: Python's library docs, "signal: Note
  on SIGPIPE"; POSIX write(): "[EPIPE] An attempt is made to write to a pipe or FIFO that
  is not open for reading by any process") points descriptor 1 at /dev/null, as those
  docs advise, and the command goes on with its work and says nothing more there.
- `output_is_work()`: a command whose output is what it was asked for (`replay`,
  `consume`, `cluster status`, `gc --list -`, `gc-admin show`) declares it; if its output
  was cut short, it exits 1 (failed: the output is incomplete), quietly, where its work
  said 0 (any other code already says it did not simply succeed, and stands).
- `exit_code(code)`: the code the command ends with, by that rule.
- Any other failed write (`> /dev/full`: ENOSPC, newuser8 I6) loses output the user asked
  for: one line on stderr ("epochgc CMD: error: cannot write to stdout: ...", every
  command's error line, impl/errorline.py), later writes dropped, and the
  command exits 1 (failed) where its work said 0, whatever the command.
- `done(what)`: what the command's work has done so far, in words ("the pause was
  written"), said on that line (newuser11 M9: "cannot write to stdout" alone, after a
  pause was written or records acknowledged, read as "nothing happened", and a re-run
  duplicated records or found the topic already there). So the line comes as the command
  ends (an atexit call, before the interpreter's last flush), when what was done is known;
  a failure found after it (that last flush) is said at once.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import select
import sys

import click

from epochgc.impl import errorline
from epochgc.impl.exitcodes import ExitCode

# Said in `epochgc --help`'s exit-code table and in the READMEs.
RULE = ("A closed stdout (`| head`) is not a failure: the command stops writing and exits "
        "with its work's code; one whose output is its work (replay, consume, cluster "
        "status, gc --list -, gc-admin show) exits 1, not 0, if that output was cut short. "
        "Any other failed write to stdout (`> /dev/full`) is said in one line and exits 1 "
        "where the work said 0, and 1 over a report's 2 or 3 (`gc-admin show`).")


class _FdStream(io.RawIOBase):
    """A descriptor as a raw stream that is always writable (the guards' shared part)."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)


class _Guard(_FdStream):
    """Descriptor 1 as a raw stream whose writes never fail with EPIPE."""

    def __init__(self, fd: int) -> None:
        super().__init__(fd)
        self.cut = False
        self.failed: str | None = None  # why a write failed other than EPIPE
        self.wrote = False  # the command wrote to stdout (`wrote`)

    def write(self, b: object) -> int:
        data = memoryview(b).cast("B")  # type: ignore[arg-type]
        self.wrote = self.wrote or len(data) > 0
        if self.cut:
            return len(data)
        try:
            # All of it, here: the text stream above keeps nothing to write again
            # (`out_stream`, as `err_stream`).
            done = 0
            while done < len(data):
                try:
                    done += os.write(self._fd, data[done:])
                except BlockingIOError:
                    # A non-blocking stdout (set so by whoever shares the pipe) that is
                    # full: wait until it takes more (a signal still interrupts the wait).
                    select.select([], [self._fd], [])
            return done
        except BrokenPipeError:
            self.cut = True
        except OSError as e:
            # newuser8 I6: `> /dev/full` (ENOSPC; POSIX write(): "[ENOSPC] There was no
            # free space remaining on the device containing the file"), EDQUOT, EIO: the
            # output is lost, which is a failure (exit 1), said once, not a traceback
            # and Python's exit 120 from the flush at exit.
            self.cut = True
            self.failed = e.strerror or str(e)
            if _ending:
                _say_failed(self.failed)
        to_devnull(self._fd)
        return len(data)


def to_devnull(fd: int) -> None:
    """Point descriptor `fd` at /dev/null: later writes to it, and any child's, go nowhere
    and never block. The one place this is done (stdout or stderr whose reader is gone or
    stuck, a cut output)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    if devnull != fd:  # `fd` was closed and open(2) reused its number: already there
        os.dup2(devnull, fd)
        os.close(devnull)


def _say_failed(why: str) -> None:
    """The one line for a failed stdout write, with what the work did (`done`); stderr may
    be closed too: then silence."""
    did = f"; {_done}" if _done else ""
    command = (_command if isinstance(_command, str) or _command is None
               else errorline.command_of(errorline.deepest(_command)))
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(errorline.line(command, f"cannot write to stdout: {why}{did}") + "\n")
        sys.stderr.flush()


_guard: _Guard | None = None
_output_is_work = False
_done = ""  # what the command's work did so far (`done`)
_command: click.Context | str | None = None  # whose line it is (`named`)
_ending = False  # the atexit call ran: a failure found later is said at once


def named(command: click.Context | str) -> None:
    """The command the line names: a name, or the `epochgc` group's context (its deepest
    context, when the line is said, names the subcommand: `gc-admin show`)."""
    global _command
    _command = command


def done(what: str) -> None:
    """Record what the command's work has done so far ("N record(s) were acknowledged
    (FILE)"; each call replaces the last): a failed stdout write's line says it."""
    global _done
    _done = what
    if what:  # and a signal's line (impl/signals.py `doing`, newuser15 S3)
        from epochgc.impl import signals

        signals.doing(what)


def _at_exit() -> None:
    """Flush stdout (a failure is found now, if not before) and say a failed write once."""
    global _ending
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    _ending = True
    if _guard is not None and _guard.failed is not None:
        _say_failed(_guard.failed)


def _reopen_closed(fd: int) -> bool:
    """If descriptor `fd` (0, 1 or 2) was closed when the command started (`cmd >&-`,
    `2>&-`, some daemon and cron set-ups), point it at /dev/null and give `sys` a stream on
    it (Python leaves `sys.stdout` None then: newuser13 Q12, `gc >&-` ended a round that
    was done in a traceback, exit 1; `2>&-`, exit 1 before any work). Not only for Python's
    sake: a closed 0, 1 or 2 is the number the next open(2) returns ("the lowest-numbered
    file descriptor not currently open", POSIX open()), so a journal file or a socket
    opened later would become the command's stdout and receive its output. True if it was
    closed."""
    try:
        os.fstat(fd)
        return False
    except OSError:
        pass
    null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)
    stream = open(fd, "r" if fd == 0 else "w", closefd=False)  # noqa: SIM115 (kept)
    setattr(sys, ("stdin", "stdout", "stderr")[fd], stream)
    return True


def reopen_closed() -> None:
    """Every standard descriptor the command started without is opened on /dev/null
    (`_reopen_closed`); a closed stdout counts as one whose reader went away: a command
    whose output is its work exits 1 (its output went nowhere), any other with its work's
    code. Call first, before anything opens a file."""
    global _closed_at_start
    for fd in (0, 2):
        _reopen_closed(fd)
    _closed_at_start = _reopen_closed(1)


_closed_at_start = False  # stdout was closed when the command started (`reopen_closed`)


def guard() -> None:
    """Replace `sys.stdout` with an EPIPE-proof stream on the same descriptor, keeping its
    encoding, error handler and line buffering. Idempotent; leaves a stdout without a
    descriptor (a test runner's capture) alone."""
    global _guard
    if _guard is not None:
        return
    out = sys.stdout
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):
        return
    with_fd = _Guard(fd)
    with_fd.cut = _closed_at_start
    try:
        out.flush()
    except BrokenPipeError:
        with_fd.cut = True
    except OSError as e:  # what was buffered is lost: said as a later write's would be
        with_fd.cut = True
        with_fd.failed = e.strerror or str(e)
    sys.stdout = out_stream(with_fd, out.encoding, out.errors, bool(out.line_buffering))
    _guard = with_fd
    atexit.register(_at_exit)


def out_stream(raw: _Guard, encoding: str, errors: str | None,
               line_buffering: bool) -> io.TextIOWrapper:
    """The text stream `guard` makes of `raw`: no BufferedWriter between them, for the
    reason `err_stream` gives (newuser12 P2's, on stdout: s28f saw `replay big.jsonl`
    with a slow reader, SIGINT, print step 1,081's result line twice, 5 runs of 6). The
    text stream gathers its bytes (up to its chunk size, or a line with line buffering)
    and hands them over once, clearing them before the write (CPython textio.c
    `_textiowrapper_writeflush`); `raw.write` writes all it is given."""
    return io.TextIOWrapper(raw, encoding=encoding, errors=errors,  # type: ignore[arg-type]
                            line_buffering=line_buffering)


class _ErrGuard(_FdStream):
    """Descriptor 2 as a raw stream whose writes never fail: once one does (EIO from a
    terminal that hung up, EPIPE from a reader gone), later ones go to /dev/null. Stderr
    only says how the work goes; a failed line there is nobody's to hear (newuser9 K3: on
    a real hangup, a round's stop line hit EIO and the round recorded `error`, exit 1,
    instead of `interrupted` SIGHUP)."""

    def __init__(self, fd: int) -> None:
        super().__init__(fd)
        self.gone = False

    def write(self, b: object) -> int:
        data = memoryview(b).cast("B")  # type: ignore[arg-type]
        if self.gone:
            return len(data)
        try:
            # All of it, here: the text stream above keeps nothing to write again (`err_stream`).
            done = 0
            while done < len(data):
                try:
                    done += os.write(self._fd, data[done:])
                except BlockingIOError:
                    # A non-blocking stderr that is full waits as a blocking one would, as
                    # stdout does (`_Guard`): a signal still interrupts the wait (and a
                    # later one points it at /dev/null). Raised, it failed the signal's own
                    # line, and an interrupted command exited 1 (newuser23 F8).
                    select.select([], [self._fd], [])
            return done
        except OSError:
            self.gone = True
        to_devnull(self._fd)
        return len(data)


_err_guard: _ErrGuard | None = None


def guard_stderr() -> None:
    """Replace `sys.stderr` with a stream on the same descriptor whose writes never raise
    (`_ErrGuard`), keeping its encoding and error handler, written through. Idempotent;
    leaves a stderr without a descriptor (a test runner's capture) alone."""
    global _err_guard
    if _err_guard is not None:
        return
    err = sys.stderr
    try:
        fd = err.fileno()
    except (AttributeError, OSError, ValueError):
        return
    with contextlib.suppress(OSError, ValueError):
        err.flush()
    _err_guard = _ErrGuard(fd)
    sys.stderr = err_stream(_err_guard, err.encoding, err.errors)


def err_stream(raw: _ErrGuard, encoding: str, errors: str | None) -> io.TextIOWrapper:
    """The text stream `guard_stderr` makes of `raw`: written through to it, with no
    buffer between (newuser12 P2: `demo`'s progress line came twice). `raw.write` is Python
    code, so a signal handler that raises (SIGINT's KeyboardInterrupt) can run after its
    `os.write` wrote a line and before it returns the count: a BufferedWriter between them
    then kept the line as unwritten and wrote it again at the exit's flush. The text
    stream, written through, hands its bytes over once and keeps none (CPython
    textio.c `_textiowrapper_writeflush` clears them before the write): a line a signal
    cuts is cut, never doubled."""
    return io.TextIOWrapper(raw, encoding=encoding, errors=errors,  # type: ignore[arg-type]
                            line_buffering=True, write_through=True)


def drop() -> bool:
    """Stop writing stdout at once: what is buffered and every later write go nowhere
    (descriptor 1 onto /dev/null), so the exit-time flush cannot block on a reader that
    never reads (newuser9 K11: `gc --dry-run --list - | less` left open). False where
    stdout is not guarded (nothing done)."""
    if _guard is None:
        return False
    _guard.cut = True
    to_devnull(_guard.fileno())
    return True


def wrote() -> bool:
    """Whether the command has written anything to stdout (its own --json object, say),
    after flushing what is buffered; False where stdout is not guarded (a test's capture)."""
    if _guard is None:
        return False
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    return _guard.wrote


def output_is_work() -> None:
    """This command's output is its work: cut short, it exits 1."""
    global _output_is_work
    _output_is_work = True


def cut_short() -> bool:
    """Whether stdout's reader went away (after flushing what is buffered)."""
    if _guard is None:
        return False
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    return _guard.cut


def reader_gone() -> bool:
    """Whether stdout's reader went away (EPIPE: `| head`), not a failed write (which its
    own line says): after flushing what is buffered."""
    return cut_short() and not _write_failed()


# A command's report of what it found, not an error of its own: `gc-admin show`'s 2
# (a round would be blocked) and 3 (paused) are what its output says, as its 0 is.
_REPORTS = (ExitCode.OK, ExitCode.BLOCKED, ExitCode.PAUSED)


def exit_code(code: int | None) -> int | None:
    """The code to exit with: `code`, except 1 (failed) where the work itself said 0 and
    its output was cut short (`| head`) for a command whose output is its work, or failed
    to write (`> /dev/full`) for any command; and 1 where a command whose output is its
    work could not write that output, over the report its code gave (newuser17 T6:
    `gc-admin show > /dev/full` exited 2 when GC was blocked, 1 when not: the report the
    2 stands for was never written). An error's own code (64, 69, a signal's) stands."""
    if cut_short() and (_output_is_work or _write_failed()) and not code:
        return int(ExitCode.FAILED)
    if _output_is_work and _write_failed() and (code or 0) in _REPORTS:
        return int(ExitCode.FAILED)
    return code


def _write_failed() -> bool:
    return _guard is not None and _guard.failed is not None
