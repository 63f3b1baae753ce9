"""The file-system calls DiskStorage makes, behind a small injectable interface, and CrashFS:
real files on a real directory plus a model of what a power loss leaves of them.

`OsFileIO` is the default (plain `os`). `make_dirs_durable(fs, path)` creates directories
through `FileIO.mkdir` and fsyncs each new one's parent (every directory DiskStorage creates
goes through it). CrashFS does not model directory creation (a created directory is durable
at once in it); its semantics are otherwise as below.

`CrashFS` performs every call on the real files too, so a test reads back exactly the bytes
DiskStorage wrote, and in addition records what has been made durable:

* per file, its length at its last `fsync` (or `truncate`, which fsyncs);
* per directory, the entry operations (create, rename, unlink) since its last `fsync_dir`;
* `syncfs(path)` makes every file and every directory operation durable at once.

`crash(rng)` then mutates the real directory the way a power loss may, and closes every
descriptor opened through it (the process died):

1. unsynced directory operations are undone, newest first, each with probability 1/2; an
   operation on a name is only undone if every later one on that name was (the journal of a
   file system keeps the operations on one name in order): a file created since the last
   directory fsync may vanish, an unlinked file may come back (with its content as it was
   when unlinked), a renamed file may go back to its old name (and the old target return);
2. every surviving file is cut at a random point p at or after its last fsynced length:
   either truncated at p, or, from p rounded down to a 512-byte sector (but never below the
   fsynced length), filled with zeros up to a random length at or before the written one
   (the size reached the disk, the data blocks did not). Bytes before the fsynced length are
   never changed. Files CrashFS never saw written (present before it was created) are durable.

Linux's write-back errors (crashstates.py's PAGECACHE model, for one process at a time): a
failed fsync-like call (`fail_fsync`, or `writeback_failed` called by a test or the
simulator) leaves the bytes written since the file's last fsync in the real file (the page
cache, which a process restarted without a reboot reads) but NOT on the device: they are
`lost`, kept as byte ranges per file. A later fsync does not write them (they are clean); a
later write into one of their 4 KiB pages dirties the whole page again, which then reaches the
device at the next fsync (until then a crash still zeroes it). The simulator's failures fail
only some of a file's dirty pages half the time (`writeback_failed`'s `rng`: per bio, as
crashstates.Writeback). `read_durable` (fsync, then past the cache) turns lost bytes into
what the device holds (zeros: a hole), in the real file too; `crash` zeroes every lost range
left. Errors are reported by the failing call itself (errseq's once per descriptor: the
process that saw it stops; a restarted one opens new descriptors and sees nothing). Not
modelled here (the explorer's PAGECACHE has them): stale blocks, which recovery refuses as
damage (a refused restart is a simulator failure), and directory write-back errors.

Outside the model (a check that passes under it says nothing about these): bit rot in fsynced
data, a later sector of an unsynced write persisting while an earlier one does not, lying
fsync. Faults for error paths: `space_left` (bytes that may still be written before ENOSPC;
the write that crosses it is short, the next raises), `fail_fsync` (fsync raises EIO, a failed
write-back as above), `short_writes` (every write of more than one byte writes a random shorter
prefix).

Usage::

    fs = CrashFS()
    s = DiskStorage(path, fs=fs)
    s.write(HardState(1, 0, 0), None, entries); s.sync()   # durable
    s.write(None, None, more)                                # not yet
    fs.crash(random.Random(7))    # closes s's descriptors; `more` may be partly or wholly gone
    init = DiskStorage(path, fs=fs).load()                   # every synced entry is there
"""

from __future__ import annotations

import contextlib
import enum
import errno
import json
import os
import random
import stat
import time
from dataclasses import dataclass, field
from typing import Protocol

from epochgc.impl.raft.errseq import ErrSeq

SECTOR = 512
PAGE = 4096  # the page cache's unit of write-back


class EntryKind(enum.Enum):
    """What a directory entry is, without following a symlink (lstat)."""

    MISSING = "missing"
    REGULAR = "regular file"
    DIRECTORY = "directory"
    SYMLINK = "symbolic link"
    OTHER = "special file (FIFO, socket or device)"


class FileIO(Protocol):
    """What DiskStorage needs from the file system. Descriptors are plain ints."""

    def makedirs(self, path: str) -> None: ...
    def mkdir(self, path: str) -> None:
        """Create one directory (its parent exists); raises FileExistsError if it exists."""
        ...

    def listdir(self, path: str) -> list[str]: ...
    def exists(self, path: str) -> bool: ...
    def entry_kind(self, path: str) -> EntryKind:
        """What the directory entry `path` is (lstat: a symlink is not followed)."""
        ...

    def read(self, path: str) -> bytes:
        """Read through the page cache."""
        ...

    def read_durable(self, path: str) -> bytes:
        """What the device holds of a file, not what the page cache holds: fsync it on a
        fresh descriptor (raises OSError if the kernel reports a write-back error to it),
        then read past the cache. After a failed write-back Linux keeps the pages' new
        content cached and marked clean (crashstates.py, PAGECACHE); a process restarted
        without a reboot would read it, and the fsync would succeed (nothing dirty, the
        error already reported to the process that died)."""
        ...

    def open_append(self, path: str, create: bool) -> int:
        """Open for appending; `create` makes a new file (failing if it exists)."""
        ...

    def open_trunc(self, path: str) -> int:
        """Create or empty a file and open it for writing."""
        ...

    def write(self, fd: int, data: bytes) -> int:
        """One write(2): returns how many bytes were written (maybe fewer); raises OSError."""
        ...

    def fsync(self, fd: int) -> None: ...
    def close(self, fd: int) -> None: ...
    def size(self, fd: int) -> int: ...
    def truncate(self, path: str, length: int) -> None:
        """Cut a file to `length` bytes and fsync it."""
        ...

    def replace(self, src: str, dst: str) -> None: ...
    def unlink(self, path: str) -> None: ...
    def rmdir(self, path: str) -> None: ...
    def fsync_dir(self, path: str) -> None: ...
    def open_fs(self, path: str) -> int:
        """A descriptor on the file system holding `path`, for `syncfs`; close it with
        `close`. Open it once, before the writes its barriers cover: syncfs reports a
        write-back error only to descriptors opened before it or while nobody had seen it
        (errseq, lib/errseq.c)."""
        ...

    def syncfs(self, fd: int) -> None:
        """Make every file and directory operation on the file system of `fd` (from
        `open_fs`) durable (syncfs(2)); raises OSError if the kernel reports a write-back
        error to this descriptor (any process's, Linux >= 5.8)."""
        ...


class OsFileIO:
    """The real thing."""

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def mkdir(self, path: str) -> None:
        os.mkdir(path, 0o755)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def entry_kind(self, path: str) -> EntryKind:
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return EntryKind.MISSING
        if stat.S_ISREG(mode):
            return EntryKind.REGULAR
        if stat.S_ISDIR(mode):
            return EntryKind.DIRECTORY
        if stat.S_ISLNK(mode):
            return EntryKind.SYMLINK
        return EntryKind.OTHER

    def read(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def read_durable(self, path: str) -> bytes:
        fd = os.open(path, os.O_RDONLY)
        try:
            # Writes back what is dirty; a write-back error nobody has seen yet is reported
            # here (the descriptor's errseq sample is 0 then): the caller must not go on.
            os.fsync(fd)
            # Pages that failed write-back are clean now: DONTNEED evicts clean pages
            # (mm/fadvise.c: invalidate_mapping_pages), so what follows reads the device.
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        try:
            return _read_direct(path)
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise
        # O_DIRECT refused (tmpfs before 6.6 and the like): the cache was just dropped.
        return self.read(path)

    def open_append(self, path: str, create: bool) -> int:
        flags = os.O_WRONLY | os.O_APPEND | (os.O_CREAT | os.O_EXCL if create else 0)
        return os.open(path, flags, 0o644)

    def open_trunc(self, path: str) -> int:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def write(self, fd: int, data: bytes) -> int:
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def close(self, fd: int) -> None:
        os.close(fd)

    def size(self, fd: int) -> int:
        return os.fstat(fd).st_size

    def truncate(self, path: str, length: int) -> None:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, length)
            os.fsync(fd)
        finally:
            os.close(fd)

    def replace(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def rmdir(self, path: str) -> None:
        os.rmdir(path)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def open_fs(self, path: str) -> int:
        return os.open(path, os.O_RDONLY)

    def syncfs(self, fd: int) -> None:
        from epochgc.impl.raft.groupcommit import syncfs_fd

        syncfs_fd(fd)


_DIRECT_ALIGN = 4096  # O_DIRECT: buffer, offset and length aligned to the logical block


def _read_direct(path: str) -> bytes:
    """Read a whole file with O_DIRECT: the device's content, never the page cache's (the
    kernel writes back dirty pages of the range first; open(2), "O_DIRECT")."""
    import mmap

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
    try:
        if not hasattr(os, "O_DIRECT"):
            raise OSError(errno.EINVAL, "no O_DIRECT on this platform")
        size = os.fstat(fd).st_size
        cap = max(_DIRECT_ALIGN, -(-size // _DIRECT_ALIGN) * _DIRECT_ALIGN)
        buf = mmap.mmap(-1, cap)  # page-aligned
        try:
            got = 0
            while got < cap:
                view = memoryview(buf)[got:]
                try:
                    n = os.preadv(fd, [view], got)
                finally:
                    view.release()
                if n <= 0:
                    break
                got += n
                if got % _DIRECT_ALIGN:
                    break  # a short read at the end of the file
            return bytes(buf[:got])
        finally:
            buf.close()
    finally:
        os.close(fd)


def make_dirs_durable(fs: FileIO, path: str) -> None:
    """Create `path` and any missing parents, fsyncing each new directory's parent after
    creating it (as etcd does): on strict POSIX a directory entry is durable only once its
    parent is fsynced, so without it a crash may bring a node back without the directory (and
    so without the hard state and entries inside it). Existing directories are left alone."""
    path = os.path.abspath(path)
    missing: list[str] = []
    while not fs.exists(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for d in reversed(missing):
        try:
            fs.mkdir(d)
        except FileExistsError:
            continue  # created meanwhile by another thread or process: its creator syncs
        fs.fsync_dir(os.path.dirname(d))


@dataclass
class _DirOp:
    kind: str  # "create" | "unlink" | "rename"
    path: str  # created / unlinked / rename target
    src: str = ""  # rename source
    content: bytes | None = None  # unlink: the file's bytes; rename: the old target's (or None)
    synced: int = 0  # unlink: the file's fsynced length; rename: the old target's


@dataclass
class _FileState:
    synced: int = 0  # length at the last fsync
    # byte ranges [a, b) a failed write-back left cached but not on the device (zeros there)
    lost: list[tuple[int, int]] = field(default_factory=list)
    # lost ranges whose pages a later write dirtied again: still not on the device (a power
    # loss zeroes them too), but written back, whole pages, at the next successful fsync
    redirtied: list[tuple[int, int]] = field(default_factory=list)

    def redirty(self, lo: int, hi: int) -> None:
        """A write to [lo, hi): its pages are dirty again, all of their cached bytes (the
        lost ones included) go to the device at the next write-back."""
        if not self.lost or hi <= lo:
            return
        a, b = lo // PAGE * PAGE, -(-hi // PAGE) * PAGE
        out: list[tuple[int, int]] = []
        for x, y in self.lost:
            if y <= a or x >= b:
                out.append((x, y))
                continue
            if x < a:
                out.append((x, a))
            if y > b:
                out.append((b, y))
            self.redirtied.append((max(x, a), min(y, b)))
        self.lost = out

    def written_back(self) -> None:
        """A successful write-back: the dirty pages (the redirtied ones too) reach the device."""
        self.redirtied = []

    def failed(self) -> None:
        """A failed write-back: the redirtied pages are clean and lost again."""
        self.lost += self.redirtied
        self.redirtied = []

    def not_on_device(self) -> list[tuple[int, int]]:
        return self.lost + self.redirtied

    def cut(self, length: int) -> None:
        """The file cut to `length` (and fsynced)."""
        self.synced = length
        self.lost = [(a, min(b, length)) for a, b in self.lost if a < length]
        self.redirtied = [(a, min(b, length)) for a, b in self.redirtied if a < length]
        self.redirty(length, length + 1 if length % PAGE else length)  # its partial last page
        self.written_back()


@dataclass
class CrashFS(OsFileIO):
    """Real files plus a power-loss model (see the module docstring)."""

    space_left: int | None = None
    fail_fsync: bool = False
    short_writes: bool = False
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    _files: dict[str, _FileState] = field(default_factory=dict)
    _fds: dict[int, str] = field(default_factory=dict)
    _ops: dict[str, list[_DirOp]] = field(default_factory=dict)
    fsyncs: int = 0  # fsync + fsync_dir + syncfs calls, for tests of group commit
    syncfs_calls: int = 0

    # ---- tracked calls -------------------------------------------------------------------

    def open_append(self, path: str, create: bool) -> int:
        path = os.path.abspath(path)
        fd = super().open_append(path, create)
        self._fds[fd] = path
        if create:
            self._files[path] = _FileState(0)
            self._op(_DirOp("create", path))
        else:
            self._files.setdefault(path, _FileState(os.fstat(fd).st_size))
        return fd

    def open_trunc(self, path: str) -> int:
        path = os.path.abspath(path)
        existed = os.path.exists(path)
        fd = super().open_trunc(path)
        self._fds[fd] = path
        # Truncating an existing file is a data change: its durable length is unknown now;
        # model the worst case of a fresh file (everything may be lost until fsync).
        self._files[path] = _FileState(0)
        if not existed:
            self._op(_DirOp("create", path))
        return fd

    def write(self, fd: int, data: bytes) -> int:
        n = len(data)
        if self.space_left is not None:
            if self.space_left <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            n = min(n, self.space_left)
        if self.short_writes and n > 1:
            n = self.rng.randint(1, n - 1)
        path = self._fds.get(fd)
        start = os.fstat(fd).st_size  # (append-only descriptors)
        written = super().write(fd, data[:n])
        if self.space_left is not None:
            self.space_left -= written
        if path is not None and path in self._files:
            self._files[path].redirty(start, start + written)
        return written

    def writeback_failed(self, paths: list[str] | None = None,
                         rng: random.Random | None = None) -> None:
        """The device failed the write-back of these files' (default: every file's) bytes
        written since their last fsync: cached, clean, never on the device. With `rng`, half
        the time only some of a file's dirty pages fail (block-layer errors are per bio:
        crashstates.Writeback): every page from a random one on (those before it reached
        the disk), or a single random one."""
        for p in list(self._files) if paths is None else paths:
            st = self._files.get(os.path.abspath(p))
            if st is None or not os.path.exists(p):
                continue
            size = os.path.getsize(p)
            st.failed()
            if size > st.synced:
                pages = list(range(st.synced // PAGE, (size - 1) // PAGE + 1))
                failed = pages
                if rng is not None and len(pages) > 1 and rng.random() < 0.5:
                    k = rng.randrange(len(pages))
                    failed = pages[k:] if k and rng.random() < 0.5 else [pages[k]]
                st.lost += [(max(st.synced, g * PAGE), min(size, (g + 1) * PAGE))
                            for g in failed]
                st.synced = size  # (the size is journalled at the next barrier: a hole)

    def fsync(self, fd: int) -> None:
        self.fsyncs += 1
        if self.fail_fsync:
            path = self._fds.get(fd)
            if path is not None:
                self.writeback_failed([path])
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        super().fsync(fd)
        path = self._fds.get(fd)
        if path is not None:
            st = self._files.setdefault(path, _FileState())
            st.synced = os.fstat(fd).st_size
            st.written_back()

    def close(self, fd: int) -> None:
        self._fds.pop(fd, None)
        super().close(fd)

    def truncate(self, path: str, length: int) -> None:
        path = os.path.abspath(path)
        self.fsyncs += 1
        if self.fail_fsync:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        super().truncate(path, length)
        self._files.setdefault(path, _FileState()).cut(length)

    def replace(self, src: str, dst: str) -> None:
        src, dst = os.path.abspath(src), os.path.abspath(dst)
        old = self._snapshot_file(dst)
        super().replace(src, dst)
        content, synced = old if old is not None else (None, 0)
        self._op(_DirOp("rename", dst, src, content, synced))
        self._files[dst] = self._files.pop(src, _FileState(os.path.getsize(dst)))

    def unlink(self, path: str) -> None:
        path = os.path.abspath(path)
        old = self._snapshot_file(path)
        super().unlink(path)
        assert old is not None
        self._op(_DirOp("unlink", path, content=old[0], synced=old[1]))
        self._files.pop(path, None)

    def fsync_dir(self, path: str) -> None:
        self.fsyncs += 1
        if self.fail_fsync:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        super().fsync_dir(path)
        self._ops.pop(os.path.abspath(path), None)

    def read_durable(self, path: str) -> bytes:
        self.fsyncs += 1
        path = os.path.abspath(path)
        if self.fail_fsync:
            self.writeback_failed([path])
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        st = self._files.get(path)
        if st is not None:
            st.synced = os.path.getsize(path)  # its fsync
            st.written_back()
            _zero(path, st.lost)  # the clean pages dropped: the device's content read back
            st.lost = []
        return super().read_durable(path)

    def syncfs(self, fd: int) -> None:
        """Modelled for the whole CrashFS (one file system): everything becomes durable."""
        self.fsyncs += 1
        self.syncfs_calls += 1
        if self.fail_fsync:
            self.writeback_failed()
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        self._ops.clear()
        for fd, p in self._fds.items():
            self._files.setdefault(p, _FileState()).synced = os.fstat(fd).st_size
        for p, st in self._files.items():
            st.written_back()
            if os.path.exists(p):
                st.synced = os.path.getsize(p)

    # ---- the crash -----------------------------------------------------------------------

    def crash(self, rng: random.Random) -> None:
        """Power loss: close every descriptor, then mutate the files as the model allows."""
        for fd in list(self._fds):
            self.close(fd)
        for d in sorted(self._ops):
            self._undo_dir_ops(d, self._ops[d], rng)
        self._ops.clear()
        for path in sorted(self._files):
            if os.path.exists(path):
                st = self._files[path]
                self._cut(path, st.synced, rng)
                _zero(path, st.not_on_device())  # the device never got them
        self._files.clear()  # what is on disk now is all there is: durable

    def _undo_dir_ops(self, d: str, ops: list[_DirOp], rng: random.Random) -> None:
        kept: set[str] = set()  # names with a later operation that survives
        for op in reversed(ops):
            names = {op.path, op.src} - {""}
            if names & kept or rng.random() < 0.5:
                kept |= names
                continue
            if op.kind == "create":
                if os.path.exists(op.path):
                    os.unlink(op.path)
                self._files.pop(op.path, None)
            elif op.kind == "unlink":
                assert op.content is not None
                with open(op.path, "wb") as f:
                    f.write(op.content)
                self._files[op.path] = _FileState(op.synced)
            else:  # rename: the source name comes back, the old target too (if any)
                st = self._files.pop(op.path, _FileState(0))
                os.replace(op.path, op.src)
                self._files[op.src] = st
                if op.content is not None:
                    with open(op.path, "wb") as f:
                        f.write(op.content)
                    self._files[op.path] = _FileState(op.synced)

    @staticmethod
    def _cut(path: str, synced: int, rng: random.Random) -> None:
        size = os.path.getsize(path)
        if size <= synced:
            return
        p = rng.randint(synced, size)
        if rng.random() < 0.5:
            os.truncate(path, p)
            return
        z = max(synced, p - p % SECTOR)
        end = rng.randint(p, size)
        with open(path, "r+b") as f:
            f.seek(z)
            f.write(bytes(end - z))
            f.truncate(end)

    # ---- helpers -------------------------------------------------------------------------

    def _op(self, op: _DirOp) -> None:
        self._ops.setdefault(os.path.dirname(op.path), []).append(op)

    def _snapshot_file(self, path: str) -> tuple[bytes, int] | None:
        if not os.path.exists(path):
            return None
        with open(path, "rb") as f:
            content = f.read()
        st = self._files.get(path)
        return content, (len(content) if st is None else st.synced)

    def synced_length(self, path: str) -> int | None:
        """The durable length CrashFS assumes for a file (None: unknown to it, so all)."""
        st = self._files.get(os.path.abspath(path))
        return None if st is None else st.synced


def _zero(path: str, ranges: list[tuple[int, int]]) -> None:
    """Zero these byte ranges of a file (within its length)."""
    if not ranges:
        return
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        for a, b in ranges:
            b = min(b, size)
            if a < b:
                f.seek(a)
                f.write(bytes(b - a))


class FaultFileIO(OsFileIO):
    """The real `os` calls with switches a test (or `epochgc chaos`, through node_main's fault
    file) flips at run time from another thread:

    * `fail_fsync`: the device fails every write-back: fsync, fsync_dir, syncfs, truncate and
      read_durable raise EIO. What Linux does then (the PAGECACHE model of crashstates.py;
      Rebello et al., "Can Applications Recover from fsync Failures?", USENIX ATC'20,
      section 4: ext4 and XFS mark the failed pages clean and keep them cached): the bytes
      written since the file's last successful fsync stay in the real file (the page cache:
      plain reads, also by a process restarted without a reboot, see them) but are NOT on
      the device: they are `lost`, a hole there (what the device held before the failed
      write-back: the file's size reaches the journal, its new blocks do not). A later
      fsync does not write them (they are clean); a later write into one of their 4 KiB
      pages dirties the whole page again. `read_durable` (fsync, then past the cache) and a
      power loss see the device: the lost ranges read as zeros, in the real file too.
    * errors are reported through errseq counters (errseq.py; lib/errseq.c,
      Documentation/core-api/errseq.rst), one per file and one for the file system, sampled
      when a descriptor is opened: a descriptor that did not see a write-back error reports
      it at its next fsync (syncfs: any file's) even once the device works again, and only
      once; a descriptor opened after someone saw it reports nothing.
    * `enospc`: every write raises ENOSPC (the disk is full).
    * `fsync_delay`: every fsync first sleeps this long (a stalling disk).

    The lost ranges and the errseq counters are the kernel's memory, not the process's: with
    `state` (a path; node_main uses the fault file's name + ".pagecache") they are kept in
    that file, so that a node restarted without a reboot finds the same page cache. A file
    first seen by this process counts as written back up to its size then (a killed
    process's dirty pages: the kernel's flusher or the next fsync writes them).

    `lose_unsynced()` is a power loss (node_main's fault file calls it and then exits at
    once): every file keeps only what the device holds, and the kernel's memory is gone.
    Outside the model: directory entries at a power loss (they all persist), stale content
    (not zeros) in never-written blocks, and a write-back that fails for only some pages.
    """

    def __init__(self, state: str | None = None) -> None:
        self.fail_fsync = False
        self.enospc = False
        self.fsync_delay = 0.0  # seconds every barrier takes first (a stalling disk)
        self._state_path = state
        self._files: dict[str, _FileState] = {}  # path -> written back / lost (this process)
        self._err: dict[str, ErrSeq] = {}  # path -> its errseq (mapping->wb_err)
        self._sb = ErrSeq()  # the file system's (sb->s_wb_err)
        self._fds: dict[int, tuple[str, int, int]] = {}  # fd -> (path, file sample, sb sample)
        self._saved = ""
        if state is not None and os.path.exists(state):
            self._load(state)

    # ---- the kernel's memory across process restarts ------------------------------------

    def _load(self, state: str) -> None:
        with open(state, encoding="utf-8") as f:
            doc = json.load(f)
        self._sb = ErrSeq(*doc["sb"])
        for path, st in doc["files"].items():
            if os.path.exists(path) and (st["lost"] or st["redirtied"]):
                self._files[path] = _FileState(os.path.getsize(path),
                                               [(a, b) for a, b in st["lost"]],
                                               [(a, b) for a, b in st["redirtied"]])
            self._err[path] = ErrSeq(*st["err"])
        self._saved = json.dumps(doc, sort_keys=True)

    def _save(self) -> None:
        if self._state_path is None:
            return
        files: dict[str, dict[str, object]] = {}
        for path in sorted(set(self._files) | set(self._err)):
            st, err = self._files.get(path), self._err.get(path, ErrSeq())
            lost = st.lost if st is not None else []
            redirtied = st.redirtied if st is not None else []
            if lost or redirtied or err.value:
                files[path] = {"lost": lost, "redirtied": redirtied,
                               "err": [err.value, err.seen]}
        doc = json.dumps({"sb": [self._sb.value, self._sb.seen], "files": files},
                         sort_keys=True)
        if doc != self._saved:
            tmp = f"{self._state_path}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(doc)
            os.replace(tmp, self._state_path)  # (the kernel's memory: no fsync, a reboot
            self._saved = doc  # clears it, see lose_unsynced)

    # ---- tracking -----------------------------------------------------------------------

    def _track(self, path: str) -> _FileState:
        st = self._files.get(path)
        if st is None:
            st = self._files[path] = _FileState(os.path.getsize(path))
        return st

    def _opened(self, fd: int, path: str) -> int:
        self._fds[fd] = (path, self._err.setdefault(path, ErrSeq()).sample(), self._sb.sample())
        return fd

    def _report(self, fd: int, sb: bool = False) -> None:
        """errseq_check_and_advance on the descriptor's sample: EIO once per error."""
        path, fs, ss = self._fds[fd]
        if sb:
            err, ss = self._sb.check_and_advance(ss)
        else:
            err, fs = self._err.setdefault(path, ErrSeq()).check_and_advance(fs)
        self._fds[fd] = (path, fs, ss)
        self._save()
        if err:
            raise OSError(errno.EIO, os.strerror(errno.EIO))

    def _writeback_failed(self, path: str, upto: int | None = None) -> None:
        """The device failed the write-back of `path`'s bytes written since its last
        successful one (up to `upto`: what was written when the call was issued): clean in
        the cache, a hole on the device. The error goes into the file's and the file
        system's errseq."""
        if os.path.exists(path):
            st = self._track(path)
            st.failed()
            end = os.path.getsize(path) if upto is None else upto
            if end > st.synced:
                st.lost.append((st.synced, end))
                st.synced = end
        self._err.setdefault(path, ErrSeq()).set()
        self._sb.set()

    # ---- the FileIO calls -----------------------------------------------------------------

    def open_append(self, path: str, create: bool) -> int:
        path = os.path.abspath(path)
        fd = super().open_append(path, create)
        if create:  # a new inode: nothing on the device, a fresh errseq
            self._files[path] = _FileState(0)
            self._err[path] = ErrSeq()
        else:
            self._track(path)
        return self._opened(fd, path)

    def open_trunc(self, path: str) -> int:
        path = os.path.abspath(path)
        existed = os.path.exists(path)
        fd = super().open_trunc(path)
        self._files[path] = _FileState(0)  # (as CrashFS: the worst case of a fresh file)
        if not existed:
            self._err[path] = ErrSeq()
        return self._opened(fd, path)

    def write(self, fd: int, data: bytes) -> int:
        if self.enospc:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        start = os.fstat(fd).st_size  # (append-only or fresh sequential descriptors)
        n = super().write(fd, data)
        path = self._fds[fd][0] if fd in self._fds else None
        st = self._files.get(path) if path is not None else None
        if st is not None and st.lost:
            st.redirty(start, start + n)
            self._save()
        return n

    def _stall(self) -> None:
        if self.fsync_delay > 0:
            time.sleep(self.fsync_delay)

    def fsync(self, fd: int) -> None:
        # Only what was written when the fsync was issued counts as made durable by it:
        # bytes written while it stalls may or may not be on the disk.
        issued = os.fstat(fd).st_size
        path = self._fds[fd][0]
        self._stall()
        if self.fail_fsync:
            self._writeback_failed(path, issued)
        else:
            super().fsync(fd)
            st = self._track(path)
            st.synced = max(st.synced, issued)
            st.written_back()
        self._report(fd)

    def close(self, fd: int) -> None:
        self._fds.pop(fd, None)
        super().close(fd)

    def truncate(self, path: str, length: int) -> None:
        path = os.path.abspath(path)
        sample = self._err.setdefault(path, ErrSeq()).sample()  # (its fresh descriptor's)
        if self.fail_fsync:
            self._writeback_failed(path)
        else:
            super().truncate(path, length)
            self._track(path).cut(length)
        err, _ = self._err[path].check_and_advance(sample)
        self._save()
        if err:
            raise OSError(errno.EIO, os.strerror(errno.EIO))

    def replace(self, src: str, dst: str) -> None:
        src, dst = os.path.abspath(src), os.path.abspath(dst)
        super().replace(src, dst)
        st, err = self._files.pop(src, None), self._err.pop(src, None)
        self._files.pop(dst, None)
        self._err.pop(dst, None)
        if st is not None:
            self._files[dst] = st
        if err is not None:
            self._err[dst] = err
        self._save()

    def unlink(self, path: str) -> None:
        path = os.path.abspath(path)
        super().unlink(path)
        self._files.pop(path, None)
        self._err.pop(path, None)
        self._save()

    def fsync_dir(self, path: str) -> None:
        self._stall()
        if self.fail_fsync:
            self._sb.set()
            self._save()
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        super().fsync_dir(path)

    def read_durable(self, path: str) -> bytes:
        """fsync on a fresh descriptor (an error nobody saw is reported to it), then the
        device's content: the lost ranges read as the hole they are, in the real file too
        (DONTNEED dropped the clean pages), then the real O_DIRECT read."""
        path = os.path.abspath(path)
        self._stall()
        fd = self._opened(os.open(path, os.O_RDONLY), path)
        try:
            if self.fail_fsync:
                self._writeback_failed(path)
            else:
                os.fsync(fd)
                done = self._track(path)
                done.synced = os.fstat(fd).st_size
                done.written_back()
            self._report(fd)
        finally:
            self.close(fd)
        st = self._files.get(path)
        if st is not None and st.lost:
            _zero(path, st.lost)
            st.lost = []
        self._save()
        return super().read_durable(path)

    def open_fs(self, path: str) -> int:
        return self._opened(super().open_fs(path), os.path.abspath(path))

    def syncfs(self, fd: int) -> None:
        issued = {p: os.path.getsize(p) for p in self._files if os.path.exists(p)}
        self._stall()
        if self.fail_fsync:
            for p, size in issued.items():
                self._writeback_failed(p, size)
            self._sb.set()
        else:
            super().syncfs(fd)
            for p, size in issued.items():
                self._files[p].synced = max(self._files[p].synced, size)
                self._files[p].written_back()
        self._report(fd, sb=True)

    def lose_unsynced(self) -> None:
        """Power loss: every file this process wrote keeps only what the device holds (cut to
        its written-back length, its lost ranges zeroed); the kernel's memory (page cache,
        errseq) is gone. The caller then dies at once; unsynced directory entries are not
        modelled here."""
        for path, st in self._files.items():
            with contextlib.suppress(OSError):
                if os.path.getsize(path) > st.synced:
                    os.truncate(path, st.synced)
                _zero(path, st.not_on_device())
        self._files.clear()
        self._err.clear()
        self._sb = ErrSeq()
        if self._state_path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._state_path)
            self._saved = ""

    def lost_ranges(self, path: str) -> list[tuple[int, int]]:
        """The byte ranges of `path` the page cache holds but the device does not."""
        st = self._files.get(os.path.abspath(path))
        return [] if st is None else sorted(st.not_on_device())
