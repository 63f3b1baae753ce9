"""newuser20 W2 (issue 41): a signal right after conform's verdict line said "... the port was
stopped; no verdict" and the run ended by the signal, while the verdict stood on stdout: the
line was said before the port's end, and the run's end (`signals.finishing`) began only
after it. The verdict is now decided and said after the port ended, under `finishing`.

Deterministic: the port itself sends SIGINT to conform once its stdin closes (conform's
`finish` of it), as it exits: the signal lands while conform waits for the port to end,
which on the old code was after the verdict line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT_S = 120.0  # a bound for a hang, not a timing assumption

PORT = """
import os, signal
from epochgc.model.port import main as serve
serve()  # until conform closes its stdin
os.kill(os.getppid(), signal.SIGINT)
"""


def test_a_signal_as_the_port_ends_never_follows_a_verdict_with_no_verdict(
        tmp_path: Path) -> None:
    port = tmp_path / "port.py"
    port.write_text(PORT)
    proc = subprocess.run(
        [sys.executable, "-m", "epochgc", "conform", "--vectors", "--", sys.executable,
         str(port)], capture_output=True, text=True, timeout=LIMIT_S, check=False,
        env=dict(os.environ, PYTHONPATH=str(ROOT)))
    said_verdict = proc.stdout.startswith("vectors: ")
    # Old code: the verdict on stdout, then "...; no verdict" and an end by SIGINT.
    if said_verdict:
        assert proc.returncode == 0 and "no verdict" not in proc.stderr, (proc.stdout,
                                                                            proc.stderr)
    else:
        assert proc.returncode == -2 and "no verdict" in proc.stderr, (proc.stdout,
                                                                         proc.stderr)
