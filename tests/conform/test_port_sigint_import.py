"""SIGINT while the model port (`python -m epochgc.model.port`) still imports its modules
(newuser6 H2: a terminal's Ctrl-C 1 s into the tour's `conform` printed a 17-line
KeyboardInterrupt traceback from the port). The signal is sent from an import hook at the
moment `epochgc.model.replay` is imported: deterministic, no timing."""

from __future__ import annotations

import signal
import subprocess
import sys

_RUN = """
import os, runpy, signal, sys

class _SigintAtReplay:
    def find_spec(self, name, path=None, target=None):
        if name == "epochgc.model.replay":
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, _SigintAtReplay())
runpy.run_module("epochgc.model.port", run_name="__main__", alter_sys=True)
"""


def test_sigint_while_the_port_imports_prints_no_traceback() -> None:
    r = subprocess.run([sys.executable, "-c", _RUN], input="", capture_output=True,
                       text=True, timeout=120)
    assert "Traceback" not in r.stderr and "KeyboardInterrupt" not in r.stderr, r.stderr
    assert r.returncode == -signal.SIGINT, (r.returncode, r.stderr)
