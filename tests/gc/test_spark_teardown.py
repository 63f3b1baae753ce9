"""newuser41 item 8: Ctrl-C to the process group during `chaos` (a Spark GC round under
way) printed ~27 lines of Spark's own `ERROR TaskContextImpl ... [INTERNAL_ERROR_STORAGE]
Block broadcast_0 does not exist` and `ERROR Executor ... Python worker exited
unexpectedly (crashed)` with Java stack frames, and SIGTERM at Spark start-up printed
`RuntimeWarning: Unable to cleanly shutdown Spark JVM process`: the teardown of tasks
that a command stopping on a signal abandons. `stop_spark(on_signal=True)` (the path
`gc`, `demo` and `chaos` take once a signal came) turns the JVM's log off first and hides
the warning. A real local Spark session, in a process of its own (its JVM is stopped)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.spark
def test_stopping_spark_on_a_signal_prints_no_spark_errors(tmp_path: Path) -> None:
    """Old code (`stop_spark()`, the only way then): `26/11/29 14:59:46 ERROR
    TaskContextImpl: Error in TaskCompletionListener` / `org.apache.spark.SparkException:
    [INTERNAL_ERROR_STORAGE] Block broadcast_0 does not exist` and 26 more lines."""
    p = subprocess.run([sys.executable, "-m", "tests.gc.teardown_probe", str(tmp_path)],
                       capture_output=True, text=True, timeout=900, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert p.returncode == 0, p.stderr[-3000:]
    lines = p.stderr.splitlines()
    assert "probe: stopping" in lines and "probe: stopped" in lines, p.stderr[-3000:]
    after = lines[lines.index("probe: stopping"):]
    noise = [ln for ln in after
             if re.search(r"\bERROR\b|Exception|^\s+at [\w.$]+\(|Traceback|RuntimeWarning",
                          ln)]
    assert noise == [], "\n".join(noise[:20])
