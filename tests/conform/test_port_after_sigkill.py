"""newuser8 I8: the port runs in a session of its own (a terminal's Ctrl-C reaches conform
alone, newuser7 H2), so when conform is killed with SIGKILL (`timeout -s KILL`, a CI job's
hard kill, the OOM killer, `kill -9 -PGID`) nothing of conform's is left to stop it; a port
that does not read its stdin, or whose child does not, ran on for good."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conform.procs import SESSION, live_where, session_of

ROOT = Path(__file__).resolve().parents[2]


def _wait_for(predicate: object, bound_s: float) -> bool:
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads Linux's /proc")
def test_sigkill_of_conforms_group_takes_the_port_with_it(tmp_path: Path) -> None:
    ready = tmp_path / "child.pid"
    # A wrapper whose child ignores SIGTERM and never reads its stdin: the hardest case.
    conform = subprocess.Popen(
        [sys.executable, "-c", "from impl.cli import main; main()", "conform",
         "--timeout-per-step", "600", "--vectors", "--", sys.executable, "-m",
         "tests.conform.ports.wrapped_hang", "ignore-term", str(ready)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)  # its own group, as a shell job is: killed as one below
    sid = None
    try:
        assert _wait_for(ready.exists, 300), "the port's child never started"
        child = int(ready.read_text())
        sid = session_of(child)
        assert sid is not None and sid != os.getsid(0) and sid != conform.pid
        os.killpg(conform.pid, signal.SIGKILL)
        conform.wait(timeout=60)
        # Generous: the port's stop includes a SIGTERM grace before SIGKILL.
        gone = _wait_for(lambda: not live_where(SESSION, sid), 120)
        left = live_where(SESSION, sid)
        assert gone, f"left running in the port's session {sid}: {left} (child {child})"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(conform.pid, signal.SIGKILL)
        conform.wait(timeout=60)
        if sid is not None:
            for pid in live_where(SESSION, sid):  # a failing run leaves nothing either
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
