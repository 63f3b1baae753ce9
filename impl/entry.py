"""The `epochgc` console script's entry point: a signal that comes while the command's
modules are still being imported is kept, not raised (newuser3 N5, N6).

Python's own SIGINT handler raises KeyboardInterrupt wherever the main thread is: inside an
import it printed a traceback (N5: `from epochgc.impl.cli import main` ... `import asyncio`
... `KeyboardInterrupt`), and inside an import lock's weakref callback Python ignores it
("Exception ignored in: <function _get_module_lock.<locals>.cb>"), so the Ctrl-C was lost
and the command ran to `OK`, exit 0 (N6). This module imports nothing beyond what the
interpreter has already loaded; its handler only records the signal, and
`impl.signals.install` (the `epochgc` group's first act) raises it as `Interrupted`: one
line, exit 130 / 143 / 129. SIGTERM and SIGHUP alike (their default action would end the
process with no word and no cleanup).

A command a signal interrupted ends BY that signal, once its cleanup is done (issue 41,
s27e): it was `sys.exit(130)`, a normal exit, and a shell script running the command went
on to its next command after a Ctrl-C. On SIGINT, bash waits for its foreground child and
goes on only if the child exited normally, taking that as "the child handled the signal
and chose to continue" (bash(1), SIGNALS: "When bash is running without job control and
receives SIGINT while waiting for a foreground command, it waits until that command
terminates and then decides what to do about the SIGINT ... if the command terminates
due to the SIGINT, bash concludes that the user meant to send the SIGINT to the entire
script, and acts on the SIGINT"; Martin Cracauer, "Proper handling of SIGINT/SIGQUIT",
https://www.cons.org/cracauer/sigint.html, "wait and cooperative exit"). CPython does
the same for an uncaught KeyboardInterrupt since 3.8 (bpo-1054041, `exit_sigint` in
Modules/main.c: reset SIGINT to SIG_DFL and kill(getpid(), SIGINT)). A shell still shows
`$?` as 128 + the signal's number (POSIX `sh`, 2.8.2 "Exit Status for Commands"), so the
documented 130 / 143 / 129 are what a caller reads; a parent reading wait(2)'s status
sees WIFSIGNALED (Python's subprocess: returncode -2 / -15 / -1).

How: the command says which signal its exit code came from (`end_by`, where it decides
the code); `main` notes the code it exits with; `_end_by_signal`, the FIRST atexit
callback registered (so the LAST to run: after PySpark's, logging's, the temp
directories', `closedout`'s stdout check), flushes stdout and stderr and then unblocks
the signal, gives it its default action and sends it to the process. Only when the exit
code is that signal's (128 + its number): a stray 130 of another cause is a normal exit.
In-process runs (click's CliRunner) never pass through `main`: unchanged.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType

_early: list[int] = []  # signals received before `impl.signals.install`
_started_at: float | None = None  # time.monotonic() as `main` began (`started_at`)
# Whether SIGHUP was ignored when the process started (None: `main` did not run, the
# command runs in-process: look now). `nohup` (POSIX: "the nohup utility shall ... ignore
# the SIGHUP signal") and a shell's background job started that way ask for the command
# to outlive its terminal: the hangup is then left ignored, never caught.
_hup_ignored: bool | None = None
# Whether SIGINT was ignored when the process started (newuser19 V4): a non-interactive
# shell's `cmd &` (bash(1), SIGNALS: "asynchronous commands ignore SIGINT and SIGQUIT"), so
# that a terminal's Ctrl-C stops the script's foreground command, not its background ones.
# Left ignored, as SIGHUP's is (Python's `signal` docs: it installs its own SIGINT handler
# only "if the parent process has not changed it"). None: as for `_hup_ignored`.
_int_ignored: bool | None = None


def hup_ignored() -> bool:
    """Whether SIGHUP is to be left ignored (it was ignored when the process started)."""
    if _hup_ignored is not None:
        return _hup_ignored
    return signal.getsignal(signal.SIGHUP) == signal.SIG_IGN


def int_ignored() -> bool:
    """Whether SIGINT is to be left ignored (it was ignored when the process started)."""
    if _int_ignored is not None:
        return _int_ignored
    return signal.getsignal(signal.SIGINT) == signal.SIG_IGN


def _keep(signum: int, _frame: FrameType | None) -> None:
    _early.append(signum)


def take_early() -> list[int]:
    """The signals received before the command's handlers, in order, once (the first
    decides; one after it is a later signal: newuser24 G1)."""
    early = list(_early)
    _early.clear()
    return early


_by_signal: int | None = None  # the signal the command's exit code came from (`end_by`)
_exit_code: list[int] = []  # the code `main` exits with, once known


def end_by(signum: int) -> None:
    """The command's exit code is 128 + `signum` because that signal interrupted it: the
    process ends by the signal (`_end_by_signal`). The first call decides: a later signal
    does not change how the process ends."""
    global _by_signal
    if _by_signal is None:
        _by_signal = signum


def ending_by() -> int | None:
    """The signal the process is to end by (`end_by`), or None."""
    return _by_signal


def _end_by_signal() -> None:
    """atexit, last of all: a command interrupted by a signal ends by it (see the module's
    docstring). Its cleanup has run (the `finally` blocks, the other atexit callbacks);
    what is left of the interpreter's finalization is a last flush of the standard
    streams, done here first, and the modules' own teardown."""
    sig = _by_signal
    if sig is None or _exit_code != [128 + sig]:
        # A run whose work was complete: a signal from here on is ignored, not the
        # default action finalization would give it (impl/signals.py `complete`).
        signals = sys.modules.get("epochgc.impl.signals")
        if signals is not None:
            signals.ignore_late_at_exit()
        return
    import contextlib  # here: the module's own imports stay what the interpreter loaded

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # closed, or a failed write: said already
            if stream is not None:
                stream.flush()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
    signal.signal(sig, signal.SIG_DFL)  # an ignored signal (`ignore_further`) would not end it
    os.kill(os.getpid(), sig)
    # Not reached: a signal a thread sends itself, unblocked, is delivered before kill(2)
    # returns (POSIX kill(): "at least one pending unblocked signal shall be delivered to
    # the sending thread before kill() returns"). Otherwise the exit code stands.


def register_first() -> None:
    """`_end_by_signal` at exit, once; call before anything else registers an atexit
    callback (atexit runs the last registered first)."""
    if not _registered:
        _registered.append(True)
        atexit.register(_end_by_signal)


_registered: list[bool] = []


def exits_here() -> bool:
    """Whether the process ends through this module (`main`, `run`): not an in-process run
    (click's CliRunner), whose process goes on after the command."""
    return bool(_registered)


def run(command: Callable[[], object]) -> None:
    """Run `command` (a click command in standalone mode: it ends by raising SystemExit)
    and note the code it exits with; one a signal decided (`end_by`) ends the process by
    that signal. For `python -m epochgc.impl.gc` and `main`."""
    register_first()
    try:
        command()
    except SystemExit as e:
        _exit_code.append(e.code if isinstance(e.code, int) else 0 if e.code is None else 1)
        signals = sys.modules.get("epochgc.impl.signals")
        if signals is not None:  # loaded by the command: the signal tests' point
            signals.checkpoint(signals.EXIT_POINT)  # click's sys.exit unwinding (V1)
        raise


def started_at() -> float | None:
    """When the `epochgc` command began, before its imports (None: `main` did not run, the
    command runs in-process): `demo --seconds` counts its budget from there."""
    return _started_at


def main() -> None:
    global _hup_ignored, _int_ignored, _started_at
    register_first()  # first: its call runs after every other atexit call
    _started_at = time.monotonic()
    _hup_ignored = signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    _int_ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    for s in ((() if _int_ignored else (signal.SIGINT,)) + (signal.SIGTERM,)
              + (() if _hup_ignored else (signal.SIGHUP,))):
        signal.signal(s, _keep)
    from epochgc.impl.cli import main as cli

    run(cli)
