"""Group commit across Raft groups: one durability barrier per Ready batch for every group of a
node that wrote in it, instead of one fsync per group in turn.

What was weighed (correct = every file a group wrote is durable before any acknowledgement):

* A node-wide shared WAL (etcd's one WAL per process, TiKV's raft-engine): correct and the
  long-term answer, but it replaces the per-group segment files, their compaction and their
  recovery with a shared log whose garbage collection must track every group's snapshot: a
  different storage engine, not a change to this one. Not done here.
* syncfs(2) on the data directory's file system (mode "syncfs"): one call writes back every
  dirty page and inode of the file system and commits its journal, so every append, creation,
  rename and unlink any group made is durable when it returns 0. Since Linux 5.8 it reports
  writeback errors (errseq on the superblock); before, it always returns 0, so it is refused
  there. It reports an error only to descriptors opened before it (or while nobody had seen
  it), so the barrier uses one descriptor held from the GroupCommit's creation: another
  process that synced first would otherwise see the EIO alone and this node acknowledge lost
  writes (issue 37 item 2). The price: an error in any file of the file system, another
  program's included, stops the node. Its cost is the whole file system's dirty data: on a
  disk shared with other busy processes (this machine) it also waits for their writeback.
* The batch's fsyncs issued concurrently from a thread pool (mode "parallel", the default):
  still one fsync per file, so each file reports its own error and nothing else is flushed,
  but the journal (ext4's jbd2, XFS's log) folds concurrent fsyncs into one commit and one
  device cache flush. Correct on every kernel.

Measured (ext4 here, 1.1 KiB appended per file, one barrier, ms): 1 file: fsync 0.2-2.2,
syncfs 2.6-3.6; 16 files: fsyncs in turn 50, parallel 4.3, syncfs 3.8-4.4; 64 files: 128-279,
parallel 16, syncfs 3.3-26; 256 files: 186-580, parallel 42, syncfs 9-26. The Raft benchmark
with 256 groups per node (benchmarks/bench_raft.py) has both modes' figures.

`GroupCommit(data_dir)` is shared by every DiskStorage of one node; `commit(storages)` runs
each storage's pre-barrier step, the barrier, then each post-barrier step. A batch in which
only one storage wrote uses that storage's own fsync. A failed barrier is fatal for every
storage in it (StorageFailed): after a failed fsync the page cache can no longer be trusted to
hold what was written.
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


def syncfs_fd(fd: int) -> None:
    """syncfs(2) on the file system of descriptor `fd`; raises OSError on failure."""
    if _load_libc().syncfs(fd) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"syncfs(fd {fd}): {os.strerror(err)}")


def syncfs(path: str) -> None:
    """syncfs(2) on the file system holding `path`, through a descriptor opened for this call
    alone: it reports only write-back errors nobody has seen yet or that come during the
    call (errseq sampled at open). A barrier that acknowledges must use a descriptor held
    since before its writes (`GroupCommit` does)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        syncfs_fd(fd)
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

    mode "syncfs": one syncfs(2) on `path`'s file system (through the storages' FileIO), on
    one descriptor opened here and held until `close`; a write-back error of ANY file on that
    file system (another node's, another program's) fails the barrier and stops this node.
    mode "parallel": every storage's own fsync, issued concurrently from `threads` threads
    (os.fsync releases the GIL): the file system's journal folds concurrent fsyncs into one
    commit, and each file still reports its own error. Either way a batch in which only one
    storage wrote uses that storage's own fsync."""

    def __init__(
        self, path: str, fs: object | None = None, mode: str = "syncfs", threads: int = 16
    ) -> None:
        from epochgc.impl.raft.fileio import FileIO, OsFileIO

        if mode not in ("syncfs", "parallel"):
            raise ValueError(f"unknown group commit mode {mode!r}")
        self.path = path
        self.fs: FileIO = fs if fs is not None else OsFileIO()  # type: ignore[assignment]
        self.mode = mode
        self.barriers = 0
        self._pool = ThreadPoolExecutor(threads) if mode == "parallel" else None
        # One descriptor for every barrier of this GroupCommit, opened before any write it
        # covers: syncfs reports a write-back error through the file system's errseq
        # (sb->s_wb_err, Linux >= 5.8) to each descriptor that sampled it before the error;
        # a descriptor opened per call would miss an error another process (another node on
        # this file system, a backup agent, `sync -f`) saw first, and acknowledge lost
        # writes (issue 37 item 2; lib/errseq.c, xfstests generic/484). So an error from
        # any tenant of the file system stops this node too: it cannot tell whose pages
        # were lost.
        self._fs_fd = -1
        if mode == "syncfs":
            from epochgc.impl.raft.fileio import make_dirs_durable

            make_dirs_durable(self.fs, path)  # (the node's directory: its groups' parent)
            self._fs_fd = self.fs.open_fs(path)

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
                self.fs.syncfs(self._fs_fd)
            except OSError as e:
                errors = [s.fail(e) for s in dirty]  # every storage in the barrier fails
                raise errors[0] from e
            self.barriers += 1
        for s in storages:
            s.post_barrier()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        if self._fs_fd >= 0:
            self.fs.close(self._fs_fd)
            self._fs_fd = -1


def _try_fsync_own(s: Committable) -> BaseException | None:
    try:
        s.fsync_own()
    except Exception as e:  # StorageFailed (or a bug): reported to the committing thread
        return e
    return None
