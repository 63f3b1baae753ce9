"""newuser12 P2: `demo`'s progress line was written twice, the copy at the shutdown that
followed a SIGINT. Stderr is a text stream over our own raw stream (`closedout._ErrGuard`,
Python code): a signal handler that raises runs between two bytecodes, so it can run
after `os.write` has written a line and before the raw write returns its count; the buffer
above then keeps the line as unwritten, and the flush at exit writes it again.

Made certain here, not raced: a line longer than a one-page pipe nobody reads yet, so
`os.write` writes the first page and blocks in the kernel (proc(5) wchan "pipe_write" /
"anon_pipe_write"); the signal is sent then, and the write returns the page it wrote
(pipe(7): a write interrupted by a signal handler after writing some bytes returns their
count), into the handler's exception."""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import signal
import threading
import time
from collections.abc import Callable

import pytest

from epochgc.impl import closedout

PAGE = 4096
BOUND_S = 60.0  # a bound for a hang, not a timing assumption


class _Stop(Exception):
    """The handler's exception (as a SIGINT's KeyboardInterrupt)."""


def _blocked_in_pipe_write(tid: int) -> bool:
    try:
        with open(f"/proc/self/task/{tid}/wchan") as f:
            return "pipe_write" in f.read()
    except OSError:
        return False


def _stderr(w: int) -> io.TextIOWrapper:
    return closedout.err_stream(closedout._ErrGuard(w), "utf-8", "strict")


def _stdout(w: int) -> io.TextIOWrapper:
    # s28f: stdout had a BufferedWriter between (`replay big.jsonl`, a slow reader, SIGINT:
    # a result line twice in 5 runs of 6); old composition io.TextIOWrapper(io.
    # BufferedWriter(closedout._Guard(w))): this test failed on it.
    return closedout.out_stream(closedout._Guard(w), "utf-8", "strict", True)


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="proc(5) needed")
@pytest.mark.parametrize("make", [_stderr, _stdout], ids=["stderr", "stdout"])
def test_a_line_a_signal_cut_is_never_written_twice(
        make: Callable[[int], io.TextIOWrapper]) -> None:
    """Old code: the page written before the signal came again at the flush (4,096 bytes
    twice)."""
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, PAGE)
    stream = make(w)
    line = "x" * (PAGE + 1000) + "\n"
    main = threading.get_native_id()

    def handler(_signum: int, _frame: object) -> None:
        raise _Stop

    def send() -> None:
        limit = time.monotonic() + BOUND_S
        while not _blocked_in_pipe_write(main) and time.monotonic() < limit:
            time.sleep(0.01)
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGUSR1)

    previous = signal.signal(signal.SIGUSR1, handler)
    got = bytearray()
    reader = threading.Thread(target=lambda: _read_all(r, got), daemon=True)
    try:
        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        with pytest.raises(_Stop):
            stream.write(line)
        sender.join(BOUND_S)
        reader.start()  # now someone reads: what the exit's flush writes arrives
        with contextlib.suppress(OSError, ValueError):
            stream.flush()  # what the exit does
            stream.close()
        os.close(w)  # the raw stream does not own it: the reader's end-of-file
    finally:
        signal.signal(signal.SIGUSR1, previous)
    reader.join(BOUND_S)
    assert len(got) <= len(line), f"{len(got)} bytes for a line of {len(line)}: written twice"
    assert bytes(got) == line.encode()[:len(got)]


def _read_all(fd: int, into: bytearray) -> None:
    while chunk := os.read(fd, 65536):
        into.extend(chunk)
    os.close(fd)
