"""newuser14 R8 (issue 41): an early SIGINT to `barrier` or `cluster stop` said only
"epochgc barrier: interrupted by SIGINT", not what was or was not done (SIGTERM a moment
later said "the barrier had started (candidate N ...)"). A signal before the command's own
code began (here: while its module loads, the test hook's `load` point) did nothing, and
says so; in the command's code before it asked anything, the barrier says it was not
started (tests/impl/test_barrier_progress.py) and `cluster stop` that no node was."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.interrupted import by_signal

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("argv, who", [(["barrier"], "barrier"),
                                       (["cluster", "stop"], "cluster stop")])
def test_a_signal_before_the_command_began_says_nothing_was_done(
        argv: list[str], who: str, tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), EPOCHGC_TEST_SIGNAL="load:SIGINT")
    r = subprocess.run([sys.executable, "-m", "epochgc", *argv, "--data-dir",
                        str(tmp_path / "c")], env=env, capture_output=True, text=True,
                       timeout=120)
    assert "test hook: SIGINT at load" in r.stderr, r.stderr
    assert r.returncode == by_signal(signal.SIGINT), r.stderr
    # Old code: "epochgc barrier: interrupted by SIGINT"; "epochgc cluster: ..." for both
    # cluster commands (newuser19 V6)
    assert r.stderr.splitlines()[-1] == (f"epochgc {who}: interrupted by SIGINT: before the "
                                         "command began: nothing was done"), r.stderr
