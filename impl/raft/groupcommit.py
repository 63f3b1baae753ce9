"""Group commit across Raft groups: one durability barrier per Ready batch for every group of a
node that wrote in it, instead of one fsync per group.

Choice: syncfs(2) on the file system holding the node's data directory.

* A node-wide shared WAL (etcd's one-WAL-per-process, TiKV's raft-engine) is the other
  correct design, but it replaces the per-group segment files, their compaction and their
  recovery with a shared log whose garbage collection must track every group's snapshot:
  a different storage engine, not a change to this one.
* Batching fdatasync calls (or issuing them from threads) keeps one flush per file: the
  number of device cache flushes is what costs, and that does not go down reliably.
* syncfs writes back every dirty page and inode of the file system and commits its journal,
  so every segment append, file creation, rename and unlink a group made before the call is
  durable when it returns 0. Since Linux 5.8 it reports writeback errors that happened since
  the descriptor was opened (errseq on the superblock); on older kernels it always returns 0,
  so there `syncfs_usable()` is False and storages fall back to one fsync per group.
  It also flushes other processes' dirty data on the same file system: correct, only slower
  on a busy shared disk (the data directory should be its own file system in production).

`GroupCommit(data_dir)` is shared by every DiskStorage of one node; `commit(storages)` runs
each storage's pre-barrier step, one syncfs, then each post-barrier step. A batch in which
only one storage wrote uses that storage's own fsync instead (measured on ext4 here: one fsync
2.2 ms vs syncfs 2.6 ms; 16 files 50 ms of fsyncs vs 3.8 ms; 256 files 186 ms vs 9 ms).
A failed barrier is fatal for every storage in it (StorageFailed): after a failed fsync the
page cache can no longer be trusted to hold what was written.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

_libc: ctypes.CDLL | None = None


def _load_libc() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _libc


def syncfs_usable() -> bool:
    """syncfs exists and reports writeback errors (Linux >= 5.8)."""
    if platform.system() != "Linux":
        return False
    try:
        major, minor = (int(x) for x in platform.release().split(".")[:2])
        _load_libc().syncfs  # noqa: B018 - attribute lookup checks the symbol exists
    except (ValueError, AttributeError, OSError):
        return False
    return (major, minor) >= (5, 8)


def syncfs(path: str) -> None:
    """syncfs(2) on the file system holding `path`; raises OSError on failure."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if _load_libc().syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


class Committable(Protocol):
    def pre_barrier(self) -> bool:
        """Everything but the barrier itself; False if there is nothing to make durable."""
        ...

    def fsync_own(self) -> None:
        """The storage's own barrier (fsync its files), used when it is alone in a batch;
        raises StorageFailed."""
        ...

    def post_barrier(self) -> None:
        """The barrier succeeded: record what is durable, do deferred deletions."""
        ...

    def fail(self, exc: BaseException) -> Exception:
        """The barrier failed: the storage must refuse all further use; returns the error
        to raise (StorageFailed)."""
        ...


class GroupCommit:
    """One barrier for many storages; shared by every DiskStorage of one node.

    mode "syncfs": one syncfs(2) on `path`'s file system (through the storages' FileIO).
    mode "parallel": every storage's own fsync, issued concurrently from `threads` threads
    (os.fsync releases the GIL): the file system's journal folds concurrent fsyncs into one
    commit, and each file still reports its own error. Either way a batch in which only one
    storage wrote uses that storage's own fsync."""

    def __init__(
        self, path: str, fs: object | None = None, mode: str = "syncfs", threads: int = 16
    ) -> None:
        from impl.raft.fileio import FileIO, OsFileIO

        if mode not in ("syncfs", "parallel"):
            raise ValueError(f"unknown group commit mode {mode!r}")
        self.path = path
        self.fs: FileIO = fs if fs is not None else OsFileIO()  # type: ignore[assignment]
        self.mode = mode
        self.barriers = 0
        self._pool = ThreadPoolExecutor(threads) if mode == "parallel" else None

    def commit(self, storages: Sequence[Committable]) -> None:
        dirty = [s for s in storages if s.pre_barrier()]
        if len(dirty) == 1:
            dirty[0].fsync_own()  # one file (and maybe its directory): cheapest alone
        elif dirty and self._pool is not None:
            results = list(self._pool.map(_try_fsync_own, dirty))
            failed = [r for r in results if r is not None]
            if failed:
                errors = [s.fail(failed[0]) for s in dirty]  # the node stops as a whole
                raise errors[0] from failed[0]
            self.barriers += 1
        elif dirty:
            try:
                self.fs.syncfs(self.path)
            except OSError as e:
                errors = [s.fail(e) for s in dirty]  # every storage in the barrier fails
                raise errors[0] from e
            self.barriers += 1
        for s in storages:
            s.post_barrier()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


def _try_fsync_own(s: Committable) -> BaseException | None:
    try:
        s.fsync_own()
    except Exception as e:  # StorageFailed (or a bug): reported to the committing thread
        return e
    return None
