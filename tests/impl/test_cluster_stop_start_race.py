"""`cluster stop` and `cluster start` at once on one data directory (newuser25 H2/H3). Each
read cluster.json, started or stopped nodes, and wrote the file back, so one lost the
other's pids: a start during a stop said "cluster ready" and its node ran on after the stop
said it had stopped it (4 of 4 runs), and a stop during a start stopped only the nodes
recorded so far (3 of 5): in both, a node no `stop` or `kill` could see, holding its ports.
Now start, stop and kill hold DATA_DIR's lock (local.cluster_lock): a start refuses beside
another holder; a stop or kill waits for a start. Deterministic: the first command stops
itself (SIGSTOP, the signal hook) at a point inside the lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from epochgc.impl.cluster.local import LocalCluster, nodes_on
from epochgc.impl.proctree import _stat
from epochgc.impl.signals import HOOK_ENV

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))
BOUND_S = 300.0  # a hang, not a slow machine, fails the test


def _epochgc(*args: str, hook: str | None = None) -> subprocess.Popen[str]:
    env = ENV if hook is None else {**ENV, HOOK_ENV: hook}
    return subprocess.Popen([sys.executable, "-m", "epochgc", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "epochgc", *args], env=ENV, text=True,
                          capture_output=True, timeout=BOUND_S)


def _stopped_at_hook(p: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + BOUND_S
    while (st := _stat(p.pid)) is None or st[1] != "T":
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline, "never reached its hook"
        time.sleep(0.05)


def _clean_up(data: str, *procs: subprocess.Popen[str]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    for pid in nodes_on(data).values():  # what a failed run left (old code: an orphan)
        os.kill(pid, signal.SIGKILL)


def test_a_start_during_a_stop_refuses_and_the_stop_stops_everything(tmp_path: Path) -> None:
    data, store = str(tmp_path / "run"), str(tmp_path / "store")
    start = ["cluster", "start", "--data-dir", data, "--store", store, "--nodes", "2",
             "--partitions", "t/0"]
    assert _run(*start).returncode == 0
    stop = _epochgc("cluster", "stop", "--data-dir", data, hook="node-stopped:SIGSTOP")
    try:
        _stopped_at_hook(stop)  # node 1 stopped, node 2 not yet asked
        second = _run(*start)
        os.kill(stop.pid, signal.SIGCONT)
        out, err = stop.communicate(timeout=BOUND_S)
        left = nodes_on(data)
    finally:
        _clean_up(data, stop)
    # Old code: exit 0, "cluster ready", node 1 started again and then left unrecorded.
    assert second.returncode == 1, second.stdout + second.stderr
    [line] = second.stderr.splitlines()
    assert f"`epochgc cluster stop` (pid {stop.pid}) is running on" in line, line
    assert "node 1: pid" not in second.stdout, second.stdout
    assert stop.returncode == 0 and out == "stopped node(s) 1, 2\n", out + err
    assert left == {} and LocalCluster(data).meta["pids"] == {}, left


def test_a_stop_during_a_start_waits_and_stops_what_it_started(tmp_path: Path) -> None:
    data, store = str(tmp_path / "run"), str(tmp_path / "store")
    start = _epochgc("cluster", "start", "--data-dir", data, "--store", store, "--nodes", "2",
                     "--partitions", "t/0", hook="nodes-up:SIGSTOP")
    stop: subprocess.Popen[str] | None = None
    try:
        _stopped_at_hook(start)  # its nodes started, not yet ready
        stop = _epochgc("cluster", "stop", "--data-dir", data)
        assert stop.stderr is not None
        said = stop.stderr.readline()  # the stop waits, and says so, while the start holds
        os.kill(start.pid, signal.SIGCONT)
        start_out, start_err = start.communicate(timeout=BOUND_S)
        out, err = stop.communicate(timeout=BOUND_S)
        left = nodes_on(data)
    finally:
        _clean_up(data, start, *([stop] if stop else []))
    # Old code: no wait; it stopped the nodes under the frozen start (its children, unreaped:
    # each waited out the grace and was "killed"), and the start then failed.
    assert said == (f"waiting for `epochgc cluster start` (pid {start.pid}) on "
                    f"{Path(data).absolute()} to finish\n"), said + err
    assert start.returncode == 0 and "cluster ready" in start_out, start_err
    assert stop.returncode == 0 and out == "stopped node(s) 1, 2\n", out + err
    assert left == {} and LocalCluster(data).meta["pids"] == {}, left


def test_a_signal_while_a_stop_waits_for_the_lock_ends_it_having_asked_nothing(
        tmp_path: Path) -> None:
    """The wait is a signal's to end, as any of the command's waits (impl/signals.py)."""
    from epochgc.impl.cluster.local import cluster_lock
    from tests.impl.test_cluster_restart import made_cluster
    from tests.interrupted import by_signal, reaped

    lc = made_cluster(tmp_path, 1, ["t/0"])
    with cluster_lock(lc.dir, "start"):
        stop = _epochgc("cluster", "stop", "--data-dir", str(lc.dir))
        assert stop.stderr is not None
        with reaped(stop):
            said = stop.stderr.readline()
            stop.send_signal(signal.SIGINT)
            _, err = stop.communicate(timeout=BOUND_S)
    assert said == (f"waiting for `epochgc cluster start` (pid {os.getpid()}) on {lc.dir} "
                    "to finish\n"), said
    assert stop.returncode == by_signal(signal.SIGINT), err
    assert err.splitlines()[-1] == ("epochgc cluster stop: interrupted by SIGINT: no node was "
                                    "stopped (none was asked)"), err
