"""newuser18 U5: `gc --master spark://HOST:PORT` with no master there said "gc: starting
Spark (...)", then nothing for 68 s (Spark tries a standalone master 3 times, 20 s apart,
then "All masters are unresponsive! Giving up."), a real round holding the store's lease
all along. Now a line each 10 s (`EPOCHGC_WAITING_LINE_AFTER_S`, as the waits for a store
or a node are said): "gc: still starting Spark (spark://...): N s; a standalone master
that does not answer is given up after 60 s"."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from epochgc.impl.gc.session import start_interruptibly
from epochgc.impl.store.patience import SAY_AFTER_ENV
from tests.gc.helpers import AHEAD, NOW
from tests.gc.test_cli import small_store
from tests.interrupted import by_signal

ROOT = Path(__file__).resolve().parents[2]


def test_a_start_up_still_running_is_said_each_interval_until_it_ends() -> None:
    """The start-up (here one that waits for the test) is said each `every_s` while it
    runs, with the seconds so far, and not once it has ended."""
    release, said = threading.Event(), []

    def waited(seconds: float) -> None:
        said.append(seconds)
        if len(said) == 3:
            release.set()

    def start() -> str:
        assert release.wait(60), "the start-up was never said three times"
        return "session"

    assert start_interruptibly(start, lambda: False, waited, every_s=0.05) == "session"
    assert len(said) == 3 and said == sorted(said), said
    assert all(s >= 0.05 * (i + 1) for i, s in enumerate(said)), said


@pytest.mark.spark
def test_a_master_that_does_not_answer_is_said_while_spark_starts(tmp_path: Path) -> None:
    """A real round (a dry run) against a standalone master URL whose port is bound but
    not listening: the waiting line comes while Spark's start-up waits, then a Ctrl-C ends
    it (by SIGINT: a shell says 130). The interval is cut to 0.5 s; what is asserted is
    the line, not a time."""
    small_store(tmp_path / "s")
    port = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    port.bind(("127.0.0.1", 0))  # bound, never listening: no master there
    master = f"spark://127.0.0.1:{port.getsockname()[1]}"
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{SAY_AFTER_ENV: "0.5"})
    p = subprocess.Popen(
        [sys.executable, "-m", "epochgc", "gc", "--now", str(NOW), *AHEAD, "--store",
         str(tmp_path / "s"), "--dry-run", "--master", master],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        assert p.stderr is not None
        for line in p.stderr:  # ends when the command does (on the old code, after ~68 s)
            lines.append(line.rstrip("\n"))
            if line.startswith("gc: still starting Spark"):
                p.send_signal(signal.SIGINT)
                break
        rest = p.communicate(timeout=300)[1]
    finally:
        port.close()
        if p.poll() is None:
            p.kill()
            p.wait()
    assert lines[-1].startswith(f"gc: still starting Spark ({master}): "), lines
    assert lines[-1].endswith(" s; a standalone master that does not answer is given up "
                              "after 60 s"), lines
    assert f"gc: starting Spark ({master})" in lines, lines
    assert p.returncode == by_signal(signal.SIGINT), lines + rest.splitlines()
