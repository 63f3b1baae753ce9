"""`epochgc cluster start` on an existing cluster whose recorded port another program took,
and the start lock every exit path removes (issue 41, newuser41 items 14 and 15). Real
node processes on loopback; a port is "taken" by a listening socket of this test."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.cluster.local import (
    LOCK_NAME,
    LocalCluster,
    PortTaken,
    StartRunning,
    cluster_lock,
)
from epochgc.impl.exitcodes import ExitCode


def made_cluster(tmp_path: Path, nodes: int, partitions: list[str]) -> LocalCluster:
    """A cluster directory as `cluster start` then `cluster stop` leave it: no node runs."""
    store = tmp_path / "store"
    store.mkdir()
    lc = LocalCluster(tmp_path / "c")
    lc.init(nodes, str(store), partitions, 1.0, [])
    lc.meta["s3_endpoint"] = None
    lc.save()
    return lc


@contextlib.contextmanager
def holding(port: int) -> Iterator[None]:
    """Another program's listener on `port` (no SO_REUSEADDR, listening: no one else binds)."""
    s = socket.socket()
    s.bind(("127.0.0.1", port))
    s.listen()
    try:
        yield
    finally:
        s.close()


def stop_recorded(data: Path) -> None:
    """Whatever a failed test left recorded is stopped (old code left nodes running)."""
    for pid in LocalCluster(data).meta.get("pids", {}).values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)


def test_a_taken_recorded_port_is_named_and_no_node_is_left_running(tmp_path: Path) -> None:
    """Old code: `Error: RuntimeError: node 2 failed to start: 'OSError: [Errno 98] Address
    already in use'`, exit 1, node 1 left running (recorded in cluster.json)."""
    lc = made_cluster(tmp_path, 3, ["t/0"])
    port = int(lc.meta["metrics"]["2"])
    try:
        with holding(port):
            r = CliRunner().invoke(main, ["cluster", "start", "--data-dir", str(lc.dir),
                                          "--store", lc.meta["store"]])
        assert r.exit_code == ExitCode.FAILED, r.output
        line = r.output.strip()
        assert "\n" not in line, line
        assert f"node 2's metrics port {port}" in line, line
        assert "cluster.json" in line and "--new-ports" in line and "Free it" in line, line
        after = LocalCluster(lc.dir).meta["pids"]
        assert after == {}, f"node(s) left running: {after}"
        assert not (lc.dir / LOCK_NAME).exists()
    finally:
        stop_recorded(lc.dir)


@pytest.mark.parametrize("listener", ["raft", "client", "metrics"])
def test_a_node_names_the_listener_it_could_not_bind(tmp_path: Path, listener: str) -> None:
    """A port taken after the check looked (a race): the node itself says which listener,
    instead of `node 1 failed to start: 'OSError: [Errno 98] ...'` from its log."""
    lc = made_cluster(tmp_path, 1, ["t/0"])
    port = int(lc.meta[listener]["1"])
    try:
        with holding(port), pytest.raises(PortTaken) as got:
            lc.start(1)
        assert (got.value.node, got.value.listener, got.value.port) == (1, listener, port)
        assert "in use" in got.value.why
    finally:
        stop_recorded(lc.dir)


def test_new_ports_moves_a_stopped_cluster_off_a_taken_port(tmp_path: Path) -> None:
    """The way on the refusal names: the same cluster (its Raft data kept) on new ports."""
    lc = made_cluster(tmp_path, 1, ["t/0"])
    old = int(lc.meta["client"]["1"])
    args = ["cluster", "start", "--data-dir", str(lc.dir), "--store", lc.meta["store"]]
    try:
        with holding(old):
            r = CliRunner().invoke(main, [*args, "--new-ports"])
            assert r.exit_code == 0, r.output
        now = LocalCluster(lc.dir)
        assert int(now.meta["client"]["1"]) != old and now.running() == [1]
        # While a node runs, --new-ports would strand it: refused, nothing changed.
        r = CliRunner().invoke(main, [*args, "--new-ports"])
        assert r.exit_code == ExitCode.USAGE and "node 1" in r.output, r.output
        assert LocalCluster(lc.dir).meta["client"] == now.meta["client"]
        assert not (lc.dir / LOCK_NAME).exists()  # removed after a start that succeeded
    finally:
        CliRunner().invoke(main, ["cluster", "stop", "--data-dir", str(lc.dir)])
        stop_recorded(lc.dir)


def test_a_refused_start_removes_its_lock(tmp_path: Path) -> None:
    """Old code: DATA_DIR's lock file (start.lock then) stayed after any refusal inside the
    lock (a bucket that does not exist, no credentials, an unwritable --trace: the same
    exit path)."""
    data = tmp_path / "run"
    r = CliRunner().invoke(main, ["cluster", "start", "--data-dir", str(data),
                                  "--store", str(tmp_path / "store"),
                                  "--trace", "/proc/no-such-dir/trace.ndjson"])
    assert r.exit_code == ExitCode.USAGE and "--trace" in r.output, r.output
    # The lock went, and with it the data directory the refused start had made (newuser11
    # M3: a refused start removes the empty directories it created).
    assert not data.exists()


def test_a_start_refused_by_the_lock_never_removes_the_holders(tmp_path: Path) -> None:
    data = tmp_path / "run"
    with cluster_lock(data):
        lock = data / LOCK_NAME
        ino = lock.stat().st_ino
        r = CliRunner().invoke(main, ["cluster", "start", "--data-dir", str(data),
                                      "--store", str(tmp_path / "store")])
        assert r.exit_code == ExitCode.FAILED and "another `epochgc cluster start`" in r.output
        assert lock.stat().st_ino == ino and lock.read_text() == f"{os.getpid()} start\n"
    assert not lock.exists()


def test_a_lock_removed_under_a_waiting_opener_is_taken_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lock-file race: a start that opened the name just before its holder removed it
    locks a file no one else can see; it must take the name again, not run beside a
    third start that creates a new file."""
    data = tmp_path / "run"
    data.mkdir()
    real_open = os.open
    raced: list[int] = []

    def open_then_holder_removes(path: str | os.PathLike[str], *a: int) -> int:
        fd = real_open(path, *a)
        if not raced and Path(path).name == LOCK_NAME:
            raced.append(fd)
            os.unlink(path)  # the holder's exit, between our open(2) and flock(2)
        return fd

    monkeypatch.setattr(os, "open", open_then_holder_removes)
    with cluster_lock(data):
        monkeypatch.setattr(os, "open", real_open)
        assert raced and (data / LOCK_NAME).exists()
        with pytest.raises(StartRunning), cluster_lock(data):
            pytest.fail("a second start ran beside the first")
    assert not (data / LOCK_NAME).exists()
