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
"""

from __future__ import annotations

import signal
import time
from types import FrameType

_early: list[int] = []  # signals received before `impl.signals.install`
_started_at: float | None = None  # time.monotonic() as `main` began (`started_at`)
# Whether SIGHUP was ignored when the process started (None: `main` did not run, the
# command runs in-process: look now). `nohup` (POSIX: "the nohup utility shall ... ignore
# the SIGHUP signal") and a shell's background job started that way ask for the command
# to outlive its terminal: the hangup is then left ignored, never caught.
_hup_ignored: bool | None = None


def hup_ignored() -> bool:
    """Whether SIGHUP is to be left ignored (it was ignored when the process started)."""
    if _hup_ignored is not None:
        return _hup_ignored
    return signal.getsignal(signal.SIGHUP) == signal.SIG_IGN


def _keep(signum: int, _frame: FrameType | None) -> None:
    _early.append(signum)


def take_early() -> int | None:
    """The first signal received before the command's handlers, once (None if none)."""
    first = _early[0] if _early else None
    _early.clear()
    return first


def started_at() -> float | None:
    """When the `epochgc` command began, before its imports (None: `main` did not run, the
    command runs in-process): `demo --seconds` counts its budget from there."""
    return _started_at


def main() -> None:
    global _hup_ignored, _started_at
    _started_at = time.monotonic()
    _hup_ignored = signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    for s in (signal.SIGINT, signal.SIGTERM) + (() if _hup_ignored else (signal.SIGHUP,)):
        signal.signal(s, _keep)
    from epochgc.impl.cli import main as cli

    cli()
