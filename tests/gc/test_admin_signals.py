"""gc-admin under SIGINT / SIGTERM (issue 41's exit codes): it says so and ends by the signal
once it has (a shell's 130 / 143; tests/interrupted.py), not click's "Aborted!" with exit 1
(SIGINT) or death by the signal with no word (SIGTERM).

Deterministic: the store is an S3 endpoint on loopback that accepts the connection and never
answers; the signal is sent only once the command's first request has connected, so it
always lands while the command waits on the store."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from epochgc.impl.signals import NOTHING_YET
from tests.interrupted import by_signal

ROOT = Path(__file__).resolve().parents[2]
LIMIT_S = 300.0  # a bound for a hung process, not a timing assumption


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_gc_admin_says_a_signal_and_ends_by_it(sig: int) -> None:
    """Old code: SIGINT exit 1 ("Aborted!"); SIGTERM killed it (-15) without a word."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(LIMIT_S)
        port = server.getsockname()[1]
        env = dict(os.environ, PYTHONPATH=str(ROOT), AWS_ACCESS_KEY_ID="test",
                   AWS_SECRET_ACCESS_KEY="test", AWS_DEFAULT_REGION="us-east-1")
        env.pop("AWS_SESSION_TOKEN", None)
        proc = subprocess.Popen(
            [sys.executable, "-m", "epochgc.impl.cli", "gc-admin", "show", "--store",
             "s3://bucket/p", "--s3-endpoint", f"http://127.0.0.1:{port}"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            conn, _ = server.accept()  # its first request: it now waits for an answer
            with conn:
                proc.send_signal(sig)
                _out, err = proc.communicate(timeout=LIMIT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == by_signal(sig), (proc.returncode, err[-2000:])
    assert "Traceback" not in err, err
    # newuser8 I7: "gc-admin: interrupted by ..." here, "epochgc gc-admin: ..." while loading;
    # newuser15 S3: the full command, and what was done (it was bare).
    assert err.strip().splitlines()[-1] == (
        f"epochgc gc-admin show: interrupted by {signal.Signals(sig).name}: {NOTHING_YET}"), err
