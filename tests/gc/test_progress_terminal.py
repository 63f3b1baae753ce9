"""newuser8 I9: what a person at a terminal sees of a round (a real pty, pty(7)): an
interrupted round's last line once, not twice; no bar that runs on to "100%" after a stop;
and on a terminal that reports 0 columns, the plain progress lines instead of nothing."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from epochgc.impl.progress import Reporter
from epochgc.impl.signals import HOOK_ENV
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import AHEAD, NOW, simple_cluster
from tests.interrupted import by_signal

ROOT = Path(__file__).resolve().parents[2]
LIMIT_S = 300.0  # a bound for a hung process, not a timing assumption


@contextlib.contextmanager
def _pty(cols: int, rows: int = 40) -> Iterator[tuple[int, int]]:
    """(master, slave) of a new pty whose window is `cols` wide (TIOCSWINSZ, tty_ioctl(4))."""
    master, slave = pty.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        yield master, slave
    finally:
        for fd in (master, slave):
            with contextlib.suppress(OSError):
                os.close(fd)


def _drain(master: int, proc: subprocess.Popen[bytes]) -> str:
    """Everything written to the pty until the process ended (read as it comes: a full pty
    would block the writer)."""
    out = b""
    deadline = time.monotonic() + LIMIT_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # EIO: every slave end is closed
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    return out.decode("utf-8", "replace").replace("\r\n", "\n")


@pytest.mark.parametrize(("cols", "bars"), [(0, False), (80, True)])
def test_a_terminal_without_a_width_gets_lines_not_a_bar(cols: int, bars: bool) -> None:
    """Old code: a bar (drawn as nothing at 0 columns), so a 25 s round showed no progress."""
    with _pty(cols) as (_master, slave), open(slave, "w", closefd=False) as stream:
        assert Reporter(False, stream).bars is bars


def test_an_interrupted_round_at_a_terminal_says_its_last_line_once(tmp_path: Path) -> None:
    """Old code: "gc: round interrupted (SIGINT) ..." on stderr, then the same line in
    stdout's summary: twice on one terminal. The signal comes at the `start` point."""
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100)
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{HOOK_ENV: "start:SIGINT"})
    with _pty(120) as (master, slave):
        proc = subprocess.Popen(
            [sys.executable, "-m", "epochgc", "gc", "--store", str(root), "--dry-run",
             "--now", str(NOW), *AHEAD],
            stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env)
        os.close(slave)
        try:
            seen = _drain(master, proc)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=LIMIT_S)
    assert proc.returncode == by_signal(signal.SIGINT), seen
    # At `start` the round has not begun (newuser8 I10): its line is "epochgc gc:
    # interrupted by SIGINT: before the round started: ...", said on stderr and in stdout's
    # summary.
    said = [ln for ln in seen.splitlines()
            if ln.startswith("epochgc gc: interrupted by SIGINT: ")]
    assert len(said) == 1, seen


@pytest.mark.parametrize("into", ["file", "pipe"])
def test_an_interrupted_round_into_one_file_or_pipe_says_its_last_line_once(
        into: str, tmp_path: Path) -> None:
    """newuser12 P1. Old code: with stdout and stderr one file (`> log 2>&1`) or one pipe
    (`2>&1 | tee`), "gc: interrupted (SIGINT) before the round started: ..." was in the log
    twice (on stderr, then in stdout's summary); a finished round's summary is there once."""
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100)
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{HOOK_ENV: "start:SIGINT"})
    cmd = [sys.executable, "-m", "epochgc", "gc", "--store", str(root), "--dry-run",
           "--now", str(NOW), *AHEAD]
    if into == "file":
        log = tmp_path / "log"
        with log.open("wb") as out:
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                  stderr=subprocess.STDOUT, env=env, timeout=LIMIT_S)
        seen = log.read_text()
    else:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, env=env, timeout=LIMIT_S)
        seen = proc.stdout.decode()
    assert proc.returncode == by_signal(signal.SIGINT), seen
    said = [ln for ln in seen.splitlines()
            if ln.startswith("epochgc gc: interrupted by SIGINT: ")]
    assert len(said) == 1, seen


def test_an_interrupted_round_into_two_files_ends_each_with_its_line(tmp_path: Path) -> None:
    """The contract kept (impl/gc/README.md: an interrupted round's last stderr line says
    so; the summary goes to stdout): with two files, each holds the line once."""
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100)
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{HOOK_ENV: "start:SIGINT"})
    proc = subprocess.run(
        [sys.executable, "-m", "epochgc", "gc", "--store", str(root), "--dry-run",
         "--now", str(NOW), *AHEAD],
        stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=LIMIT_S)
    assert proc.returncode == by_signal(signal.SIGINT), proc
    for stream in (proc.stdout.decode(), proc.stderr.decode()):
        assert stream.splitlines()[-1].startswith("epochgc gc: interrupted by SIGINT: "), stream


@pytest.mark.spark
def test_the_bar_stays_as_it_stood_once_the_round_is_stopped() -> None:
    """Old code: after a Ctrl-C the bar ran on to "100% 4/4": tasks told to stop end early
    and count as completed, which reads as finished."""
    from epochgc.impl.gc.progress import RoundBar
    from tests.spark_shared import live_session

    sc = live_session().sparkContext
    with _pty(120) as (master, slave), open(slave, "w", closefd=False) as stream:
        reporter = Reporter(False, stream)
        assert reporter.bars
        with RoundBar(sc, "gc: listing and deleting", reporter, stopped=lambda: True):
            assert sc.parallelize(range(4), 4).map(lambda x: x).collect() == [0, 1, 2, 3]
        stream.flush()
        drawn = b""
        while select.select([master], [], [], 0)[0]:
            drawn += os.read(master, 1 << 16)
    text = drawn.decode("utf-8", "replace")
    assert "gc: listing and deleting" in text, text
    assert "4/4" not in text and "100%" not in text, text
