"""`python -m epochgc.impl.conform.watchdog GRACE`: stops the port's process group when
conform dies, however it dies (newuser8 I8).

The port runs in a session of its own (client.py: a terminal's Ctrl-C must reach conform
alone), so a SIGKILL of conform, or of conform's process group, does not reach it, and a
port that does not read its stdin ran on for good. This process's stdin is the read end of
a pipe whose only write end conform holds; conform writes the port's process group id on
it once the port is started (the watchdog is started first, so that no moment exists when
the port runs unwatched but for that write). When conform ends, by any signal, the kernel
closes that end, and "if all file descriptors referring to the write end of a pipe have been
closed, then an attempt to read(2) from the pipe will see end-of-file (read(2) will return
0)" (pipe(7); POSIX read(): "no process has the pipe open for writing, read() shall return 0
to indicate end-of-file"). Then the port's group gets SIGTERM, and SIGKILL after GRACE
seconds if any of it is left. On a normal end conform has stopped the group itself and
closes the pipe: the group is empty and this exits at once.

Not PR_SET_PDEATHSIG (prctl(2)): it is Linux-only, it fires when the parent *thread* exits
rather than the process, and it reaches only the direct child, not the children of a wrapper
(`sh -c`, npm, make), which are what newuser8 I4 and I8 found left.

Its own session too (started with setsid(2) by conform), so that a signal to conform's group
does not reach it. The group's id stays the port's while any of its members lives
(setpgid(2)); it is signalled only while /proc shows members of it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

from epochgc.impl import proctree


def _signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Signal the group if any of it is left; whether any was."""
    if not proctree.group_members(pgid):
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
    return True


def stop_group(pgid: int, grace_s: float) -> None:
    if not _signal_group(pgid, signal.SIGTERM):
        return
    deadline = time.monotonic() + grace_s
    while proctree.group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    _signal_group(pgid, signal.SIGKILL)


def main(argv: list[str]) -> int:
    grace_s = float(argv[0])
    # Conform's own stops and a terminal's signals are not for this process: it ends at EOF.
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    said = b""
    while chunk := os.read(0, 4096):  # until every write end is closed
        said += chunk
    first = said.split(b"\n", 1)[0]
    if first.isdigit():  # nothing: conform died before the port started (or failed to)
        stop_group(int(first), grace_s)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
