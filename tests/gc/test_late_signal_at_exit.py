"""newuser13 Q1: a SIGINT/SIGTERM that lands as `gc` exits, after its record and summary,
never changes its exit code. It killed the process by the signal's default action (143 or
130, no line) while the record said done, exit 0: CPython restores the default action of
every signal with a Python handler at finalization (`_PySignal_Fini`), before it tears the
modules down; `absorb_late_signal` now has them ignored from its atexit callback on.

The signal is sent from a module global's finalizer, that is in the modules' teardown:
certain, not a race with a sleep."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_signal_while_the_interpreter_finalizes_keeps_the_exit_code(sig: str) -> None:
    code = textwrap.dedent(f'''
        import os, signal, sys
        from epochgc.impl.gc.stop import absorb_late_signal
        absorb_late_signal(3, lambda line: print(line, file=sys.stderr, flush=True))

        class LateAtFinalization:
            def __del__(self) -> None:
                os.kill(os.getpid(), signal.{sig})

        held = LateAtFinalization()
        sys.exit(3)  # the record's exit code
    ''')
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 3, (r.returncode, r.stderr)


def test_a_signal_in_the_atexit_callbacks_is_still_said() -> None:
    """Before the ignoring callback runs (atexit: the last registered runs first), the late
    handler still says it."""
    code = textwrap.dedent('''
        import atexit, os, signal, sys
        from epochgc.impl.gc.stop import absorb_late_signal
        absorb_late_signal(0, lambda line: print(line, file=sys.stderr, flush=True))
        atexit.register(lambda: (os.kill(os.getpid(), signal.SIGINT), None))
    ''')
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stderr.splitlines() == [
        "gc: SIGINT after the round ended: its record stands, exit code 0"], r.stderr
