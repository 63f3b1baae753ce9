"""newuser9 K2: a master that gives the round no executor (a standalone master with no
worker, or none with enough free cores and memory) made the round wait for ever with only
"0/20 tasks done" every 10 s. The watch's clock is injected (the progress display's), so
nothing here sleeps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from epochgc.impl.gc.executors import AFTER_ENV, ExecutorWait, executor_count, watched
from epochgc.impl.gc.progress import StageProgress
from epochgc.impl.ports import free_ports
from tests.interrupted import by_signal

ROOT = Path(__file__).resolve().parents[2]


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_line_comes_after_60_s_then_rarely_and_never_once_one_registered() -> None:
    clock, executors = _Clock(), [0]
    w = ExecutorWait("spark://m:7077", lambda: executors[0], clock)
    clock.now += 59.9
    assert w.poll() is None
    clock.now += 0.1
    line = w.poll()
    assert line is not None and line.startswith(
        "gc: no Spark executor has registered after 60 s on spark://m:7077: check"), line
    clock.now += 200
    assert w.poll() is None  # not every tick
    clock.now += 100
    again = w.poll()
    assert again is not None and "after 360 s" in again, again
    executors[0] = 1
    clock.now += 1000
    assert w.poll() is None
    executors[0] = 0  # lost later: a different problem, said by the job's own failure
    clock.now += 1000
    assert w.poll() is None


def test_a_local_master_is_not_watched() -> None:
    """Its tasks run in the driver: no executor ever registers, none is needed."""
    clock = _Clock()
    for master in ("local", "local[2]", "local[*]", "local[2,3]"):
        assert not watched(master)
        w = ExecutorWait(master, lambda: 0, clock)
        clock.now += 10_000
        assert w.poll() is None, master
    for master in ("local-cluster[1,1,1024]", "spark://h:7077", "yarn", "k8s://x"):
        assert watched(master), master


def test_the_stage_lines_say_it_from_the_same_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """StageProgress (the lines a log gets) writes the line on its tick, its clock the
    one it is given. Spark's own session here is local (not watched), so the master the
    watch is told is a standalone one's: what is checked is the stage's wiring."""
    from tests.spark_shared import live_session

    sc = live_session().sparkContext
    assert executor_count(sc) == 0  # local: only the driver's block manager
    clock, said = _Clock(), []
    p = StageProgress(sc, "gc: listing", said.append, clock=clock)
    with p:
        p._ticker.stop()  # ticks are driven by hand below
        p._wait = ExecutorWait("spark://m:7077", lambda: executor_count(sc), clock)
        p._tick()
        clock.now += 61
        p._tick()
    assert [s for s in said if "no Spark executor" in s] == [
        "gc: no Spark executor has registered after 61 s on spark://m:7077: check that the "
        "master has a worker with enough free cores and memory for an executor (the tasks "
        "wait until one registers; --spark-log shows Spark's own log)"], said


@pytest.mark.spark
@pytest.mark.skipif(os.environ.get("EPOCHGC_SPARK_STANDALONE") != "1",
                    reason="a standalone Spark master (tox -e signals sets "
                           "EPOCHGC_SPARK_STANDALONE=1)")
def test_a_standalone_master_with_no_worker_is_said(tmp_path: Path) -> None:
    """The tester's case on a real standalone master (Spark's own `deploy.master.Master`)
    with no worker: the round waited silently. With the watch's delay set short, the
    line must come (a state awaited, bounded), then SIGTERM ends the dry run, 143."""
    from pyspark.find_spark_home import _find_spark_home

    from epochgc.impl.store.local import LocalStore
    from tests.gc.helpers import NOW, simple_cluster

    simple_cluster(LocalStore(tmp_path / "s", create=True), 50)
    port = free_ports(1)[0]
    master = subprocess.Popen(
        [os.path.join(_find_spark_home(), "bin", "spark-class"),
         "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
         "--webui-port", str(free_ports(1)[0])], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{AFTER_ENV: "1"})
    err = tmp_path / "err"
    try:
        with open(err, "w") as err_f:
            gc = subprocess.Popen(
                [sys.executable, "-m", "epochgc", "gc", "--store", str(tmp_path / "s"),
                 "--now", str(NOW), "--i-know-now-is-ahead", "--dry-run",
                 "--master", f"spark://127.0.0.1:{port}"], cwd=tmp_path, env=env,
                stdout=subprocess.DEVNULL, stderr=err_f, start_new_session=True)
        try:
            limit = time.monotonic() + 300
            while "no Spark executor has registered" not in err.read_text():
                assert gc.poll() is None, err.read_text()[-3000:]
                # Old code: only "0/N tasks done" lines; bounded by them, not by a sleep.
                assert err.read_text().count("tasks done") < 4, err.read_text()[-3000:]
                assert time.monotonic() < limit, err.read_text()[-3000:]
                time.sleep(0.2)
            gc.send_signal(signal.SIGTERM)
            assert gc.wait(timeout=120) == by_signal(signal.SIGTERM), err.read_text()[-3000:]
        finally:
            if gc.poll() is None:
                os.killpg(gc.pid, signal.SIGKILL)
                gc.wait()
    finally:
        os.killpg(master.pid, signal.SIGTERM)
        master.wait(timeout=60)
