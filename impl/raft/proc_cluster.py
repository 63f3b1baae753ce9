"""Start, kill and restart `node_main` processes on loopback (tests and the benchmark)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

from epochgc import IMPORT_ROOT
from epochgc.impl.ports import free_ports
from epochgc.impl.raft.kv import OP_LEADER, ST_OK, KVClient


class ProcCluster:
    def __init__(self, base_dir: str, n: int = 3, groups: int = 1, extra: list[str] | None = None):
        self.base_dir = base_dir
        self.ids = list(range(1, n + 1))
        ports = free_ports(2 * n)
        self.raft_ports = dict(zip(self.ids, ports[:n], strict=True))
        self.client_ports = dict(zip(self.ids, ports[n:], strict=True))
        self.groups = groups
        self.extra = extra or []
        self.procs: dict[int, subprocess.Popen[str]] = {}
        self.peers = ",".join(f"{i}=127.0.0.1:{self.raft_ports[i]}" for i in self.ids)

    def start(self, nid: int) -> None:
        cmd = [
            sys.executable,
            "-m",
            "epochgc.impl.raft.node_main",
            "--id",
            str(nid),
            "--peers",
            self.peers,
            "--client-port",
            str(self.client_ports[nid]),
            "--data-dir",
            os.path.join(self.base_dir, f"n{nid}"),
            "--groups",
            str(self.groups),
            *self.extra,
        ]
        env = dict(os.environ)
        env["PYTHONPATH"] = IMPORT_ROOT + os.pathsep + env.get("PYTHONPATH", "")
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
        assert p.stdout is not None
        line = p.stdout.readline()
        if not line.startswith("READY"):
            p.kill()
            raise RuntimeError(f"node {nid} failed to start: {line!r}")
        self.procs[nid] = p

    def start_all(self) -> None:
        for i in self.ids:
            self.start(i)

    def kill(self, nid: int, sig: int = signal.SIGKILL) -> None:
        p = self.procs.pop(nid)
        p.send_signal(sig)
        p.wait(10)

    def stop_all(self) -> None:
        for nid in list(self.procs):
            self.kill(nid, signal.SIGTERM if sys.platform != "win32" else signal.SIGKILL)

    def pids(self) -> dict[int, int]:
        return {nid: p.pid for nid, p in self.procs.items()}

    async def find_leader(self, group: int = 1, timeout: float = 20.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for nid in list(self.procs):
                try:
                    c = await KVClient.connect("127.0.0.1", self.client_ports[nid])
                except OSError:
                    continue
                try:
                    status, leader, _ = await asyncio.wait_for(
                        c.request(OP_LEADER, b"", group=group), 2
                    )
                finally:
                    await c.close()
                if status == ST_OK and leader == nid:
                    return nid
            await asyncio.sleep(0.1)
        raise TimeoutError("no leader elected")
