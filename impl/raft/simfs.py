"""The simulated process's file system: KillableFS, a CrashFS whose process dies at a seeded
file-system call (`ProcessKilled`) or whose snapshot writes and barriers fail (ENOSPC, EIO),
as the simulator's `Faults` say; and which of CrashFS, GroupCommit and DiskStorage's `fs` and
`group_commit` parameters this disk log has.

Part of the simulator (impl/raft/sim.py): every draw is from the simulator's rng, at the call
it decides, so the trace stays the same for the same seed.
"""

from __future__ import annotations

import errno
import inspect
import os
from typing import TYPE_CHECKING

from epochgc.impl.raft.disklog import DiskStorage

if TYPE_CHECKING:
    from epochgc.impl.raft.simdisk import SimDisks

try:  # the injectable file layer and its power-loss model
    from epochgc.impl.raft.fileio import CrashFS
except ImportError:  # a disk log without one: a crash is a process kill (the page cache lives)
    CrashFS = None  # type: ignore[assignment,misc]
try:  # one durability barrier per Ready batch for all of a node's groups
    from epochgc.impl.raft.groupcommit import GroupCommit
except ImportError:
    GroupCommit = None  # type: ignore[assignment,misc]
_PARAMS = inspect.signature(DiskStorage.__init__).parameters
_FS_PARAM = "fs" in _PARAMS
_GC_PARAM = "group_commit" in _PARAMS


class ProcessKilled(BaseException):
    """The simulated process died inside a file-system call (`Faults.kill_at_call`). A
    BaseException, so that no `except Exception` or `except OSError` on the way swallows it:
    nothing after the call runs, as in a process that is gone."""


if CrashFS is not None:

    class KillableFS(CrashFS):
        """CrashFS whose process may die at any file-system call, or whose snapshot writes
        may fail with ENOSPC, as the simulator's `Faults` say (read at every call, so that
        clearing the faults stops them)."""

        def __init__(self, sim: SimDisks) -> None:
            super().__init__()
            self._sim = sim

        def _maybe_die(self) -> None:
            p = self._sim.faults.kill_at_call
            if p and self._sim.rng.random() < p:
                raise ProcessKilled()

        def makedirs(self, path: str) -> None:
            self._maybe_die()
            super().makedirs(path)

        def open_append(self, path: str, create: bool) -> int:
            self._maybe_die()
            return super().open_append(path, create)

        def open_trunc(self, path: str) -> int:
            self._maybe_die()
            return super().open_trunc(path)

        def write(self, fd: int, data: bytes) -> int:
            sim = self._sim
            f = sim.faults
            if (f.enospc_snapshot and self._fds.get(fd, "").endswith("snapshot.tmp")
                    and sim.rng.random() < f.enospc_snapshot):
                sim.stats["enospc_injected"] += 1
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            if f.kill_at_call and sim.rng.random() < f.kill_at_call:
                n = sim.rng.randrange(len(data) + 1)
                if n:
                    super().write(fd, data[:n])
                raise ProcessKilled()
            return super().write(fd, data)

        def _maybe_eio(self, paths: list[str] | None) -> None:
            p = self._sim.faults.eio_fsync
            if p and self._sim.rng.random() < p:
                self._sim.stats["eio_injected"] += 1
                self.writeback_failed(paths, self._sim.rng)
                raise OSError(errno.EIO, os.strerror(errno.EIO))

        def fsync(self, fd: int) -> None:
            self._maybe_die()
            path = self._fds.get(fd)
            self._maybe_eio([path] if path is not None else [])
            super().fsync(fd)

        def truncate(self, path: str, length: int) -> None:
            self._maybe_die()
            super().truncate(path, length)

        def replace(self, src: str, dst: str) -> None:
            self._maybe_die()
            super().replace(src, dst)

        def unlink(self, path: str) -> None:
            self._maybe_die()
            super().unlink(path)

        def fsync_dir(self, path: str) -> None:
            self._maybe_die()
            super().fsync_dir(path)

        def read_durable(self, path: str) -> bytes:
            self._maybe_die()
            self._maybe_eio([os.path.abspath(path)])
            return super().read_durable(path)

        def syncfs(self, fd: int) -> None:
            self._maybe_die()
            self._maybe_eio(None)
            super().syncfs(fd)
