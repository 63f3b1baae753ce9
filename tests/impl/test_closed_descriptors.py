"""A command started with its stdout or stderr closed (`>&-`, `2>&-`: some cron and daemon
set-ups) runs as with /dev/null there (newuser13 Q12: `gc >&-` ended a round that was done
in a Python traceback, `sys.stdout` being None, exit 1; `gc 2>&-` exited 1 before any work,
silently). A closed stdout counts as a reader gone (`closedout.RULE`): a command whose
output is its work exits 1, any other with its work's code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from epochgc.impl.gc.admin import ADMIN_KEY
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import simple_cluster

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def _run(argv: list[str], closed: int) -> subprocess.CompletedProcess[str]:
    """`epochgc ARGV` with descriptor `closed` (1 or 2) closed when it starts."""
    keep = {1: {"stderr": subprocess.PIPE}, 2: {"stdout": subprocess.PIPE}}[closed]
    return subprocess.run([sys.executable, "-m", "epochgc", *argv], text=True, timeout=300,
                          env=ENV, preexec_fn=lambda: os.close(closed), **keep)  # type: ignore[call-overload]


def test_gc_with_stdout_closed_ends_with_its_rounds_code_and_no_traceback(tmp_path: Path) -> None:
    root = tmp_path / "store"
    simple_cluster(LocalStore(root, create=True), 100)  # reports from 2027: the round blocks
    r = _run(["gc", "--store", str(root), "--grace", "1s", "--i-know-grace-is-short", "-q"], 1)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 2, r.stderr  # blocked, as its record says (old: 1, a traceback)


def test_gc_with_stderr_closed_runs_its_round(tmp_path: Path) -> None:
    root = tmp_path / "store"
    simple_cluster(LocalStore(root, create=True), 100)
    r = _run(["gc", "--store", str(root), "--grace", "1s", "--i-know-grace-is-short",
              "--json"], 2)
    assert r.returncode == 2, r.stdout  # old: 1 at once, no round
    assert json.loads(r.stdout)["outcome"] == "blocked", r.stdout


def test_output_that_is_the_work_into_a_closed_stdout_exits_1(tmp_path: Path) -> None:
    root = tmp_path / "store"
    simple_cluster(LocalStore(root, create=True), 100, now=time.time())  # fresh reports
    r = _run(["gc-admin", "show", "--store", str(root)], 1)
    assert (r.returncode, r.stderr) == (1, ""), r.stderr  # old: 0, the output went nowhere
    r = _run(["gc-admin", "pause", "--store", str(root), "--reason", "closed"], 1)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr  # its work (the pause) was done
    assert json.loads(LocalStore(root).get(ADMIN_KEY))["paused"], "the pause was written"
