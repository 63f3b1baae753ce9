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
from collections.abc import Callable
from pathlib import Path

import pytest

from epochgc.impl.cluster.local import LocalCluster, nodes_on
from epochgc.impl.proctree import _stat
from epochgc.impl.signals import HOOK_ENV
from tests.interrupted import reaped

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


def _state(pid: int) -> str | None:
    st = _stat(pid)
    return None if st is None else st[1]


def _until(done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + BOUND_S
    while not done():
        assert time.monotonic() < deadline
        time.sleep(0.01)


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
    # newuser26 J1: a holder stopped (here by the hook's SIGSTOP) is named as such.
    assert said == (f"waiting for `epochgc cluster start` (pid {start.pid}) on "
                    f"{Path(data).absolute()} to finish; its process is stopped (Ctrl-Z or "
                    f"SIGSTOP): `kill -CONT {start.pid}` resumes it\n"), said + err
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


def test_the_wait_is_said_again_while_it_lasts(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    """newuser26 J1: the wait was said once, then nothing for as long as it lasted (35 s
    behind a start stopped by Ctrl-Z). The holder here is another process, stopped, then
    continued and killed at the third line; the lines' period is cut to 0.2 s."""
    from epochgc.impl.cluster import local

    monkeypatch.setattr(local, "LOCK_SAY_EVERY_S", 0.2)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(tmp_path / local.LOCK_NAME)!r}, os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "os.write(fd, f'{os.getpid()} start\\n'.encode())\n"
        "print('held', flush=True)\n"
        "time.sleep(600)\n")], stdout=subprocess.PIPE, text=True)
    calls: list[tuple[str, float, bool]] = []

    def waiting(h: local.Holder, waited_s: float, stopped: bool) -> None:
        calls.append((h.who(), waited_s, stopped))
        if len(calls) == 1:
            os.kill(holder.pid, signal.SIGSTOP)
            _until(lambda: _state(holder.pid) == "T")  # stopped before the next line
        elif len(calls) == 2:
            os.kill(holder.pid, signal.SIGCONT)
            _until(lambda: _state(holder.pid) != "T")
        else:
            holder.kill()  # the lock goes with it

    with reaped(holder):
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with local.cluster_lock(tmp_path, "stop", waiting=waiting):
            pass
    assert [c[0] for c in calls] == [f"`epochgc cluster start` (pid {holder.pid})"] * 3
    assert calls[0][1] < calls[1][1] - 0.15 and calls[1][1] < calls[2][1] - 0.15, calls
    assert [c[2] for c in calls] == [False, True, False], calls


def test_status_names_a_command_holding_the_lock(tmp_path: Path) -> None:
    """newuser26 J2: beside a start or a stop, `cluster status` said "node N: unreachable"
    alone. The holder is found without taking the lock (/proc/locks): a status must never
    make a start refuse."""
    import json

    from click.testing import CliRunner

    from epochgc.impl.cli import main
    from epochgc.impl.cluster.local import Holder, cluster_lock, lock_holder
    from tests.impl.test_cluster_restart import made_cluster

    lc = made_cluster(tmp_path, 1, ["t/0"])
    said = (f"`epochgc cluster stop` (pid {os.getpid()}) is running on {lc.dir}: its nodes "
            "may be starting or stopping")
    args = ["cluster", "status", "--data-dir", str(lc.dir)]
    with cluster_lock(lc.dir, "stop"):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 1 and said in r.output.splitlines(), r.output
        r = CliRunner().invoke(main, [*args, "--json"])
        assert json.loads(r.stdout)["changing"] == {"command": "stop",
                                                    "pid": str(os.getpid())}, r.output
        # Each directory's own lock (/proc/locks lists both, by inode).
        assert lock_holder(tmp_path / "other") is None
        with cluster_lock(tmp_path / "other", "start"):
            assert lock_holder(tmp_path / "other") == Holder(
                str(os.getpid()), "start")
    assert lock_holder(lc.dir) is None
    r = CliRunner().invoke(main, args)
    assert "is running on" not in r.output, r.output
