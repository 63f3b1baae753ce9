"""newuser20 W4: `gc --pushgateway` to a gateway that accepts and never answers. After the
round's record, a Ctrl-C said "SIGINT after the round ended: its record stands, exit code
3" and the command still waited out the push's 30 s; a second Ctrl-C then ended the round
its record says `paused` (exit 3) by the signal (130), against the README ("Once the
round's record is written, a signal no longer changes the exit code").

Now a signal after the record abandons the push at once (a warning names the gateway and
the signal; the exit code is the record's), any further signal changes nothing, and a push
still unanswered after `EPOCHGC_WAITING_LINE_AFTER_S` (10 s by default) is said.

Deterministic: the gateway is a loopback server that accepts and never answers, and the
test signals the command only once that server has read the push's request (the command
is then in the push), never after a sleep. A paused store's round needs no Spark (it is
refused, exit 3, with its record written)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.patience import SAY_AFTER_ENV
from tests.gc.helpers import NOW, simple_cluster
from tests.interrupted import reaped

ROOT = Path(__file__).resolve().parents[2]
BOUND_S = 120.0  # generous: a hang, not a slow machine, fails the test


class SilentGateway:
    """A loopback server that accepts, reads, and never answers; `pushed` is set once it
    has read an HTTP request (the preflight's bare TCP connect sends none)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.pushed = threading.Event()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                c, _ = self.sock.accept()
                self.conns.append(c)
                threading.Thread(target=self._read, args=(c,), daemon=True).start()

    def _read(self, c: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := c.recv(65536):
                if data.startswith((b"PUT ", b"POST ")):
                    self.pushed.set()

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            with contextlib.suppress(OSError):
                c.close()


@contextlib.contextmanager
def silent_gateway() -> Iterator[SilentGateway]:
    g = SilentGateway()
    try:
        yield g
    finally:
        g.close()


def _paused_store(root: Path) -> None:
    simple_cluster(LocalStore(root, create=True), 100)
    subprocess.run([sys.executable, "-m", "epochgc", "gc-admin", "pause", "--store", str(root)],
                   check=True, capture_output=True, timeout=BOUND_S,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)))


def _gc(root: Path, port: int, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "epochgc", "gc", "--store", str(root), "--now", str(NOW),
         "--i-know-now-is-ahead", "--pushgateway", f"127.0.0.1:{port}"],
        env=dict(os.environ, PYTHONPATH=str(ROOT), **env), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def _record(root: Path) -> dict[str, object]:
    store = LocalStore(root)
    [rec] = [json.loads(store.get(o.key)) for o in store.list_all(ROUNDS_PREFIX)]
    return rec


def _signalled_in_push(tmp_path: Path, signals: int) -> tuple[int, str, dict[str, object]]:
    """SIGINT once the push reached the gateway; a second one (if `signals` is 2) once the
    first is said (two at once would be one: a pending signal is not queued twice)."""
    root = tmp_path / "store"
    _paused_store(root)
    with silent_gateway() as g:
        p = _gc(root, g.port)
        assert p.stderr is not None
        lines: list[str] = []
        with reaped(p):
            assert g.pushed.wait(BOUND_S), "the push never reached the gateway"
            p.send_signal(signal.SIGINT)
            if signals == 2:
                for line in p.stderr:
                    lines.append(line)
                    if "after the round ended" in line:
                        p.send_signal(signal.SIGINT)
                        break
            _, rest = p.communicate(timeout=BOUND_S)
    return p.returncode, "".join(lines) + rest, _record(root)


def test_a_signal_during_the_push_abandons_it_and_keeps_the_records_code(
        tmp_path: Path) -> None:
    code, err, rec = _signalled_in_push(tmp_path, 1)
    assert (code, rec["outcome"], rec["exit_code"]) == (3, "paused", 3), err
    assert "gc: SIGINT after the round ended: its record stands, exit code 3" in err, err
    # Old code: waited out the push's 30 s, "...: no answer in time".
    assert "metrics not pushed to --pushgateway 127.0.0.1:" in err, err
    assert "interrupted by SIGINT" in err, err
    assert "no answer" not in err, err
    assert "Traceback" not in err, err


def test_a_second_signal_during_the_push_changes_nothing(tmp_path: Path) -> None:
    """Old code: the second SIGINT ended the paused round (record exit 3) by the signal."""
    code, err, rec = _signalled_in_push(tmp_path, 2)
    assert (code, rec["exit_code"]) == (3, 3), err
    assert "interrupted by SIGINT: the round ended" not in err, err
    assert "Traceback" not in err, err


def test_a_push_still_unanswered_is_said(tmp_path: Path) -> None:
    """The waiting line (after 10 s by default; here at once), naming the gateway and how
    long the push waits at most; the test signals only once it is said."""
    root = tmp_path / "store"
    _paused_store(root)
    with silent_gateway() as g:
        p = _gc(root, g.port, **{SAY_AFTER_ENV: "0.01"})
        assert p.stderr is not None
        lines: list[str] = []
        with reaped(p):
            for line in p.stderr:
                lines.append(line)
                if "waiting for the Pushgateway" in line:
                    p.send_signal(signal.SIGINT)
                    break
            _, rest = p.communicate(timeout=BOUND_S)
    err = "".join(lines) + rest
    assert p.returncode == 3, err
    [said] = [ln for ln in err.splitlines() if "waiting for the Pushgateway" in ln]
    assert f"127.0.0.1:{g.port}" in said and "at most 30 s" in said, said
    assert "interrupted by SIGINT" in err, err


def test_late_signals_after_the_record_are_each_said_and_ignored() -> None:
    """`absorb_late_signal` itself: old code restored the previous handlers at the first
    late signal, so the second raised KeyboardInterrupt (exit by it, not the record's 3)."""
    code = textwrap.dedent('''
        import os, signal, sys
        from epochgc.impl.gc.stop import absorb_late_signal
        late = absorb_late_signal(3, lambda line: print(line, file=sys.stderr, flush=True))
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        assert late.signum == signal.SIGINT, late.signum
        sys.exit(3)
    ''')
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                       capture_output=True, text=True, timeout=BOUND_S)
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert r.stderr.splitlines() == [
        "gc: SIGINT after the round ended: its record stands, exit code 3",
        "gc: SIGTERM after the round ended: its record stands, exit code 3"], r.stderr


def test_a_signal_as_the_round_ended_gives_up_the_push_too(tmp_path: Path) -> None:
    """A signal at `round-over` (the record written, the round's handlers still in place)
    is said as "after the round ended" too: the push is given up for it as well (before:
    the command said the round had ended, then waited out the push's 30 s)."""
    from epochgc.impl.signals import HOOK_ENV

    root = tmp_path / "store"
    _paused_store(root)
    with silent_gateway() as g:
        p = _gc(root, g.port, **{HOOK_ENV: "round-over:SIGINT"})
        with reaped(p):
            _, err = p.communicate(timeout=BOUND_S)
    assert "test hook: SIGINT at round-over" in err, err
    assert p.returncode == 3, err
    assert "after the round ended: its record stands, exit code 3" in err, err
    assert "metrics not pushed to --pushgateway" in err and "interrupted by SIGINT" in err, err
    assert "no answer" not in err, err
