"""Issue 41, newuser5 G4: after a finished round, `ERROR:root:Exception while sending
command.` and a py4j traceback (`ConnectionResetError` ... `Py4JNetworkError: Error while
sending or receiving`) at Spark's shutdown, about one round in twenty: py4j's finalizer
thread sent a release while the JVM exited. `stop_spark` now ends py4j's calls before the
JVM is told to exit (`session.end_py4j_calls`). The race is made deterministic by
`tests/gc/py4j_race_probe.py`. A real local Spark session, in a process of its own (its
JVM is stopped and killed)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.spark
def test_no_py4j_call_races_the_jvm_exit_at_spark_stop() -> None:
    """Old code: `ERROR:root:Exception while sending command.` / `Traceback (most recent
    call last):` ... `ConnectionResetError: [Errno 104] Connection reset by peer` ...
    `py4j.protocol.Py4JNetworkError: Error while sending or receiving`."""
    p = subprocess.run([sys.executable, "-m", "tests.gc.py4j_race_probe"],
                       capture_output=True, text=True, timeout=900, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert p.returncode == 0, p.stderr[-3000:]
    lines = p.stderr.splitlines()
    assert "probe: stopping" in lines and "probe: stopped" in lines, p.stderr[-3000:]
    assert "probe: the JVM is told to exit" in lines, p.stderr[-3000:]  # the race was made
    after = lines[lines.index("probe: stopping"):]
    noise = [ln for ln in after
             if re.search(r"ERROR|Exception|Traceback|Py4J|Error", ln)]
    assert noise == [], "\n".join(noise[:25])
