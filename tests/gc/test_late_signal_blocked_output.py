"""`gc` after its round's record (review41b B1, B3).

B1: with stdout a pipe nobody reads (`epochgc gc ... | reader`, the reader stuck), the
summary's write blocks. Every SIGINT, SIGTERM and SIGHUP after the record was said and
ignored (s30b's `absorb_late_signal`), so the blocked write was retried for good and only
SIGQUIT or SIGKILL ended the command. The README's rule for every command: "A second
signal while that last output is written (to a reader that never reads) cuts the write
short". For gc the exit code stays the record's (a done round is never turned into 130 by
a signal after its record: newuser20 W4).

B3: between the round's handlers being restored and the late signal's handler being
installed, the group's handler was back: a signal there ended a round whose record says
`paused` (exit 3) by the signal (143, `--json` "interrupted", the metrics not exported).

Deterministic: a paused store's round (refused, exit 3, its record written) needs no
Spark. The pipe is one page (fcntl(2) F_SETPIPE_SZ), filled before the command starts and
never read; the first signal is sent once the command sleeps in the pipe's write (proc(5)
/proc/PID/wchan, or /proc/PID/syscall: write(2) is syscall 1 on x86-64), the second once
the first has been taken (no longer pending in /proc/PID/status). B3's signal is sent by
the command itself at the test hook's `restored` point (impl/signals.py `checkpoint`).
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.signals import HOOK_ENV
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import NOW, simple_cluster
from tests.interrupted import reaped

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))
BOUND_S = float(os.environ.get("EPOCHGC_TEST_BOUND_S", "120"))  # a hang, not a slow machine
PIPE_BYTES = 4096


def _paused_store(root: Path) -> None:
    simple_cluster(LocalStore(root, create=True), 100)
    subprocess.run([sys.executable, "-m", "epochgc", "gc-admin", "pause", "--store", str(root)],
                   check=True, capture_output=True, timeout=BOUND_S, env=ENV)


def _record(root: Path) -> tuple[str, int]:
    store = LocalStore(root)
    [rec] = [json.loads(store.get(o.key)) for o in store.list_all(ROUNDS_PREFIX)]
    return rec["outcome"], rec["exit_code"]


def _full_pipe() -> tuple[int, int]:
    """A one-page pipe, filled: the first write to it blocks until its reader reads."""
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    os.set_blocking(w, False)
    try:
        while True:
            os.write(w, b"x" * PIPE_BYTES)
    except BlockingIOError:
        pass
    os.set_blocking(w, True)
    return r, w


def _in_pipe_write(pid: int) -> bool:
    try:
        if "pipe_write" in Path(f"/proc/{pid}/wchan").read_text():
            return True
    except OSError:
        pass
    try:  # a kernel that shows "0" as wchan: the syscall it sleeps in, write(2) on x86-64
        return Path(f"/proc/{pid}/syscall").read_text().split()[0] == "1"
    except (OSError, IndexError):
        return False


def _pending(pid: int, sig: signal.Signals) -> bool:
    """Whether `sig` is pending for the process (not yet taken by its handler)."""
    bit = 1 << (int(sig) - 1)
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("SigPnd:", "ShdPnd:")) and int(line.split()[1], 16) & bit:
            return True
    return False


def _wait(what: str, ready: object, proc: subprocess.Popen[bytes], said: Path) -> None:
    deadline = time.monotonic() + BOUND_S
    while not ready():  # type: ignore[operator]
        assert proc.poll() is None, f"ended ({proc.returncode}) before {what}: {said.read_text()}"
        assert time.monotonic() < deadline, f"not {what} in {BOUND_S} s: {said.read_text()}"
        time.sleep(0.02)


# same-pipe: `2>&1 | reader`; the first late signal's own line then blocks in its handler
@pytest.mark.parametrize("stderr_to", ["file", "same-pipe"])
def test_a_second_signal_after_the_record_cuts_a_blocked_summary(
        tmp_path: Path, stderr_to: str) -> None:
    root = tmp_path / "store"
    _paused_store(root)
    r, w = _full_pipe()
    err = tmp_path / "err"
    err.touch()
    with open(err, "w") as err_f:
        proc = subprocess.Popen(
            [sys.executable, "-m", "epochgc", "gc", "--store", str(root), "--now", str(NOW),
             "--i-know-now-is-ahead",
             # -q: the round's progress lines would block on the shared pipe before the
             # record; the summary's paused line (said even with -q) blocks after it
             *(["-q"] if stderr_to == "same-pipe" else [])],
            stdout=w, stderr=err_f if stderr_to == "file" else w, env=ENV)
    os.close(w)
    with reaped(proc, r):
        _wait("blocked on stdout", lambda: _in_pipe_write(proc.pid), proc, err)
        proc.send_signal(signal.SIGTERM)
        _wait("the first signal taken", lambda: not _pending(proc.pid, signal.SIGTERM),
              proc, err)
        if stderr_to == "file":
            _wait("the first signal said", lambda: "after the round ended" in err.read_text(),
                  proc, err)
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=BOUND_S)  # the old code: never (SIGQUIT/SIGKILL only)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still blocked {BOUND_S} s after a second signal: {err.read_text()}")
    said = err.read_text()
    assert _record(root) == ("paused", 3)
    assert code == 3, said  # the record's code: not 130/143, not by the signal
    assert "Traceback" not in said, said
    if stderr_to == "file":
        lines = said.splitlines()
        assert "gc: SIGTERM after the round ended: its record stands, exit code 3" in lines
        assert lines[-1] == ("gc: SIGINT while the summary was written: the summary was cut "
                             "short; its record stands, exit code 3"), said


def test_a_signal_as_the_round_handlers_are_restored_is_late(tmp_path: Path) -> None:
    """B3: the signal at `restored` (the round's handlers just restored) is a late one:
    said, the exit code, the --json object and the exported metrics are the record's."""
    root = tmp_path / "store"
    _paused_store(root)
    metrics = tmp_path / "m.prom"
    r = subprocess.run(
        [sys.executable, "-m", "epochgc", "gc", "--store", str(root), "--now", str(NOW),
         "--i-know-now-is-ahead", "--json", "--metrics-file", str(metrics)],
        env=dict(ENV, **{HOOK_ENV: "restored:SIGTERM"}), capture_output=True, text=True,
        timeout=BOUND_S)
    assert "test hook: SIGTERM at restored" in r.stderr, r.stderr  # the point was reached
    assert r.returncode == 3, r.stderr
    assert _record(root) == ("paused", 3)
    out = json.loads(r.stdout)
    assert (out["outcome"], out["exit_code"]) == ("paused", 3), r.stdout
    assert "gc: SIGTERM after the round ended: its record stands, exit code 3" in r.stderr
    assert "interrupted" not in r.stderr, r.stderr
    assert metrics.exists(), r.stderr  # exported, as for any round with a record


def test_only_the_output_is_cut_short() -> None:
    """`absorb_late_signal` alone: late signals while Spark stops, its scratch goes or the
    push waits (no output being written) are said and cut nothing; one while the output is
    written (`LateSignal.cuts`), after the first, drops the rest of stdout and says so."""
    code = textwrap.dedent('''
        import os, signal, sys
        from epochgc.impl import closedout
        from epochgc.impl.gc.stop import absorb_late_signal
        closedout.guard()
        late = absorb_late_signal(0, lambda line: print(line, file=sys.stderr, flush=True))
        os.kill(os.getpid(), signal.SIGINT)  # the first: as Spark stops
        os.kill(os.getpid(), signal.SIGTERM)  # a second, still no output being written
        print("cleanup went on", flush=True)
        with late.cuts("the summary"):
            print("summary begins", flush=True)
            os.kill(os.getpid(), signal.SIGINT)
            print("the rest of it", flush=True)
        print("after it", flush=True)
        sys.exit(0)
    ''')
    r = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True,
                       timeout=BOUND_S)
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stdout.splitlines() == ["cleanup went on", "summary begins"], r.stdout
    assert r.stderr.splitlines() == [
        "gc: SIGINT after the round ended: its record stands, exit code 0",
        "gc: SIGTERM after the round ended: its record stands, exit code 0",
        "gc: SIGINT while the summary was written: the summary was cut short; its record "
        "stands, exit code 0"], r.stderr
