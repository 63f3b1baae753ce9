"""The signal matrix's race, pinned (seen once under load: `[gc-spark-launch-SIGINT-process]`
left `spark-class` and the launcher JVM running). PySpark starts `spark-submit`, which
execs `spark-class` (bash) in its own session (`session._start_quiet_jvm`); spark-class
forks a subshell that runs the launcher JVM (`org.apache.spark.launcher.Main`) and then
execs the driver JVM. A round stopped during that start-up lists the marked processes
(`session.stop_starting_jvm`) and stops them; a subshell and launcher forked after the
listing were in no list, and outlived the command.

Held deterministically with Spark's own per-installation hook, `spark-env.sh` (sourced by
spark-class through `load-spark-env.sh`, from `SPARK_CONF_DIR`): spark-class waits in it,
its session already made and nothing forked yet, until SIGTERM, the first signal the
command's stop sends it after its listing. Then it goes on: it forks the subshell and the
launcher JVM, which `-agentlib:jdwp=...,suspend=y` (HotSpot's JDWP agent: the JVM waits
for a debugger before its main class runs) keeps running, as a launcher caught mid-start.
The command signals spark-class again (SIGKILL) after its stop's grace; what it forked is
in its process group. The test signals the command once spark-class is held (a state,
not a delay)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.gc.helpers import NOW
from tests.impl.test_signal_matrix import LIVENESS_S, ROOT, TAG_ENV, _gc_store, _tagged
from tests.interrupted import by_signal

# Sourced by spark-class (bash, `set -a`): held until its first SIGTERM, then the
# launcher JVM it forks waits for a debugger that never comes.
SPARK_ENV = """\
released=
trap 'released=1' TERM
echo $$ > "$EPOCHGC_HOLD_DIR/held.tmp" && mv "$EPOCHGC_HOLD_DIR/held.tmp" "$EPOCHGC_HOLD_DIR/held"
while [ -z "$released" ]; do sleep 0.05; done
trap - TERM
: > "$EPOCHGC_HOLD_DIR/released"
SPARK_LAUNCHER_OPTS="-agentlib:jdwp=transport=dt_socket,server=y,suspend=y,address=127.0.0.1:0"
"""


@pytest.mark.spark
def test_a_launcher_forked_after_the_stops_listing_is_stopped(tmp_path: Path) -> None:
    """Old code (648f116^): `processes left running: ['... bash .../spark-class
    org.apache.spark.deploy.SparkSubmit ...', '... java -Xmx128m -agentlib:jdwp=...
    org.apache.spark.launcher.Main ...']`."""
    _gc_store(tmp_path / "store")
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-env.sh").write_text(SPARK_ENV)
    hold = tmp_path / "hold"
    hold.mkdir()
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    tag = uuid.uuid4().hex
    env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(scratch),
               SPARK_LOCAL_DIRS=str(scratch), SPARK_CONF_DIR=str(conf),
               EPOCHGC_HOLD_DIR=str(hold), **{TAG_ENV: tag})
    with open(tmp_path / "out", "w") as out_f, open(tmp_path / "err", "w") as err_f:
        proc = subprocess.Popen(
            [sys.executable, "-m", "epochgc", "gc", "--store", str(tmp_path / "store"),
             "--now", str(NOW), "--i-know-now-is-ahead", "--tasks", "1", "--json", "-q"],
            cwd=tmp_path, env=env, stdout=out_f, stderr=err_f, start_new_session=True)
    group = None
    try:
        limit = time.monotonic() + 600
        while not (hold / "held").exists():
            assert proc.poll() is None, (tmp_path / "err").read_text()[-3000:]
            assert time.monotonic() < limit, "spark-class never reached spark-env.sh"
            time.sleep(0.05)  # polls for a state, which the signal then follows
        group = int((hold / "held").read_text())
        assert os.getpgid(group) == group  # spark-class leads its own session's group
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=LIVENESS_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    left = _tagged(tag)  # at once: what it started must be gone when it has exited
    for line in left:
        os.kill(int(line.split()[0]), signal.SIGKILL)
    err = (tmp_path / "err").read_text()
    assert proc.returncode == by_signal(signal.SIGINT), err[-3000:]
    # The scenario happened: spark-class went on past its hold after the stop's SIGTERM
    # (and so forked the launcher after the stop's listing).
    assert (hold / "released").exists(), err[-3000:]
    assert left == [], f"processes left running: {left}"
