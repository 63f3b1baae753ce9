"""The chaos run's cluster: LocalCluster with a LinkProxy on every pair's Raft connection,
a fault file per node, and process control (SIGKILL, SIGSTOP/SIGCONT, crash detection)."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
from pathlib import Path

from epochgc.impl.chaos.faultfile import ENV, Faults
from epochgc.impl.chaos.proxy import LinkProxy
from epochgc.impl.cluster.local import LocalCluster


class ChaosCluster(LocalCluster):
    def __init__(self, data_dir: Path) -> None:
        super().__init__(data_dir)
        self.proxies: dict[tuple[int, int], LinkProxy] = {}
        self.faults: dict[int, Faults] = {}
        self.paused: set[int] = set()

    async def start_proxies(self) -> None:
        for lo, hi in itertools.combinations(self.ids, 2):
            p = LinkProxy(lo, hi, int(self.meta["raft"][str(hi)]))
            await p.start()
            self.proxies[(lo, hi)] = p
        for n in self.ids:
            self.set_faults(n, Faults())

    async def close_proxies(self) -> None:
        for p in self.proxies.values():
            await p.close()

    # ---- LocalCluster hooks --------------------------------------------------------------

    def peer_addr(self, nid: int, peer: int) -> str:
        if nid < peer:  # the lower id dials: through the pair's proxy
            return f"127.0.0.1:{self.proxies[(nid, peer)].port}"
        return super().peer_addr(nid, peer)  # never dialled (the peer dials us)

    def node_env(self, nid: int) -> dict[str, str]:
        return {ENV: str(self.fault_path(nid))}

    # ---- faults --------------------------------------------------------------------------

    def fault_path(self, nid: int) -> Path:
        return self.dir / f"n{nid}.faults.json"

    def set_faults(self, nid: int, f: Faults) -> None:
        self.faults[nid] = f
        f.write(self.fault_path(nid))

    def link(self, a: int, b: int) -> LinkProxy:
        return self.proxies[(min(a, b), max(a, b))]

    def cut(self, src: int, dst: int) -> None:
        self.link(src, dst).cut.add((src, dst))

    def heal_links(self) -> None:
        for p in self.proxies.values():
            p.cut.clear()

    # ---- processes -----------------------------------------------------------------------

    def pid(self, nid: int) -> int | None:
        p = self.meta["pids"].get(str(nid))
        return None if p is None else int(p)

    def up(self) -> list[int]:
        return [n for n in self.ids if self.pid(n) is not None]

    def reap(self) -> dict[int, int]:
        """Nodes whose process has exited since the last look: id -> exit status."""
        out: dict[int, int] = {}
        for n in self.up():
            pid = self.pid(n)
            assert pid is not None
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done, status = pid, 0
            if done:
                self.meta["pids"].pop(str(n), None)
                self.paused.discard(n)
                out[n] = os.waitstatus_to_exitcode(status)
        if out:
            self.save()
        return out

    def pause(self, nid: int) -> None:
        pid = self.pid(nid)
        if pid is not None:
            os.kill(pid, signal.SIGSTOP)
            self.paused.add(nid)

    def resume(self, nid: int) -> None:
        pid = self.pid(nid)
        self.paused.discard(nid)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def stop_all(self) -> None:
        for n in list(self.paused):
            self.resume(n)
        super().stop_all()
