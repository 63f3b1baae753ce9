"""How a test reads the end of an `epochgc` command a signal interrupted (issue 41, s27e).

The rule (impl/entry.py): once its cleanup has run and its lines are said, the command
ends BY the signal (its default action), so that a shell script running it stops too
(bash(1), SIGNALS: bash goes on after a Ctrl-C when its child exited normally). What a
parent reads:

- through wait(2) (Python's subprocess, a test): killed by the signal, `returncode` is
  minus its number (-2 / -15 / -1): `by_signal(sig)`;
- through a shell (`$?`, the documented table): 128 + its number (130 / 143 / 129):
  `shell_status(sig)`; a record or `--json` object keeps saying that code.

Only the `epochgc` console script, `python -m epochgc`, `python -m epochgc.impl.gc` and
`python -m epochgc.impl.cli` end so (impl/entry.py `run`); in-process runs (click's
CliRunner), a script calling `epochgc.impl.cli.main()` itself and spark-submit's driver
exit with 128 + n (under spark-submit the JVM is the caller's child: impl/gc/submit.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from typing import Any


def by_signal(sig: int) -> int:
    """The `returncode` of an `epochgc` process that `sig` interrupted."""
    return -int(signal.Signals(sig))


def shell_status(sig: int) -> int:
    """What a shell's `$?` (and the command's record) says for that process."""
    return 128 + int(signal.Signals(sig))


@contextlib.contextmanager
def reaped(proc: subprocess.Popen[Any], *fds: int) -> Iterator[None]:
    """`proc` killed if still running on the way out (a hang fails the test, it does not
    outlive it), and `fds` (a pipe's read end the test held) closed."""
    try:
        yield
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for fd in fds:
            os.close(fd)
