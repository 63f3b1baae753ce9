"""Under spark-submit the driver is the JVM's child; a JVM SIGKILLed (or crashed) runs no
handler and tells the driver nothing, and a driver waiting in something that is not a call
into Spark (the dead-round recovery's wait before Spark starts) went on as an orphan for
minutes, holding the store's lease, long after spark-submit exited 137 (s27a).
`jvmsignals.watch_jvm` sees the parent end. Here real processes: a parent SIGKILLed under a
child that watches it (no JVM: the watch is of the parent, whatever it runs)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BOUND_S = 60.0  # a bound for a hang, not a timing assumption

CHILD = textwrap.dedent("""
    import sys, threading
    from epochgc.impl.gc.jvmsignals import watch_jvm
    out = sys.argv[1]
    seen = threading.Event()
    def gone():
        with open(out, "a") as f:
            f.write("gone\\n")
        seen.set()
    stop_watching = watch_jvm(gone)
    with open(out, "a") as f:
        f.write("watching\\n")
    seen.wait(60)
    for t in threading.enumerate():  # the watch has ended: its end of the pipe is closed
        if t.name == "epochgc-jvm-watch":
            t.join(60)
    try:
        stop_watching()  # the round over, as the driver's `restore()` ends the watch
        said = "stopped"
    except BaseException as e:
        said = type(e).__name__
    with open(out, "a") as f:
        f.write(said + "\\n")
""")


def _wait_for(path: Path, text: str, then: str = "") -> None:
    """Until `path` holds `text`, and `then` after it."""
    limit = time.monotonic() + BOUND_S
    while True:
        seen = path.read_text() if path.exists() else ""
        if text in seen and then in seen.partition(text)[2]:
            return
        assert time.monotonic() < limit, seen or "(nothing)"
        time.sleep(0.02)


def test_the_driver_sees_its_parent_killed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    parent_code = (f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', "
                   f"{CHILD!r}, {str(out)!r}]); print(p.pid, flush=True); p.wait()")
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE,
                              text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                              start_new_session=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        _wait_for(out, "watching")
        assert "gone" not in out.read_text()  # the parent runs: nothing seen
        parent.send_signal(signal.SIGKILL)  # as spark-submit SIGKILLed: nothing of it runs
        parent.wait()
        _wait_for(out, "gone")  # old code: no watch, the orphan goes on
        # s28b: ending the watch after it saw the parent go raised BrokenPipeError (its
        # wake-up written to a pipe whose reader had closed) out of the driver's `gc`: no
        # metrics file, none of the command's own exit path, a traceback to a dead pipe.
        _wait_for(out, "gone\n", then="\n")
        assert out.read_text().endswith("gone\nstopped\n"), out.read_text()
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)  # ours, by its pid


def test_a_watch_ended_with_the_round_calls_nothing() -> None:
    from epochgc.impl.gc.jvmsignals import watch_jvm

    called: list[int] = []
    stop_watching = watch_jvm(lambda: called.append(1))
    stop_watching()
    stop_watching()  # idempotent
    assert called == []
