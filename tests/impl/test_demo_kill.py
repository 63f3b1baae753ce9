"""Issue 41, newuser4 F2: `epochgc demo` on Ctrl-C while its final round waits for Spark's
start-up, and what a `kill -9` of a command leaves running.

- F2a: a group SIGINT while the demo waits for a Spark start-up whose JVM is launched but
  has not answered (PySpark's `launch_gateway` waiting for its connection file) hung the
  demo for good, before it stopped its brokers. The start-up is held there by Spark's own
  `SPARK_CONF_DIR/spark-env.sh` (sourced by spark-submit before it starts the JVM: Spark's
  bin/load-spark-env.sh), which waits for a file that never comes; the test signals once
  the demo says it is waiting. No sleeping and hoping: the hold is a state, not a delay.
- F2b: a SIGKILL of the demo's process group left its 3 brokers (each in its own session)
  running for minutes. The SIGKILL comes at the demo's `work` point (brokers serving), and
  every process the demo started must exit by itself: the brokers at EOF of their owner
  pipe (impl/cluster/node_main.py `watch_owner`). The same for `cluster start` killed
  before it hands its nodes over, while a start that completed leaves them running (its
  documented behaviour), and for `gc`'s Spark JVM when the driver is SIGKILLed while the
  JVM is still starting (PySpark's gateway ends at EOF on its stdin).

Every process a command starts inherits a tag in its environment; "nothing left" means no
live process carries it. Waits are bounded by `LIVENESS_S`, a bound for a hang, not a timing
assumption.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from epochgc.impl.proctree import alive
from epochgc.impl.signals import HOOK_ENV
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import NOW, simple_cluster
from tests.interrupted import by_signal

ROOT = Path(__file__).resolve().parents[2]
LIVENESS_S = 120.0
TAG_ENV = "EPOCHGC_DEMO_KILL_TEST_TAG"


def _tagged(tag: str) -> list[str]:
    """Live processes started with the tag, as `pid cmdline` lines."""
    mark = f"{TAG_ENV}={tag}".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            tagged = mark in (entry / "environ").read_bytes().split(b"\0")
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ")[:160].decode()
        except OSError:  # gone, or not ours
            continue
        if tagged and alive(int(entry.name)):
            found.append(f"{entry.name} {cmd}")
    return found


def _left_after(tag: str) -> list[str]:
    """The tagged processes still alive once they had `LIVENESS_S` to exit (polled)."""
    limit = time.monotonic() + LIVENESS_S
    while (left := _tagged(tag)) and time.monotonic() < limit:
        time.sleep(0.1)
    return left


def _kill_tagged(tag: str) -> None:
    for line in _tagged(tag):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line.split()[0]), signal.SIGKILL)


class Cmd:
    """`epochgc ARGS` in its own session, TMPDIR an empty directory of the test's, output
    to files (a pipe's end would also wait for whatever the command left holding it)."""

    def __init__(self, tmp: Path, args: list[str], **env: str) -> None:
        self.tag = uuid.uuid4().hex
        self.scratch = tmp / "tmp"
        self.scratch.mkdir()
        self.err_path = tmp / "err"
        full = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(self.scratch),
                    SPARK_LOCAL_DIRS=str(self.scratch), **{TAG_ENV: self.tag}, **env)
        with open(tmp / "out", "w") as out_f, open(self.err_path, "w") as err_f:
            self.proc = subprocess.Popen([sys.executable, "-m", "epochgc", *args], cwd=tmp,
                                         env=full, stdout=out_f, stderr=err_f,
                                         start_new_session=True)

    def err(self) -> str:
        return self.err_path.read_text()

    def wait_for(self, text: str) -> None:
        limit = time.monotonic() + 600
        while text not in self.err():
            assert self.proc.poll() is None, f"exited before {text!r}:\n{self.err()[-3000:]}"
            assert time.monotonic() < limit, f"never said {text!r}:\n{self.err()[-3000:]}"
            time.sleep(0.05)

    def wait(self) -> int | None:
        """The exit code, or None if it did not exit within LIVENESS_S (then killed)."""
        try:
            return self.proc.wait(timeout=LIVENESS_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            return None

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        _kill_tagged(self.tag)  # what a failed run left: not left to the next test


@pytest.mark.spark
def test_a_ctrl_c_while_the_demo_waits_for_sparks_start_up_ends_it(tmp_path: Path) -> None:
    conf = tmp_path / "spark-conf"
    conf.mkdir()
    # Sourced by spark-submit before it starts the JVM: the JVM's launcher runs, PySpark's
    # launch_gateway waits for its connection file, and the demo's final round for it.
    (conf / "spark-env.sh").write_text(
        f'while [ ! -e "{tmp_path}/never" ]; do sleep 0.05; done\n')
    cmd = Cmd(tmp_path, ["demo", "--seconds", "5", "--gc-engine", "spark"],
              SPARK_CONF_DIR=str(conf))
    try:
        cmd.wait_for("waiting for Spark to finish starting")
        os.killpg(cmd.proc.pid, signal.SIGINT)  # a terminal's Ctrl-C
        code = cmd.wait()
        err = cmd.err()
        assert code is not None, f"the demo hung after the SIGINT:\n{err[-3000:]}"
        assert code == by_signal(signal.SIGINT), err[-3000:]
        # 3, or 2 while the chaos step's SIGKILLed node is down (the pause step may wait
        # for Spark then: newuser13 Q10); none is left either way (below).
        assert re.search(r"interrupted by SIGINT: stopped [23] broker process\(es\), the "
                         "Spark session", err), err[-3000:]
        assert "Traceback" not in err, err
        assert _left_after(cmd.tag) == []
        assert sorted(p.name for p in cmd.scratch.iterdir()) == []  # its temp dirs removed
    finally:
        cmd.close()


def _demo_pids(scratch: Path) -> list[int]:
    [meta] = scratch.glob("epochgc-demo-*/cluster/cluster.json")
    return [int(p) for p in json.loads(meta.read_text())["pids"].values()]


def test_a_kill_9_of_the_demos_group_leaves_no_broker_running(tmp_path: Path) -> None:
    cmd = Cmd(tmp_path, ["demo", "--seconds", "60", "--gc-engine", "model"],
              **{HOOK_ENV: "work:SIGKILL:group"})
    try:
        code = cmd.wait()
        assert code == -signal.SIGKILL, cmd.err()[-3000:]
        brokers = _demo_pids(cmd.scratch)
        assert len(brokers) == 3
        left = _left_after(cmd.tag)
        assert left == [], f"left running after kill -9 of the demo: {left}"
    finally:
        cmd.close()


def test_a_kill_9_of_cluster_start_before_ready_leaves_no_node(tmp_path: Path) -> None:
    data = tmp_path / "c"
    cmd = Cmd(tmp_path, ["cluster", "start", "--data-dir", str(data), "--store",
                         str(tmp_path / "store")], **{HOOK_ENV: "nodes-up:SIGKILL"})
    try:
        assert cmd.wait() == -signal.SIGKILL, cmd.err()[-3000:]
        nodes = json.loads((data / "cluster.json").read_text())["pids"]
        assert len(nodes) == 3  # all started, none handed over
        left = _left_after(cmd.tag)
        assert left == [], f"left running after kill -9 of cluster start: {left}"
    finally:
        cmd.close()


def test_a_cluster_start_that_completed_leaves_its_nodes_running(tmp_path: Path) -> None:
    """The boundary: `cluster start` returns once ready and its nodes run on (the README's
    "Running it") until `cluster stop`: the owner pipe's EOF must not stop handed-over
    nodes."""
    data = tmp_path / "c"
    cmd = Cmd(tmp_path, ["cluster", "start", "--data-dir", str(data), "--store",
                         str(tmp_path / "store")])
    try:
        assert cmd.wait() == 0, cmd.err()[-3000:]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        produce = subprocess.run([sys.executable, "-m", "epochgc", "produce", "--data-dir",
                                  str(data), "--partition", "t/0", "--count", "10"], env=env,
                                 capture_output=True, text=True, timeout=LIVENESS_S)
        assert produce.returncode == 0, produce.stdout + produce.stderr
        assert len(_tagged(cmd.tag)) == 3
        stop = subprocess.run([sys.executable, "-m", "epochgc", "cluster", "stop",
                               "--data-dir", str(data)], env=env, capture_output=True,
                              text=True, timeout=LIVENESS_S)
        assert stop.returncode == 0, stop.stderr
        assert _left_after(cmd.tag) == []
    finally:
        cmd.close()


@pytest.mark.spark
def test_a_kill_9_of_gc_while_its_jvm_starts_leaves_no_jvm(tmp_path: Path) -> None:
    """`gc`'s JVM runs in its own session (impl/gc/session.py): a SIGKILL of the driver
    reaches only the driver. The JVM must end by itself (EOF on its stdin, the dead driver's
    pipe: PySpark's PythonGatewayServer), even while it is still starting."""
    store = tmp_path / "store"
    simple_cluster(LocalStore(store, create=True), 10)
    cmd = Cmd(tmp_path, ["gc", "--store", str(store), "--now", str(NOW),
                         "--i-know-now-is-ahead", "--master", "local[1]", "-q"],
              **{HOOK_ENV: "spark-launch:SIGKILL"})
    try:
        assert cmd.wait() == -signal.SIGKILL, cmd.err()[-3000:]
        left = _left_after(cmd.tag)
        assert left == [], f"left running after kill -9 of gc: {left}"
    finally:
        cmd.close()


SHUTS_DOWN_SLOWLY = """
import pathlib, signal, sys, time
def down(*_):
    time.sleep(0.5)
    sys.exit(7)
signal.signal(signal.SIGTERM, down)
pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "ready").touch()
time.sleep(600)
"""


def _wait_file(path: Path, proc: subprocess.Popen[bytes]) -> None:
    limit = time.monotonic() + LIVENESS_S
    while not path.exists():
        assert proc.poll() is None and time.monotonic() < limit
        time.sleep(0.02)


def test_stopping_a_child_leaves_its_exit_status_to_its_popen(tmp_path: Path) -> None:
    """The cause of F2a: `proctree.stop` reaped the JVM launcher, a child whose `Popen` is
    PySpark's; `Popen.poll` then got ECHILD and said 0 ("still running" to launch_gateway's
    `while not proc.poll()`). The stopped child's status must stay its Popen's to read."""
    from epochgc.impl.proctree import stop

    # Like a JVM, it takes a while to shut down after SIGTERM (its hooks run), then exits
    # with a status of its own: stop's polling sees it exit.
    child = subprocess.Popen([sys.executable, "-c", SHUTS_DOWN_SLOWLY,
                              str(tmp_path / "ready")])
    try:
        _wait_file(tmp_path / "ready", child)
        stop([child.pid])
        assert child.wait(timeout=LIVENESS_S) == 7  # not 0: ECHILD, its status taken
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
