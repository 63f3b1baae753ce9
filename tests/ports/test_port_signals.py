"""A port started by `epochgc conform` ends quietly on SIGINT and SIGTERM (issue 41, a second
outside tester: Ctrl-C at a terminal during `epochgc conform -- python -m
epochgc.model.port` signals the whole process group, the port too, and the model's port
printed a KeyboardInterrupt traceback). Quietly: nothing on stderr, ended by the signal (a
shell reports 130 or 143). The port first answers one line, so the signal comes while it
waits for the next (where a terminal's Ctrl-C finds it)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NODE = shutil.which("node")

PORTS = {
    "model": [sys.executable, "-m", "epochgc.model.port"],
    "node": [NODE or "node", str(ROOT / "ports" / "node" / "cli.js"), "serve"],
}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("port", sorted(PORTS))
def test_a_port_ends_quietly_on_a_signal(port: str, sig: signal.Signals) -> None:
    if port == "node" and NODE is None:
        pytest.skip("node is not installed: the Node.js port is not tested")
    proc = subprocess.Popen(PORTS[port], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({"seq": 0, "line": '{"op":"state"}'}) + "\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["seq"] == 0  # serving, waiting for input
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (proc.returncode, err) == (-sig, "")


@pytest.mark.parametrize("port", sorted(PORTS))
def test_a_port_into_a_closed_output_ends_quietly(port: str) -> None:
    """Issue 41: a port whose reader went away (stdout a pipe with no reader: every write
    fails with EPIPE) printed a stack trace (Node: `Error: EPIPE: broken pipe, write` with
    13 frames; the model's port: a Python `BrokenPipeError` traceback). Now it ends as
    `epochgc` does on a closed pipe (impl/cli.py, `test_show_into_a_closed_pipe_says_
    nothing_more`): nothing on stderr, exit 1 (its output is incomplete)."""
    if port == "node" and NODE is None:
        pytest.skip("node is not installed: the Node.js port is not tested")
    lines = "".join(json.dumps({"seq": i, "line": '{"op":"reset","variant":"reference"}'})
                    + "\n" for i in range(3))
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first answer
    try:
        proc = subprocess.run(PORTS[port], input=lines.encode(), stdout=write,
                              stderr=subprocess.PIPE, timeout=60,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)))
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr.decode()) == (1, "")
