"""A local multi-process cluster on loopback under one data directory: `cluster.json` holds
ports and pids, `n<id>/` each node's Raft data, `n<id>.log` its JSON logs."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from epochgc import IMPORT_ROOT
from epochgc.impl.cluster.errors import NoCluster
from epochgc.impl.raft.proc_cluster import free_ports

LOCK_NAME = "start.lock"


class StartRunning(RuntimeError):
    """Another `cluster start` holds the data directory's start lock."""


@contextlib.contextmanager
def start_lock(data_dir: str | os.PathLike[str]) -> Iterator[None]:
    """Hold DATA_DIR/start.lock (flock(2), exclusive, not waited for) while a start runs:
    two starts on a new directory both chose ports and started nodes on them, and the
    loser died on `OSError: [Errno 98] address already in use` (issue 41 item 12). The
    kernel drops the lock when the process ends, however it ends."""
    d = Path(data_dir).absolute()
    d.mkdir(parents=True, exist_ok=True)
    fd = os.open(d / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise StartRunning(
                f"another `epochgc cluster start` is running on {d} (pid {holder}); wait for "
                "it to finish, then `epochgc cluster status --data-dir` shows the cluster"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


class LocalCluster:
    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.dir = Path(data_dir).absolute()
        self.meta_path = self.dir / "cluster.json"
        self.meta: dict[str, Any] = {}
        if self.meta_path.exists():
            self.meta = json.loads(self.meta_path.read_text())

    def init(self, n: int, store: str, partitions: list[str], mint_interval: float,
             extra: list[str] | None = None) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        ports = free_ports(3 * n)
        ids = list(range(1, n + 1))
        self.meta = {
            "ids": ids,
            "raft": {str(i): ports[i - 1] for i in ids},
            "client": {str(i): ports[n + i - 1] for i in ids},
            "metrics": {str(i): ports[2 * n + i - 1] for i in ids},
            "store": store,
            "partitions": partitions,
            "mint_interval": mint_interval,
            "extra": extra or [],
            "pids": {},
        }
        self.save()

    def save(self) -> None:
        # Whole or not at all (rename(2) is atomic): a reader running beside a start read
        # a half-written file (`JSONDecodeError`, issue 41 item 12).
        tmp = self.meta_path.with_name(f".{self.meta_path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(self.meta, indent=1))
        os.replace(tmp, self.meta_path)

    @property
    def ids(self) -> list[int]:
        if not self.meta:
            raise NoCluster(
                f"no cluster under {self.dir}: start one with `epochgc cluster start`")
        return [int(i) for i in self.meta["ids"]]

    def client_addrs(self) -> dict[int, tuple[str, int]]:
        return {i: ("127.0.0.1", int(self.meta["client"][str(i)])) for i in self.ids}

    def peer_addr(self, nid: int, peer: int) -> str:
        """The address `nid` dials for `peer` (epochgc chaos puts a proxy there)."""
        return f"127.0.0.1:{self.meta['raft'][str(peer)]}"

    def node_env(self, nid: int) -> dict[str, str]:
        """Extra environment for node `nid` (epochgc chaos: its fault file)."""
        return {}

    def start(self, nid: int, timeout: float = 30.0) -> int:
        peers = ",".join(
            f"{i}=127.0.0.1:{self.meta['raft'][str(i)]}" if i == nid
            else f"{i}={self.peer_addr(nid, i)}"
            for i in self.ids
        )
        cmd = [
            sys.executable, "-m", "epochgc.impl.cluster.node_main", "--id", str(nid),
            "--peers", peers,
            "--client-port", str(self.meta["client"][str(nid)]),
            "--metrics-port", str(self.meta["metrics"][str(nid)]),
            "--data-dir", str(self.dir / f"n{nid}"), "--store", self.meta["store"],
            "--partitions", ",".join(self.meta["partitions"]),
            "--mint-interval", str(self.meta["mint_interval"]), *self.meta["extra"],
            "--log-level", self.meta.get("log_level", "WARNING"),
        ]
        env = dict(os.environ)
        env["PYTHONPATH"] = IMPORT_ROOT + os.pathsep + env.get("PYTHONPATH", "")
        env.update(self.node_env(nid))
        logf = open(self.dir / f"n{nid}.log", "ab")  # noqa: SIM115 - handed to the child
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=logf, env=env, text=True,
                             start_new_session=True)
        logf.close()
        assert p.stdout is not None
        try:
            line = p.stdout.readline()
        except BaseException:  # interrupted (issue 41): a node not yet recorded is not left
            p.kill()
            p.wait()
            raise
        if not line.startswith("READY"):
            p.wait(timeout)
            err = (self.dir / f"n{nid}.log").read_text().strip().splitlines()
            raise RuntimeError(f"node {nid} failed to start: {err[-1] if err else line!r}")
        self.meta["pids"][str(nid)] = p.pid
        self.save()
        return p.pid

    def kill(self, nid: int, sig: int = signal.SIGKILL) -> None:
        pid = self.meta["pids"].pop(str(nid), None)
        self.save()
        if pid is None:
            return
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        if not _wait_exit(pid, 10.0) and sig != signal.SIGKILL:
            # A node that ignores or hangs on SIGTERM must not outlive `stop`.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _wait_exit(pid, 10.0)

    def stop_all(self) -> None:
        for nid in self.ids:
            self.kill(nid, signal.SIGTERM)


def _wait_exit(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                return True
        except ChildProcessError:  # not our child (another `epochgc` invocation started it)
            if not _alive(pid):
                return True
        time.sleep(0.02)
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
