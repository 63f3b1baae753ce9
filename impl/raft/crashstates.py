"""Systematic crash states (after ALICE, OSDI'14, and CrashMonkey/ACE, OSDI'18): record the
logical file-system operations a workload makes, then enumerate every state a persistence
model allows the disk to be in after a crash at any point of that sequence.

`RecordingFS` implements the FileIO protocol (impl/raft/fileio.py) over an in-memory tree and
appends one `FsOp` per logical operation to `trace`: MKDIR, CREATE (a new file), TRUNC (an
existing file opened with O_TRUNC), WRITE (inode, offset, bytes), FSYNC (inode), FSYNC_DIR,
RENAME (replace, also across directories), UNLINK, RMDIR, TRUNCATE (ftruncate; the fsync
that FileIO.truncate adds is a separate FSYNC) and SYNCFS. It can inject ENOSPC or EIO at the
n-th write or fsync (`faults`). `RecordingFS.from_image` rebuilds a file system from a crash
image for recovery, and its own trace then shows what recovery changed.

`crash_points(trace)` yields every prefix of the trace: after each operation, and inside each
WRITE (the write(2) persisted only its first m bytes; m at every 512-byte sector boundary of
the file inside the write, and at 1, 12, half and all-but-one byte).

`crash_images(ops, model)` yields every distinct image (directories, files and contents) the
disk may hold after the operations `ops` ran and the power went out. Two models:

STRICT (what POSIX promises, nothing more):
  * data: a file's bytes as of its last fsync (or syncfs) are kept. Since then, its size is
    any size it had since that fsync, and every 512-byte sector below that size holds any
    version the sector had since that fsync (its fsynced content, zeros past the fsynced
    size, or what any later write left there): torn per sector, in any subset and order,
    overwrites undone, O_TRUNC undone;
  * names: a directory operation (mkdir, create, rename, unlink, rmdir) persists iff its
    parent directory was fsynced after it (fsync_dir or syncfs; a rename across directories:
    both of them); otherwise it may be undone,
    in any subset, except that the operations on one name persist as a prefix of their
    program order (a rename is atomic and counts as an operation on both its names). A
    name whose parent directory's own creation is undone is gone with it. fsync of a file
    does not persist its name.
EXT4_ORDERED (ext4 with data=ordered, without assuming auto_da_alloc's extra flushes):
  * names: directory operations persist in program order, as one global prefix; any fsync,
    fsync_dir, syncfs or truncate commits the journal, so every directory operation before
    it persists;
  * data: appends persist in order: a file holds its content as of some point since its last
    fsync (never a torn sector, never zeros in the middle); fsync persists the file's data;
  * a rename persists only together with the data the renamed file had when it was renamed
    (data=ordered writes a replaced file's data before the rename commits).
PAGECACHE (Linux's page cache under write-back errors, on ext4 data=ordered; issue 37). The
two models above are kinder than Linux at a failed fsync: they let a later barrier persist what
the failed one did not. Linux does not, and this model says what it does instead:
  * the page cache holds every file's content in 4 KiB pages, each dirty (written since its
    last write-back), clean and on the disk, or clean and NOT on the disk: a write-back that
    fails marks the pages clean anyway and keeps their new content cached until eviction or
    reboot (Rebello et al., "Can Applications Recover from fsync Failures?", USENIX ATC'20,
    section 4: ext4 and XFS "mark the page clean" and keep it; PostgreSQL's "fsyncgate"
    thread, 2018). Reads (a process restarted without a reboot) see the cached content; a
    later fsync has nothing dirty to write and succeeds; only a later write into such a
    page dirties it again (the whole page is then written back);
  * on the disk such a page keeps what the device had (the fsynced bytes, zeros past the
    fsynced length: the file's size is journalled by the next barrier, a hole stays), at every
    later barrier and at a power loss;
  * not all-or-nothing (`Writeback`, a Fault's variant; the explorer generates them): the
    block layer fails requests per bio, so a write-back may fail SOME of the dirty pages while
    the others reach the disk (each proper prefix written, or a single page failed, in
    (inode, page) order: a syncfs may fail one file and write another); and a failed page in
    a block the file did not have on the disk may read back that block's previous content
    instead of zeros (stale: the file's own bytes a truncate freed, or the last unlinked
    file's; ext4 without delalloc/unwritten extents and data_err=ignore). Sources in
    `Writeback`'s docstring;
  * errors reach callers through errseq counters (lib/errseq.c; Documentation/core-api/
    errseq.rst): one per file (mapping->wb_err) and one per file system (sb->s_wb_err, since
    Linux 5.8), each sampled when a descriptor is opened; fsync(fd) reports a write-back error
    of its file, syncfs(fd) one of its file system, each once per descriptor, and only if it
    happened after the descriptor was opened or was not yet seen by anyone
    (errseq_sample: "If nobody has seen this error yet, then we can be the first"); xfstests
    generic/484 checks the syncfs half;
  * a reboot drops the cache (`drop_caches`: what reads see is the disk again); a power loss
    keeps only the disk; names and the order of appends follow EXT4_ORDERED.
  RecordingFS runs this model live (reads through the cache, errseq per descriptor) and
  records each failed write-back as a WB_ERROR operation (per inode) in the trace; STRICT and
  EXT4_ORDERED ignore WB_ERROR (their kinder semantics), PAGECACHE applies it.
Outside every model: bit rot, lying fsync, lost writes below the fsynced length, garbage (not
zeros) in unwritten sectors other than PAGECACHE's stale blocks (any other file's bytes, at
other offsets), write-back errors of directories and of the journal itself (ext4 aborts the
journal and remounts read-only) other than a failed fsync_dir (`RecordingFS.fsync_dir`: the
journal aborts, nothing after it persists).

An image is deduplicated by `Image.digest`; `Image.protected` gives, per file, how many leading
bytes the model guarantees (its length at the workload's last fsync, less any lost page; a
recovery's own read_durable fsyncs but guarantees nothing): recovery may never cut below it.
"""

from __future__ import annotations

import enum
import errno
import functools
import hashlib
import itertools
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from epochgc.impl.raft.errseq import ErrSeq
from epochgc.impl.raft.fileio import EntryKind

# Paths repeat across millions of crash images: a deep explorer run spent a fifth of its time
# in posixpath.dirname (a few hundred distinct paths per workload).
_dirname = functools.lru_cache(maxsize=65536)(os.path.dirname)

SECTOR = 512
PAGE = 4096  # the page cache's unit of dirtiness and write-back (x86-64, arm64 4K pages)
_DIR = -1  # a namespace value: a directory (files map to their inode number)


class OpKind(enum.Enum):
    MKDIR = "mkdir"
    CREATE = "create"
    TRUNC = "open_trunc"
    WRITE = "write"
    FSYNC = "fsync"
    FSYNC_DIR = "fsync_dir"
    RENAME = "rename"
    UNLINK = "unlink"
    RMDIR = "rmdir"
    TRUNCATE = "truncate"
    SYNCFS = "syncfs"
    WB_ERROR = "writeback error"  # the file's dirty pages failed to reach the disk
    JOURNAL_ABORT = "journal abort"  # a directory's write-back (its journal commit) failed


_DIR_OPS = frozenset({OpKind.MKDIR, OpKind.CREATE, OpKind.RENAME, OpKind.UNLINK, OpKind.RMDIR})


@dataclass(frozen=True)
class FsOp:
    """One logical file-system operation. `path`: the name it acts on (RENAME: the target);
    `src`: a rename's source; `ino`: the file's inode; WRITE: `offset` and `data`;
    TRUNCATE: `length`."""

    kind: OpKind
    path: str = ""
    ino: int = 0
    offset: int = 0
    data: bytes = b""
    src: str = ""
    length: int = 0
    reading: bool = False  # FSYNC: a recovery's read_durable (durable, but guarantees nothing)
    # WB_ERROR: the pages that failed (the file's other dirty pages reached the disk) and, in
    # `data`, what the blocks past the device's old length hold (b"": zeros, a hole)
    pages: frozenset[int] = frozenset()

    def names(self) -> frozenset[str]:
        """The directory entries a directory operation touches."""
        return frozenset(p for p in (self.path, self.src) if p)

    def dirs(self) -> frozenset[str]:
        """The directories a directory operation changes (two for a rename across them)."""
        return frozenset(_dirname(p) for p in self.names())

    def __str__(self) -> str:
        k = self.kind
        if k is OpKind.WRITE:
            return f"write({self.path}#{self.ino}, off={self.offset}, {len(self.data)} B)"
        if k is OpKind.RENAME:
            return f"rename({self.src} -> {self.path})"
        if k is OpKind.TRUNCATE:
            return f"truncate({self.path}, {self.length})"
        if k is OpKind.SYNCFS:
            return "syncfs()"
        if k is OpKind.JOURNAL_ABORT:
            return f"journal abort(fsync_dir {self.path})"
        if k is OpKind.WB_ERROR:
            stale = ", stale blocks" if self.data else ""
            return f"writeback error({self.path}#{self.ino}, pages {sorted(self.pages)}{stale})"
        return f"{k.value}({self.path})"


class FaultKind(enum.Enum):
    ENOSPC = errno.ENOSPC
    EIO = errno.EIO


def pages_of(offset: int, length: int) -> range:
    """The page-cache pages a write of `length` bytes at `offset` dirties."""
    if length <= 0:
        return range(0)
    return range(offset // PAGE, (offset + length - 1) // PAGE + 1)


def on_disk(cached: bytes, disk: bytes, lost: Iterable[int], under: bytes = b"") -> bytes:
    """What the device holds of a file written back with these pages lost: the cached content
    (its size), each lost page as the disk had it: its last written-back content, or, for a
    page past the disk's old last page (a block the file never had: newly allocated), what
    that block held before, `under` (b"": zeros, a hole or an unwritten extent)."""
    out = bytearray(cached)
    edge = -(-len(disk) // PAGE) * PAGE  # (a partly written last page: zeros past its end)
    for p in lost:
        lo, hi = p * PAGE, min((p + 1) * PAGE, len(out))
        if lo < hi:
            old = disk[lo:hi] if lo < edge else under[lo:hi]
            out[lo:hi] = old + bytes(hi - lo - len(old))
    return bytes(out)


def _common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


@dataclass(frozen=True)
class Fault:
    """Fail the `call`-th (0-based) write or fsync-like call (fsync, fsync_dir, syncfs,
    truncate) with `kind`; a failing write first writes `partial` bytes (a short write
    would be continued: the error comes on the next call, so model it as written then
    failed)."""

    on: str  # "write" or "fsync"
    call: int
    kind: FaultKind
    partial: int = 0
    writeback: Writeback | None = None  # an EIO at an fsync-like call: which pages fail

    def __str__(self) -> str:
        wb = f" ({self.writeback})" if self.writeback is not None else ""
        return f"{self.kind.name} at {self.on} call {self.call}{wb}"


class WbMode(enum.Enum):
    ALL = "every dirty page fails"
    PREFIX = "the first k dirty pages reach the disk, the rest fail"
    ONE = "only the k-th dirty page fails"


@dataclass(frozen=True)
class Writeback:
    """Which dirty pages of a failed write-back fail, in (inode, page) order. The block layer
    completes each bio on its own (blk_update_request, block/blk-mq.c; block/blk-core.c
    before 5.16, whose comment said "rq is just carrier of independent bio's and each
    partial completion should be handled separately"), and write-back submits a file's dirty
    pages as several bios (mpage_writepages / ext4_writepages), so some pages may reach the
    disk while others fail; end_page_writeback marks each page clean either way (Rebello et
    al., ATC'20, section 4). Bounded: every proper prefix written, or a single page failed.
    `stale`: a failed page in a block the file did not have on the disk before (newly
    allocated) reads back that block's previous content instead of zeros: the blocks a
    recovery's truncate freed (the file's own old bytes at those offsets) or the last
    unlinked file's. ext4 with nodelalloc or data=writeback, or without unwritten extents,
    allocates at write time and, with data_err=ignore (the default: "Just print an error
    message if an error occurs in a file data buffer", Documentation/admin-guide/ext4.rst;
    commit 5bf5683a33f3, "ext4: add an option to control error handling on file data":
    the journal does not abort), commits the allocation after a failed data write: the
    block's old content becomes the file's. With delalloc and unwritten extents
    (ext4's default since 5.6, XFS) the device holds zeros or the old size instead."""

    mode: WbMode = WbMode.ALL
    k: int = 0
    stale: bool = False

    def failed(self, dirty: Sequence[tuple[int, int]]) -> set[tuple[int, int]]:
        """The (inode, page) pairs that fail, of the dirty ones in order."""
        if self.mode is WbMode.PREFIX:
            return set(dirty[self.k:])
        if self.mode is WbMode.ONE:
            return set(dirty[self.k:self.k + 1])
        return set(dirty)

    def __str__(self) -> str:
        what = {WbMode.ALL: "all pages fail", WbMode.PREFIX: f"first {self.k} pages written",
                WbMode.ONE: f"only page #{self.k} fails"}[self.mode]
        return what + (", stale blocks" if self.stale else "")


class RecordingFS:
    """The FileIO protocol over an in-memory tree, recording every logical operation.

    Paths are normalised with os.path.normpath; `root` and its ancestors exist (durable)
    from the start. `inodes` is the page cache (what reads see, across process restarts
    without a reboot); `disk`, `dirty` and `lost` are the PAGECACHE model's live state (see
    the module docstring), `wb_err` and `sb_err` its errseq counters. A failing fsync-like
    call (a Fault on "fsync") is a failed write-back of the dirty pages it writes."""

    def __init__(self, root: str = "/", faults: Iterable[Fault] = ()) -> None:
        self.ns: dict[str, int] = {}
        self._mkparents(os.path.normpath(root))
        self.inodes: dict[int, bytearray] = {}
        self.trace: list[FsOp] = []
        self._next_ino = 1
        self._fds: dict[int, tuple[int, str, bool]] = {}  # fd -> (inode, path opened, append)
        self._pos: dict[int, int] = {}  # fd -> offset (non-append descriptors)
        self._next_fd = 3
        self.faults = {(f.on, f.call): f for f in faults}
        self.calls = {"write": 0, "fsync": 0}
        self.failed: list[Fault] = []  # faults that fired
        self.fault_pos: list[int] = []  # the trace's length when each fired
        self.disk: dict[int, bytes] = {}  # what the device holds of each file
        self.dirty: dict[int, set[int]] = {}  # pages written since their last write-back
        self.lost: dict[int, set[int]] = {}  # clean in the cache, not on the disk
        self.wb_err: dict[int, ErrSeq] = {}  # per file (mapping->wb_err)
        self.sb_err = ErrSeq()  # the file system's (sb->s_wb_err)
        self._samples: dict[int, tuple[int, int]] = {}  # fd -> (file sample, sb sample)
        # Stale blocks (Writeback.stale): per inode, what the blocks past its disk content
        # held before it got them (its own bytes a truncate freed, or the last unlinked
        # file's), and, once a stale write-back failed, what its lost pages there read back.
        self.freed: dict[int, bytes] = {}
        self.under: dict[int, bytes] = {}
        self._last_unlinked = b""
        # Per fsync-like call (by number): its dirty pages, and whether a failed page of
        # them could read back stale bytes (for the explorer's write-back variants).
        self.dirty_at: list[int] = []
        self.stale_at: list[bool] = []
        # A directory's failed write-back aborted the journal: the file system is read-only,
        # every barrier fails, until a reboot (see fsync_dir).
        self.aborted = False

    @classmethod
    def from_image(cls, image: Image) -> RecordingFS:
        """A file system holding exactly the image (everything durable), trace empty."""
        fs = cls("/")
        for path, content in image.entries:
            if content is None:
                fs.ns[path] = _DIR
            else:
                ino = fs._new_inode()
                fs.inodes[ino] = bytearray(content)
                fs.disk[ino] = bytes(content)
                fs.ns[path] = ino
        return fs

    # ---- the FileIO protocol ---------------------------------------------------------------

    def makedirs(self, path: str) -> None:
        path = os.path.normpath(path)
        missing = []
        p = path
        while p not in self.ns:
            missing.append(p)
            p = os.path.dirname(p)
        if self.ns[p] != _DIR:
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), p)
        if missing:
            self._writable()
        for d in reversed(missing):
            self.ns[d] = _DIR
            self.trace.append(FsOp(OpKind.MKDIR, d))

    def mkdir(self, path: str) -> None:
        path = os.path.normpath(path)
        if path in self.ns:
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path)
        if self.ns.get(os.path.dirname(path)) != _DIR:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        self._writable()
        self.ns[path] = _DIR
        self.trace.append(FsOp(OpKind.MKDIR, path))

    def listdir(self, path: str) -> list[str]:
        path = os.path.normpath(path)
        if self.ns.get(path) != _DIR:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        return sorted(os.path.basename(p) for p in self.ns if p != path
                      and os.path.dirname(p) == path)

    def exists(self, path: str) -> bool:
        return os.path.normpath(path) in self.ns

    def entry_kind(self, path: str) -> EntryKind:
        """(This model has regular files and directories only.)"""
        ino = self.ns.get(os.path.normpath(path))
        if ino is None:
            return EntryKind.MISSING
        return EntryKind.DIRECTORY if ino == _DIR else EntryKind.REGULAR

    def read(self, path: str) -> bytes:
        """Through the page cache (a lost page's cached content included)."""
        return bytes(self.inodes[self._file(path)])

    def read_durable(self, path: str) -> bytes:
        """fsync on a fresh descriptor, then drop the file's clean pages from the cache
        (posix_fadvise DONTNEED: a lost page is clean) and read: what the device holds."""
        path = os.path.normpath(path)
        ino = self._file(path)
        fd = self._open(ino, path, append=False)
        try:
            self._fsync(fd, reading=True)
        finally:
            self.close(fd)
        self.drop_cache(ino)
        return bytes(self.inodes[ino])

    def drop_cache(self, ino: int | None = None) -> None:
        """Evict clean pages (one file's, or all: a reboot's or drop_caches' effect on reads):
        a lost page is read back from the disk."""
        for i in [ino] if ino is not None else list(self.inodes):
            lost = self.lost.pop(i, set())
            if lost and i in self.inodes:
                self.inodes[i] = bytearray(on_disk(bytes(self.inodes[i]),
                                                   self.disk.get(i, b""), lost,
                                                   self.under.get(i, b"")))

    def open_append(self, path: str, create: bool) -> int:
        path = os.path.normpath(path)
        self._writable()
        if create:
            if path in self.ns:
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path)
            ino = self._create(path)
        else:
            ino = self._file(path)
        return self._open(ino, path, append=True)

    def open_trunc(self, path: str) -> int:
        path = os.path.normpath(path)
        self._writable()
        if path in self.ns:
            ino = self._file(path)
            self.freed[ino] = self.disk.get(ino, b"")  # O_TRUNC frees its blocks
            self.inodes[ino] = bytearray()
            self.lost.pop(ino, None)
            self.trace.append(FsOp(OpKind.TRUNC, path, ino))
        else:
            ino = self._create(path)
        return self._open(ino, path, append=False)

    def write(self, fd: int, data: bytes) -> int:
        ino, path, append = self._fds[fd]
        self._writable()
        fault = self._fault("write")
        if fault is not None:
            data = data[: fault.partial]
        buf = self.inodes[ino]
        off = len(buf) if append else self._pos[fd]
        if data:
            if off > len(buf):
                buf.extend(bytes(off - len(buf)))
            buf[off : off + len(data)] = data
            self._dirty(ino, pages_of(off, len(data)))
            self.trace.append(FsOp(OpKind.WRITE, path, ino, off, bytes(data)))
        if not append:
            self._pos[fd] = off + len(data)
        if fault is not None:
            raise OSError(fault.kind.value, os.strerror(fault.kind.value))
        return len(data)

    def fsync(self, fd: int) -> None:
        """Write back the file's dirty pages; report a write-back error of the file once to
        this descriptor (file_check_and_advance_wb_err)."""
        self._fsync(fd)

    def _fsync(self, fd: int, reading: bool = False) -> None:
        ino, path, _ = self._fds[fd]
        self._journal()
        self._note_dirty([ino])
        fault = self._fault("fsync")
        if fault is not None:
            self._writeback_failed([ino], one_file=True, wb=fault.writeback)
        else:
            self._written_back(ino)
            self.trace.append(FsOp(OpKind.FSYNC, path, ino, reading=reading))
        self._report(fd, self.wb_err.setdefault(ino, ErrSeq()), 0)

    def close(self, fd: int) -> None:
        self._fds.pop(fd)
        self._pos.pop(fd, None)
        self._samples.pop(fd, None)

    def size(self, fd: int) -> int:
        return len(self.inodes[self._fds[fd][0]])

    def truncate(self, path: str, length: int) -> None:
        path = os.path.normpath(path)
        ino = self._file(path)
        self._writable()
        fd = self._open(ino, path, append=False)
        try:
            buf = self.inodes[ino]
            if length < len(self.disk.get(ino, b"")):
                self.freed[ino] = self.disk[ino]  # the blocks past the cut are freed
            if length < len(buf):
                del buf[length:]
            else:
                buf.extend(bytes(length - len(buf)))
            keep = -(-length // PAGE)
            self.lost[ino] = {p for p in self.lost.get(ino, set()) if p < keep}
            self.dirty[ino] = {p for p in self.dirty.get(ino, set()) if p < keep}
            if length % PAGE:
                self._dirty(ino, [length // PAGE])  # the partial last page is zeroed
            self.trace.append(FsOp(OpKind.TRUNCATE, path, ino, length=length))
            self.fsync(fd)
        finally:
            self.close(fd)

    def replace(self, src: str, dst: str) -> None:
        src, dst = os.path.normpath(src), os.path.normpath(dst)
        ino = self._file(src)
        if self.ns.get(os.path.dirname(dst)) != _DIR:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), dst)
        if self.ns.get(dst) == _DIR:
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), dst)
        self._writable()
        del self.ns[src]
        self.ns[dst] = ino
        self.trace.append(FsOp(OpKind.RENAME, dst, ino, src=src))

    def unlink(self, path: str) -> None:
        path = os.path.normpath(path)
        ino = self._file(path)
        self._writable()
        del self.ns[path]
        self._last_unlinked = self.disk.get(ino, b"")  # its blocks are free for the next file
        self.trace.append(FsOp(OpKind.UNLINK, path, ino))

    def fsync_dir(self, path: str) -> None:
        """Commit the directory's operations. A failure (EIO) is a failed write-back of the
        journal that holds them: ext4 journals directories (as XFS logs them), and a failed
        write of a commit aborts the journal (fs/jbd2/commit.c: `if (err)
        jbd2_journal_abort(journal, err)`; jbd2_journal_abort's comment in fs/jbd2/journal.c:
        "no further transaction commits will be honoured", a new handle gets -EROFS; ext4's
        default errors=remount-ro, Documentation/admin-guide/ext4.rst; XFS shuts the file
        system down). What follows: the operations stay visible in the cache (the dentries)
        but never reach the device, nor does anything after them; every later barrier fails
        (EIO) and every change is refused (EROFS) until a reboot, whose journal replay leaves
        the device as of a committed transaction: one of the crash states at the abort.
        (Without a journal, ext2 or ext4 -O ^has_journal, the directory's blocks would be
        marked clean and lost while later barriers succeed: outside this model.)"""
        path = os.path.normpath(path)
        if self.ns.get(path) != _DIR:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        self._journal()
        self._note_dirty([])
        f = self._fault("fsync")
        if f is not None:
            if f.kind is FaultKind.EIO:
                self.aborted = True
                self.trace.append(FsOp(OpKind.JOURNAL_ABORT, path))
            raise OSError(f.kind.value, os.strerror(f.kind.value))
        self.trace.append(FsOp(OpKind.FSYNC_DIR, path))

    def open_fs(self, path: str) -> int:
        """A descriptor for `syncfs` (its errseq samples taken now)."""
        path = os.path.normpath(path)
        if self.ns.get(path) != _DIR:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        return self._open(_DIR, path, append=False)

    def syncfs(self, fd: int) -> None:
        """Write back every dirty page; report a write-back error of the file system (any
        file's, any caller's) once to this descriptor, if it came after the descriptor was
        opened or nobody had seen it then (sb->s_wb_err, Linux >= 5.8)."""
        _, path, _ = self._fds[fd]
        self._journal()
        self._note_dirty(list(self.inodes))
        fault = self._fault("fsync")
        if fault is not None:
            self._writeback_failed(list(self.inodes), wb=fault.writeback)
        else:
            for ino in list(self.inodes):
                self._written_back(ino)
            self.trace.append(FsOp(OpKind.SYNCFS, path))
        self._report(fd, self.sb_err, 1)

    def other_tenant_syncfs(self, fail: bool) -> bool:
        """Another process on this file system (a second node, a backup agent, `sync -f`)
        calls syncfs on its own descriptor; `fail`: the write-back of every dirty page fails
        (the device's fault, not the caller's). Returns whether it saw an error."""
        fd = self.open_fs("/")
        try:
            if fail:
                self._writeback_failed(list(self.inodes))
            else:
                for ino in list(self.inodes):
                    self._written_back(ino)
                self.trace.append(FsOp(OpKind.SYNCFS, "/"))
            try:
                self._report(fd, self.sb_err, 1)
            except OSError:
                return True
            return False
        finally:
            self.close(fd)

    # ---- beyond the protocol (what a node's own code does with `os` directly) -------------

    def rmdir(self, path: str) -> None:
        """Remove an empty directory."""
        path = os.path.normpath(path)
        if self.ns.get(path) != _DIR:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        if self.listdir(path):
            raise OSError(errno.ENOTEMPTY, os.strerror(errno.ENOTEMPTY), path)
        self._writable()
        del self.ns[path]
        self.trace.append(FsOp(OpKind.RMDIR, path))

    def files(self) -> dict[str, bytes]:
        """Every file's path and current content."""
        return {p: bytes(self.inodes[i]) for p, i in self.ns.items() if i != _DIR}

    # ---- internals --------------------------------------------------------------------------

    def _mkparents(self, path: str) -> None:
        while True:
            self.ns[path] = _DIR
            parent = os.path.dirname(path)
            if parent == path:
                return
            path = parent

    def _file(self, path: str) -> int:
        ino = self.ns.get(os.path.normpath(path))
        if ino is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        if ino == _DIR:
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        return ino

    def _new_inode(self) -> int:
        ino = self._next_ino
        self._next_ino += 1
        return ino

    def _create(self, path: str) -> int:
        if self.ns.get(os.path.dirname(path)) != _DIR:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        ino = self._new_inode()
        self.inodes[ino] = bytearray()
        self.disk[ino] = b""
        self.freed[ino] = self._last_unlinked
        self.ns[path] = ino
        self.trace.append(FsOp(OpKind.CREATE, path, ino))
        return ino

    def _open(self, ino: int, path: str, append: bool) -> int:
        fd = self._next_fd
        self._next_fd += 1
        self._fds[fd] = (ino, path, append)
        self._pos[fd] = 0
        file_sample = self.wb_err.setdefault(ino, ErrSeq()).sample() if ino != _DIR else 0
        self._samples[fd] = (file_sample, self.sb_err.sample())
        return fd

    def _dirty(self, ino: int, pages: Iterable[int]) -> None:
        d, lost = self.dirty.setdefault(ino, set()), self.lost.get(ino, set())
        for p in pages:
            d.add(p)
            lost.discard(p)  # dirty again: its whole cached content is written back next

    def _written_back(self, ino: int) -> None:
        """A successful write-back: the dirty pages and the size reach the device."""
        self.dirty.pop(ino, None)
        if ino in self.inodes:
            self.disk[ino] = on_disk(bytes(self.inodes[ino]), self.disk.get(ino, b""),
                                     self.lost.get(ino, ()), self.under.get(ino, b""))

    def _writeback_failed(self, inos: Iterable[int], one_file: bool = False,
                          wb: Writeback | None = None) -> None:
        """The dirty pages of these files did not reach the disk (`wb`: which of them; by
        default all): marked clean, kept cached (lost), the error recorded in each such
        file's errseq and the file system's (an fsync of one file with nothing dirty fails
        on the device's cache flush: its own). The others reached the disk."""
        inos = list(inos)
        dirty = [(i, p) for i in inos for p in sorted(self.dirty.get(i, ()))]
        failed = (wb or Writeback()).failed(dirty)
        for ino in inos:
            d = self.dirty.pop(ino, set())
            f = {p for i, p in failed if i == ino}
            if d:
                stale = b""
                if wb is not None and wb.stale and f and self._stale_pages(ino, f):
                    stale = self.under[ino] = self.freed[ino]
                lost = self.lost.setdefault(ino, set())
                lost.update(f)
                if d - f:  # these pages (and the size) reached the disk
                    self.disk[ino] = on_disk(bytes(self.inodes[ino]), self.disk.get(ino, b""),
                                             lost, self.under.get(ino, b""))
                paths = [p for p, i in self.ns.items() if i == ino]
                self.trace.append(FsOp(OpKind.WB_ERROR, paths[0] if paths else "", ino,
                                       data=stale, pages=frozenset(f)))
            if f or one_file:
                self.wb_err.setdefault(ino, ErrSeq()).set()
        self.sb_err.set()

    def _stale_pages(self, ino: int, pages: Iterable[int]) -> bool:
        """Whether any of these pages lies in a block the file did not have on the disk
        (past its disk content's last page) where the freed blocks held nonzero bytes."""
        edge = -(-len(self.disk.get(ino, b"")) // PAGE)
        old = self.freed.get(ino, b"")
        return any(p >= edge and any(old[p * PAGE:(p + 1) * PAGE]) for p in pages)

    def _note_dirty(self, inos: Sequence[int]) -> None:
        """Record, for the fsync-like call about to be made, its dirty pages and whether a
        stale block could show (Writeback variants are generated from these)."""
        self.dirty_at.append(sum(len(self.dirty.get(i, ())) for i in inos))
        self.stale_at.append(any(self._stale_pages(i, self.dirty.get(i, ())) for i in inos))

    def _report(self, fd: int, seq: ErrSeq, which: int) -> None:
        samples = list(self._samples[fd])
        err, samples[which] = seq.check_and_advance(samples[which])
        self._samples[fd] = (samples[0], samples[1])
        if err:
            raise OSError(errno.EIO, os.strerror(errno.EIO))

    def _fault(self, on: str) -> Fault | None:
        n = self.calls[on]
        self.calls[on] = n + 1
        f = self.faults.get((on, n))
        if f is not None:
            self.failed.append(f)
            self.fault_pos.append(len(self.trace))
        return f

    def _writable(self) -> None:
        """After a journal abort the file system is read-only (errors=remount-ro)."""
        if self.aborted:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    def _journal(self) -> None:
        """After a journal abort every barrier fails (jbd2 returns EIO to commits)."""
        if self.aborted:
            raise OSError(errno.EIO, os.strerror(errno.EIO))


# ---- crash points ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CrashPoint:
    """The operations that ran before the power went out: `ops` (the trace's first `at`
    operations, then, if `partial` is set, the next WRITE cut to its first `partial` bytes)."""

    at: int
    partial: int | None
    ops: tuple[FsOp, ...]

    def __str__(self) -> str:
        if self.partial is None:
            return f"after op {self.at}"
        return f"inside op {self.at} ({self.ops[-1]}) after {self.partial} B"


def write_cuts(op: FsOp) -> list[int]:
    """Where a crash inside this WRITE may leave it: every sector boundary of the file inside
    the written range, and 1, 12 (a record header), half and all but one byte."""
    n = len(op.data)
    cuts = {1, 12, n // 2, n - 1}
    first = (op.offset // SECTOR + 1) * SECTOR
    cuts.update(b - op.offset for b in range(first, op.offset + n, SECTOR))
    return sorted(c for c in cuts if 0 < c < n)


def crash_points(trace: Sequence[FsOp], start: int = 0) -> Iterator[CrashPoint]:
    """Every prefix of the trace from `start` operations on, and every crash inside each
    WRITE after that."""
    for k in range(start, len(trace) + 1):
        yield CrashPoint(k, None, tuple(trace[:k]))
        if k < len(trace) and trace[k].kind is OpKind.WRITE:
            op = trace[k]
            for m in write_cuts(op):
                yield CrashPoint(k, m, (*trace[:k], replace(op, data=op.data[:m])))


# ---- persistence models -------------------------------------------------------------------


class Model(enum.Enum):
    STRICT = "strict"
    EXT4_ORDERED = "ext4-ordered"
    PAGECACHE = "pagecache"  # EXT4_ORDERED plus Linux's write-back error semantics


@dataclass(frozen=True)
class Image:
    """A crash image: every path (sorted) with its content (None: a directory), and for each
    file the number of leading bytes the model guarantees (its fsynced length)."""

    entries: tuple[tuple[str, bytes | None], ...]
    protected: tuple[tuple[str, int], ...]

    @property
    def digest(self) -> str:
        h = hashlib.sha256()
        for path, content in self.entries:
            h.update(path.encode() + b"\0")
            h.update(b"D" if content is None else b"F%d:" % len(content) + content)
        for path, n in self.protected:
            h.update(b"P" + path.encode() + b"\0%d" % n)
        return h.hexdigest()

    def files(self) -> dict[str, bytes]:
        return {p: c for p, c in self.entries if c is not None}

    def describe(self) -> str:
        out = []
        for p, c in self.entries:
            out.append(p.rstrip("/") + "/" if c is None else f"{p} ({len(c)} B, sha {_short(c)})")
        return ", ".join(out)


def _short(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()[:8]


@dataclass
class _Inode:
    durable: bytes = b""
    states: list[tuple[int, bytes]] = field(default_factory=list)  # (op position, content)
    cur: bytes = b""
    truncated: bool = False  # opened with O_TRUNC since its last fsync
    # PAGECACHE only: pages written since their last write-back, pages lost (clean in the
    # cache, not on the disk).
    dirty: set[int] = field(default_factory=set)
    lost: set[int] = field(default_factory=set)
    under: bytes = b""  # what its lost pages past the disk content read back (stale blocks)
    # The leading bytes a barrier of the workload made durable (a recovery's read_durable
    # fsyncs too, but what it reads may be a torn tail it then cuts: it protects nothing).
    protected: int = 0

    def sync(self, pagecache: bool = False, reading: bool = False) -> None:
        if pagecache:
            self.durable = on_disk(self.cur, self.durable, self.lost, self.under)
            self.dirty = set()
        else:
            self.durable = self.cur
        if not reading:
            self.protected = (_common_prefix(self.durable, self.cur) if pagecache
                              else len(self.durable))
        elif self.truncated:
            self.protected = 0
        self.protected = min(self.protected, len(self.durable))
        self.states, self.truncated = [], False

    def wb_error(self, failed: frozenset[int], under: bytes) -> None:
        """The `failed` dirty pages did not reach the disk (the others did): nothing written
        since the last barrier can persist any more but what reached the disk now, except
        through a later write that dirties its page again."""
        if under:
            self.under = under
        self.lost |= failed & self.dirty
        if self.dirty - failed:
            self.durable = on_disk(self.cur, self.durable, self.lost, self.under)
        self.dirty = set()
        self.states = []

    def written(self, pos: int, pages: Iterable[int], pagecache: bool) -> None:
        if pagecache:
            for p in pages:
                self.dirty.add(p)
                self.lost.discard(p)
            self.states.append((pos, on_disk(self.cur, self.durable, self.lost, self.under)))
        else:
            self.states.append((pos, self.cur))

    def versions(self) -> list[tuple[int, bytes]]:
        return [(-1, self.durable), *self.states]


@dataclass
class _Replay:
    """The model's view of a prefix: directory operations with their positions, per inode
    its durable content and its states since, and the barriers."""

    initial: dict[str, int]
    dirops: list[tuple[int, FsOp]] = field(default_factory=list)
    inodes: dict[int, _Inode] = field(default_factory=dict)
    dir_synced: dict[str, int] = field(default_factory=dict)  # dir -> position of its fsync
    syncfs_at: int = -1
    barrier_at: int = -1  # last fsync-like call of any kind (an ext4 journal commit)


def _replay(ops: Sequence[FsOp], initial: dict[str, int], pagecache: bool = False) -> _Replay:
    r = _Replay(dict(initial))
    for pos, op in enumerate(ops):
        k = op.kind
        if k in _DIR_OPS:
            r.dirops.append((pos, op))
            if k is OpKind.CREATE:
                r.inodes[op.ino] = _Inode()
            continue
        if k is OpKind.SYNCFS:
            for ino in r.inodes.values():
                ino.sync(pagecache)
            r.syncfs_at = r.barrier_at = pos
            continue
        if k is OpKind.FSYNC_DIR:
            r.dir_synced[op.path] = pos
            r.barrier_at = pos
            continue
        if k is OpKind.JOURNAL_ABORT:
            continue  # (nothing follows it: the live file system refuses every change)
        node = r.inodes.setdefault(op.ino, _Inode())
        if k is OpKind.WB_ERROR:
            if pagecache:  # (the kinder models: a later barrier persists these pages)
                node.wb_error(op.pages, op.data)
            continue
        if k is OpKind.FSYNC:
            node.sync(pagecache, op.reading)
            r.barrier_at = pos
            continue
        pages: Iterable[int] = ()
        if k is OpKind.TRUNC:
            node.cur = b""
            node.truncated = True
            node.lost, node.dirty = set(), set()
        elif k is OpKind.WRITE:
            cur = node.cur
            if op.offset > len(cur):
                cur += bytes(op.offset - len(cur))
            node.cur = cur[: op.offset] + op.data + cur[op.offset + len(op.data) :]
            pages = pages_of(op.offset, len(op.data))
        elif k is OpKind.TRUNCATE:
            node.cur = node.cur[: op.length] + bytes(max(0, op.length - len(node.cur)))
            keep = -(-op.length // PAGE)
            node.lost = {p for p in node.lost if p < keep}
            node.dirty = {p for p in node.dirty if p < keep}
            pages = [op.length // PAGE] if op.length % PAGE else []
            r.barrier_at = pos  # FileIO.truncate fsyncs: a journal commit
        node.written(pos, pages, pagecache)
    return r


def _namespace(initial: dict[str, int], ops: Iterable[FsOp]) -> dict[str, int]:
    """Apply directory operations in order; an operation whose parent directory is missing
    (its creation undone) is unreachable and has no effect."""
    ns = dict(initial)
    for op in ops:
        if any(ns.get(d) != _DIR for d in op.dirs()):
            continue
        k = op.kind
        if k is OpKind.MKDIR:
            ns[op.path] = _DIR
        elif k is OpKind.CREATE:
            ns[op.path] = op.ino
        elif k is OpKind.RENAME:
            if ns.get(op.src) == op.ino:
                del ns[op.src]
                ns[op.path] = op.ino
        elif k in (OpKind.UNLINK, OpKind.RMDIR):
            ns.pop(op.path, None)
    # Drop everything below a directory that is gone (its removal or creation undone).
    return {p: v for p, v in ns.items() if _reachable(p, ns)}


def _reachable(path: str, ns: dict[str, int]) -> bool:
    parent = _dirname(path)
    while parent != path:
        if ns.get(parent) != _DIR:
            return False
        path, parent = parent, _dirname(parent)
    return True


def _sector(content: bytes, s: int) -> bytes:
    chunk = content[s * SECTOR : (s + 1) * SECTOR]
    return chunk + bytes(SECTOR - len(chunk))


def _strict_contents(node: _Inode) -> list[bytes]:
    """Every content the STRICT model allows an inode after a crash (deduplicated)."""
    versions = [c for _, c in node.versions()]
    if len(versions) == 1:
        return versions
    out: dict[bytes, None] = {}
    for size in sorted({len(c) for c in versions}):
        n = -(-size // SECTOR)
        per_sector = [sorted({_sector(c, s) for c in versions}) for s in range(n)]
        for combo in itertools.product(*per_sector):
            out[b"".join(combo)[:size]] = None
    return list(out)


def _protected(node: _Inode) -> int:
    return 0 if node.truncated else node.protected


class TooManyStates(Exception):
    """A crash point allows more states than the caller's budget: make the workload smaller."""


def crash_images(
    ops: Sequence[FsOp], model: Model, initial_dirs: Iterable[str] = ("/",), budget: int = 20000
) -> Iterator[Image]:
    """Every image `model` allows after `ops` (duplicates possible across name choices; the
    caller deduplicates by digest). Raises TooManyStates past `budget` images."""
    initial: dict[str, int] = {}
    for d in initial_dirs:
        p = os.path.normpath(d)
        while True:
            initial[p] = _DIR
            if os.path.dirname(p) == p:
                break
            p = os.path.dirname(p)
    pagecache = model is Model.PAGECACHE
    r = _replay(ops, initial, pagecache)
    count = 0
    for ns, floors in _name_choices(r, model):
        files = sorted((p, v) for p, v in ns.items() if v != _DIR)
        choices: list[list[bytes]] = []
        for _, ino in files:
            node = r.inodes.get(ino, _Inode())
            if model is Model.STRICT:
                choices.append(_strict_contents(node))
            else:
                vs = node.versions()
                floor = floors.get(ino, -1)
                # the latest version at or before the rename, and every later one
                lo = max([i for i, (pos, _) in enumerate(vs) if pos < floor] or [0])
                choices.append(list(dict.fromkeys(c for _, c in vs[lo:])))
        dirs = tuple((p, None) for p, v in ns.items() if v == _DIR)
        protected = tuple((p, _protected(r.inodes.get(ino, _Inode()))) for p, ino in files)
        for combo in itertools.product(*choices):
            count += 1
            if count > budget:
                raise TooManyStates(f"more than {budget} crash states after {len(ops)} ops")
            entries = sorted([*dirs, *zip((p for p, _ in files), combo, strict=True)],
                             key=lambda e: e[0])
            yield Image(tuple(entries), protected)


def image_ops(image: Image) -> list[FsOp]:
    """Operations that build `image` durably on a file system holding only "/", numbering
    inodes as RecordingFS.from_image does: followed by a trace of a RecordingFS made with
    from_image, they give the crash points of whatever ran on that image (a recovery)."""
    ops: list[FsOp] = []
    ino = 0
    for path, content in image.entries:
        if content is None:
            ops.append(FsOp(OpKind.MKDIR, path))
        else:
            ino += 1
            ops.append(FsOp(OpKind.CREATE, path, ino))
            if content:
                ops.append(FsOp(OpKind.WRITE, path, ino, 0, content))
    ops.append(FsOp(OpKind.SYNCFS, "/"))
    return ops


def _name_choices(r: _Replay, model: Model) -> Iterator[tuple[dict[str, int], dict[int, int]]]:
    """(namespace, per inode the position of the last rename of it that persisted)."""
    if model in (Model.EXT4_ORDERED, Model.PAGECACHE):
        first_optional = next(
            (i for i, (pos, _) in enumerate(r.dirops) if pos > r.barrier_at), len(r.dirops))
        for cut in range(first_optional, len(r.dirops) + 1):
            kept = [op for _, op in r.dirops[:cut]]
            yield _namespace(r.initial, kept), _rename_floors(r.dirops[:cut])
        return
    mandatory: list[bool] = []
    for pos, op in r.dirops:
        # (a rename across directories is durable once both are fsynced)
        mandatory.append(pos < r.syncfs_at
                         or all(pos < r.dir_synced.get(d, -1) for d in op.dirs()))
    for keep in _prefix_closed(r.dirops, mandatory):
        kept = [op for (_, op), k in zip(r.dirops, keep, strict=True) if k]
        yield _namespace(r.initial, kept), {}


def _rename_floors(dirops: Sequence[tuple[int, FsOp]]) -> dict[int, int]:
    floors: dict[int, int] = {}
    for pos, op in dirops:
        if op.kind is OpKind.RENAME:
            floors[op.ino] = pos
    return floors


def _prefix_closed(
    dirops: Sequence[tuple[int, FsOp]], mandatory: Sequence[bool]
) -> Iterator[tuple[bool, ...]]:
    """Every subset of the optional operations in which, for each name, the operations kept
    are a prefix of that name's operations (mandatory ones always kept)."""

    def go(i: int, excluded: frozenset[str], acc: tuple[bool, ...]) -> Iterator[tuple[bool, ...]]:
        if i == len(dirops):
            yield acc
            return
        op = dirops[i][1]
        names = op.names()
        if mandatory[i]:
            yield from go(i + 1, excluded, (*acc, True))
            return
        if not names & excluded:
            yield from go(i + 1, excluded, (*acc, True))
        yield from go(i + 1, excluded | names, (*acc, False))

    yield from go(0, frozenset(), ())
