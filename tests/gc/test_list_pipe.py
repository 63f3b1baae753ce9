"""A dry run's `--list -` into a pipe nobody reads (newuser9 K11: `gc --dry-run --list - |
less` left open): a signal while the list is written stops the writing and ends the
command at once, 130/143, with no line about a record (a dry run has none).

The pipe is real and never read; its buffer is made one page (fcntl(2) F_SETPIPE_SZ) so a
few hundred keys fill it. The signal is sent once the command's main thread sleeps in the
kernel's pipe write (proc(5) /proc/PID/wchan: "pipe_write", "anon_pipe_write" on newer
kernels) with the list begun in the pipe, not after a sleep.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key
from tests.gc.helpers import HOUR, NOW, put_local, simple_cluster

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))
# Generous: the machine is loaded; the old code never ended at all.
BOUND_S = float(os.environ.get("EPOCHGC_TEST_BOUND_S", "600"))
PIPE_BYTES = 4096
LINE_BYTES = 200  # more than a line of the list (a key, ~50 bytes)
# SIGINT (a terminal's Ctrl-C) in the default suite; SIGTERM takes the same path (a Spark
# start-up each: ~24 s), with the full signal matrix.
SIGS = ([signal.SIGINT, signal.SIGTERM] if os.environ.get("EPOCHGC_SIGNALS") == "full"
        else [signal.SIGINT])


def _queued(fd: int) -> int:
    buf = bytearray(4)
    fcntl.ioctl(fd, termios.FIONREAD, buf)
    return int.from_bytes(buf, sys.byteorder)


def _blocked_writing(pid: int, queued: int) -> bool:
    """The writer sleeps in the pipe's write: by wchan, or (a kernel that shows "0" there)
    the pipe has less room left than one line of the list: a write of at most PIPE_BUF
    bytes is atomic (pipe(7)), so the next line waits for the whole of it."""
    try:
        if "pipe_write" in Path(f"/proc/{pid}/wchan").read_text():
            return True
    except OSError:
        pass
    return queued > PIPE_BYTES - LINE_BYTES


@pytest.mark.spark
@pytest.mark.parametrize("sig", SIGS, ids=[s.name for s in SIGS])
def test_a_signal_while_the_list_waits_on_its_reader_ends_the_dry_run(
        tmp_path: Path, sig: signal.Signals) -> None:
    root = tmp_path / "store"
    simple_cluster(LocalStore(root, create=True), 100)
    for i in range(400):  # ~40 bytes a key: several times the one-page pipe
        put_local(root, format_key(i % 1000, 50, f"k{i}"), age=12 * HOUR + 60)
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    err = tmp_path / "err"
    with open(err, "w") as err_f:
        proc = subprocess.Popen(
            [sys.executable, "-m", "epochgc", "gc", "--store", str(root), "--now", str(NOW),
             "--i-know-now-is-ahead", "--tasks", "1", "--dry-run", "--list", "-"],
            stdout=w, stderr=err_f, env=ENV, start_new_session=True)
    os.close(w)
    try:
        deadline = time.monotonic() + BOUND_S
        while not ((q := _queued(r)) and _blocked_writing(proc.pid, q)
                   and "listed" in err.read_text()):  # the writer waits on it
            assert proc.poll() is None, err.read_text()
            assert time.monotonic() < deadline, err.read_text()
            time.sleep(0.05)
        assert "listed" in err.read_text()
        os.kill(proc.pid, sig)
        try:
            code = proc.wait(timeout=BOUND_S)  # old code: never, until the reader closes
        except subprocess.TimeoutExpired:
            pytest.fail(f"still writing {BOUND_S} s after {sig.name}: {err.read_text()}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(r)
    said = err.read_text()
    assert code == 128 + sig, said
    assert "record" not in said, said
    assert said.splitlines()[-1].startswith(f"epochgc gc: interrupted by {sig.name}"), said
    assert "Traceback" not in said, said
