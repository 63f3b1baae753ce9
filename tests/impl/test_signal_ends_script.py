"""Issue 41 (s27e): a command a Ctrl-C interrupted ends BY the signal, so that a shell script
running it stops too (impl/entry.py).

bash, waiting for a foreground command when SIGINT comes, goes on with the script if the
command exited normally: it takes that as "the command handled the Ctrl-C and chose to go
on" (bash(1), SIGNALS; https://www.cons.org/cracauer/sigint.html, "wait and cooperative
exit"). The old `sys.exit(130)` was such an exit: `for s in a b; do epochgc gc ...; done`
or `epochgc demo; rm -rf x` ran its next command after the operator's Ctrl-C. A terminal's
Ctrl-C reaches the whole foreground process group, the script's shell with the command: the
test hook sends SIGINT to the group of a bash that runs the command (its own session, as a
terminal's job), while the command loads (a state, not a delay)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from epochgc.impl.signals import HOOK_ENV
from tests.interrupted import by_signal, shell_status

ROOT = Path(__file__).resolve().parents[2]


def _script(hook: str) -> subprocess.CompletedProcess[str]:
    """bash runs `epochgc replay` (signalled at `hook`), then says it went on, and how the
    command ended (`$?`)."""
    command = f"{HOOK_ENV}={hook} {sys.executable} -m epochgc replay --vector " \
              "fence-window-reference"
    return subprocess.run(
        ["bash", "-c", f'{command}; echo "went on: $?"; exit 0'],
        env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True,
        timeout=300, start_new_session=True,
        # SIGINT at its default in the shell, as in a terminal's job: a shell started with
        # it ignored (a background job of a non-interactive shell) keeps it ignored.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def test_a_ctrl_c_stops_the_script_that_runs_the_command() -> None:
    """Old code: bash went on ("went on: 130") and the script exited 0."""
    r = _script("load:SIGINT:group")
    assert "test hook: SIGINT at load" in r.stderr, r.stderr
    assert "epochgc replay: interrupted by SIGINT" in r.stderr, r.stderr  # said first
    assert "went on" not in r.stdout, (r.stdout, r.stderr)
    assert r.returncode == by_signal(signal.SIGINT), (r.returncode, r.stdout, r.stderr)


def test_the_shells_status_for_the_command_is_still_130() -> None:
    """A SIGINT to the command alone (`kill -INT PID`) stops the command, not the script:
    the script goes on, and its `$?` is the documented 130."""
    r = _script("load:SIGINT")
    assert "epochgc replay: interrupted by SIGINT" in r.stderr, r.stderr
    assert r.stdout.strip() == f"went on: {shell_status(signal.SIGINT)}", (r.stdout, r.stderr)
    assert r.returncode == 0, r.stderr
