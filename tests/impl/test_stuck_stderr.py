"""newuser22 Y2: with stderr a pipe whose reader has stopped reading (`2>&1 | less` left
open, a log shipper wedged), no signal ended a command: each signal's own line ("already
stopping", "after the round ended") blocked on that pipe inside its handler, and only
SIGKILL (`replay`) or a third signal (`gc`) ended it. The rule (README): the first signal
throws no output away (a slow reader is not a stuck one); a later one points stdout and
stderr that take nothing now at /dev/null, and the command ends as the first said.

Deterministic: the pipe is one page (fcntl(2) F_SETPIPE_SZ), filled before the command
starts and never read. Each signal is sent once the main thread sleeps in a write to
descriptor 2 (proc(5) /proc/PID/syscall: "1 0x2 ...", write(2) on fd 2 on x86-64) and no
signal is pending, so the handler it meets is the one that blocks there.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from epochgc.impl.gc.lease import LEASE_KEY
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import NOW, simple_cluster
from tests.gc.test_late_signal_blocked_output import (
    BOUND_S,
    ENV,
    _full_pipe,
    _paused_store,
    _pending,
    _wait,
)
from tests.interrupted import reaped

pytestmark = pytest.mark.skipif(
    platform.machine() != "x86_64" or not os.path.exists("/proc/self/syscall"),
    reason="proc(5) syscall numbers of x86-64 needed")


def _stuck(pid: int, fd: int, sent: signal.Signals | None) -> bool:
    """The main thread sleeps in write(2) on `fd`, and the signal sent before (`sent`) was
    taken (dequeued, no longer in proc(5) SigPnd/ShdPnd): this is a write begun after it,
    or the same one retried once its handler returned."""
    try:
        writing = Path(f"/proc/{pid}/syscall").read_text().split()[:2] == ["1", hex(fd)]
    except OSError:
        return False
    return writing and (sent is None or not _pending(pid, sent))


def _waiting(pid: int, sent: signal.Signals | None) -> bool:
    """The main thread waits for a descriptor to take more (select(2) 23, pselect6(2) 270,
    poll(2) 7 on x86-64), the signal sent before taken."""
    try:
        call = Path(f"/proc/{pid}/syscall").read_text().split()[0]
    except (OSError, IndexError):
        return False
    return call in ("7", "23", "270") and (sent is None or not _pending(pid, sent))


def _two_signals(argv: list[str], tmp_path: Path, stdout_too: bool,
                 plan: tuple[tuple[int | None, signal.Signals], ...] = (),
                 blocking: bool = True) -> int:
    """Two signals (`plan`: the descriptor the command is to be blocked writing on before
    each, None for waiting in poll/select until one takes more (`_waiting`), and the
    signal; by default SIGTERM once it blocks on its output, stdout if it shares the
    pipe, then SIGTERM once it blocks on stderr after the first was taken). `blocking`
    False: the pipe is left O_NONBLOCK."""
    plan = plan or ((1 if stdout_too else 2, signal.SIGTERM), (2, signal.SIGTERM))
    r, w = _full_pipe()
    os.set_blocking(w, blocking)
    said = tmp_path / "out"
    with open(said, "w") as out:
        proc = subprocess.Popen(argv, stdout=w if stdout_too else out, stderr=w, env=ENV)
    os.close(w)
    with reaped(proc, r):
        sent: signal.Signals | None = None
        for fd, sig in plan:
            if fd is None:
                _wait("waiting for the pipe", lambda sent=sent: _waiting(proc.pid, sent),
                      proc, said)
            else:
                _wait(f"blocked writing fd {fd}",
                      lambda fd=fd, sent=sent: _stuck(proc.pid, fd, sent), proc, said)
            proc.send_signal(sig)
            sent = sig
        return proc.wait(timeout=BOUND_S)  # old code: blocked for good


def test_replay_ends_at_the_second_signal(tmp_path: Path) -> None:
    """`replay big.jsonl 2>&1 | stuck`: results, then the first signal's line, block on the
    pipe; the second said "already stopping" into the same pipe, inside its handler."""
    steps = tmp_path / "big.jsonl"
    steps.write_text("".join(f'{{"op":"fence","term":1,"epoch":{e}}}\n' for e in range(5000)))
    code = _two_signals([sys.executable, "-m", "epochgc", "replay", str(steps)], tmp_path,
                        stdout_too=True)
    assert code == -signal.SIGTERM  # ended by the first signal (143 to a shell)


def test_gc_ends_at_the_second_signal(tmp_path: Path) -> None:
    """`gc` on a paused store, its refusal's line blocked on stderr: the first signal stops
    the round before it began; the second was taken as the first one after the round's
    end (its line blocked in its handler), and only a third ended the command."""
    root = tmp_path / "store"
    _paused_store(root)
    code = _two_signals([sys.executable, "-m", "epochgc", "gc", "--store", str(root),
                         "--now", str(NOW), "--i-know-now-is-ahead"], tmp_path,
                        stdout_too=False)
    assert code == -signal.SIGTERM


@pytest.mark.parametrize("command", ["show", "pause", "reset"])
def test_gc_admin_ends_at_the_second_signal_by_the_first(tmp_path: Path, command: str) -> None:
    """newuser23 F1, F2: `gc-admin show 2>&1 | stuck`, SIGINT (held: the report is its last
    output) then SIGTERM: gc-admin's own handler raised the SIGTERM and its line blocked on
    the same pipe (hung until the pipe was read, then ended by SIGTERM, the SIGINT lost).
    The first signal decides: it ends by SIGINT (130 to a shell)."""
    root = tmp_path / "store"
    store = LocalStore(root, create=True)
    simple_cluster(store, 100)
    if command == "reset":  # a released lease, which it removes (F2: its SIGINT lost)
        store.put(LEASE_KEY, json.dumps({"round": "round-A", "host": "h", "pid": 1,
                                         "renewed_at": 0, "expires_at": 0}).encode())
    code = _two_signals([sys.executable, "-m", "epochgc", "gc-admin", command, "--store",
                         str(root)], tmp_path, stdout_too=True,
                        # reset's SIGINT is not held (it came before its last output):
                        # its interrupted line blocks on stderr
                        plan=((1, signal.SIGINT), (2 if command == "reset" else 1,
                                                   signal.SIGTERM)))
    assert code == -signal.SIGINT


def test_a_full_non_blocking_output_waits_and_the_first_signal_decides(tmp_path: Path) -> None:
    """newuser23 F8: stdout and stderr a full pipe left O_NONBLOCK (a shell another program
    left so): a SIGINT ended `replay` with exit 1, not 130: its own line failed with
    EAGAIN (stderr's guard raised it). Stderr now waits as a blocking one would, as stdout
    does; the second signal cuts it, and the first decides."""
    steps = tmp_path / "big.jsonl"
    steps.write_text("".join(f'{{"op":"fence","term":1,"epoch":{e}}}\n' for e in range(5000)))
    code = _two_signals([sys.executable, "-m", "epochgc", "replay", str(steps)], tmp_path,
                        stdout_too=True, plan=((None, signal.SIGINT), (None, signal.SIGTERM)),
                        blocking=False)
    assert code == -signal.SIGINT  # old code: 1 at the first


def test_two_signals_before_the_handlers_cut_a_stuck_stderr(tmp_path: Path) -> None:
    """newuser24 G1: SIGINT then SIGTERM while the command loads (kept by impl/entry.py's
    start-up handler): the second was dropped with the first taken, so the first one's
    line ("interrupted ... before the command began") blocked on a stderr nobody read and
    only a third signal ended the command. The second is a later signal: stderr goes to
    /dev/null. Made certain here: both kept before `install`, then a write to fd 2."""
    code = textwrap.dedent("""
        import os, signal
        from epochgc.impl import entry, signals
        entry._early.extend([signal.SIGINT, signal.SIGTERM])
        try:
            signals.install()
        except signals.Interrupted as e:
            assert e.signum == signal.SIGINT, e.signum  # the first decides
        os.write(2, b"x" * 100)  # old code: blocked on the full pipe for good
        print("ended")
    """)
    r, w = _full_pipe()
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=w,
                            env=ENV, text=True)
    os.close(w)
    with reaped(proc, r):
        out, _ = proc.communicate(timeout=BOUND_S)
    assert proc.returncode == 0 and out == "ended\n", (proc.returncode, out)
