"""Local-directory backend: keys are relative paths under a root directory.

Symbolic links are never followed and never listed as objects: every directory below the
root is opened one component at a time with O_NOFOLLOW relative to its parent's descriptor,
so neither a link planted in the tree (`level_zero/data/004 -> /elsewhere`) nor one swapped
in between a listing and a delete can take a read, a write, a delete or a directory removal
outside the root. Links and other non-regular files met while listing are reported in the
page's `refused` list instead.

Listing walks only the directories on the way to `start_after` and stops as soon as a page
is full. A listing that continues from the last key of the previous page resumes the same
walk (a cursor), so listing a directory of n keys in pages costs O(n), not O(n^2/page).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from epochgc.impl.store.base import (
    MAX_PAGE_SIZE,
    DeleteResult,
    ListPage,
    NotAnObject,
    ObjectInfo,
    ObjectStore,
    Outcome,
    SendDeadline,
    Stamp,
    StoreError,
    Versioned,
    check_batch,
    check_key,
    require_version,
    send_clock,
)

# Temp files of in-progress atomic puts; never listed as objects.
_TMP_PREFIX = ".epochgc-tmp-"
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
# Issue 29: listing never recurses without bound. Keys under the data prefix are
# `level_zero/data/NNN/EPOCH/name`, so a directory inside an epoch directory is malformed:
# refused (named, never descended). Anywhere else a tree deeper than _MAX_DIRS levels is.
_DATA = "level_zero/data/"
_DATA_DIRS = 4  # level_zero/data/NNN/EPOCH/
_MAX_DIRS = 16
# Prefixes whose keys are flat (`_cluster/gc/rounds/ROUND.json`): a directory in one is
# refused, named (i41y: a record replaced by a directory was "none recorded": an empty
# directory lists nothing).
_FLAT = ("_cluster/gc/rounds/",)
_CURSORS = 32  # suspended listings kept per store (each holds a few directory descriptors)
# Deletes never remove the top two levels of the tree (`level_zero/data`, `_cluster/gc`):
# they are the store's layout, outside what a GC round may change.
_KEEP_DEPTH = 2
_PRUNERS = 2  # rmdirs in flight at once per delete batch while pruning (see LocalStore._prune)

_LATE = ("not sent: past the time its batch was told to go on for (the round may be "
         "recovered by now)")
# A walk yields objects and refused entries: (key, info, None) or (key, None, why).
_Item = tuple[str, ObjectInfo | None, str | None]


class SymlinkRefused(StoreError):
    """A path component is a symbolic link (or not a directory where one is needed)."""


class LocalStore(ObjectStore):
    def __init__(self, root: str | os.PathLike[str], *, create: bool = False,
                 prune_concurrency: int = _PRUNERS) -> None:
        """`prune_concurrency`: rmdirs in flight at once while pruning (`_prune`); 1 prunes
        on the calling thread and starts no thread (the conformance harness's inline,
        deterministic scheduling)."""
        if prune_concurrency < 1:
            raise ValueError(f"prune_concurrency must be >= 1, not {prune_concurrency}")
        self.root = Path(root).absolute()
        self.prune_concurrency = prune_concurrency
        if create:
            self.root.mkdir(parents=True, exist_ok=True)
        if not self.root.is_dir():
            raise StoreError(f"store directory {self.root} does not exist or is not a directory")
        if not os.access(self.root, os.R_OK | os.X_OK):
            raise StoreError(f"store directory {self.root} is not readable")
        self._root = str(self.root)  # hot paths join strings: pathlib costs ~2x per key
        self._cursors: OrderedDict[tuple[str, str], Iterator[_Item]] = OrderedDict()
        self._lock = threading.Lock()
        self._pruners: ThreadPoolExecutor | None = None  # started by the first prune
        self._deadline = SendDeadline()  # `send_by`'s bound, per thread

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (_reopen, (str(self.root), self.prune_concurrency))

    def describe(self) -> str:
        return f"local directory {self.root}"

    def send_by(self, deadline: float | None) -> contextlib.AbstractContextManager[None]:
        """No write or unlink of this thread is made once `send_clock()` passes `deadline`
        (StoreError; in a delete batch, that key's error): a call is not queued or retried
        here, but the thread may stall between its "go" and its call (SIGSTOP, a frozen
        container, a hung NFS server under a shared directory) and must not write or delete
        when it resumes, after a recovery read the round back (review rev38n finding 2)."""
        return self._deadline.bounded(deadline)

    def _refuse_late(self, at: float | None) -> None:
        """Called right before the call that makes a write or delete visible (a rename,
        link or unlink): StoreError once the thread's deadline (`at`) has passed."""
        if at is not None and send_clock() > at:
            raise StoreError(_LATE)

    # --- descriptors: the only way any path below the root is reached ---

    def _open_root(self) -> int:
        return os.open(self._root, _DIR & ~os.O_NOFOLLOW)  # the root is the operator's choice

    def _open_dir(self, rel: str, create: bool = False) -> int:
        """A descriptor of directory `rel` ('' is the root), reached without following a
        symbolic link. FileNotFoundError if absent; SymlinkRefused if a component is a
        link or a non-directory."""
        fd = self._open_root()
        for part in rel.split("/") if rel else ():
            fd = _open_child(fd, part, rel, create)  # consumes (closes) the parent's fd
        return fd

    # --- single objects ---

    def put(self, key: str, data: bytes) -> None:
        parent, _, name = check_key(key).rpartition("/")
        at = self._deadline.at
        for _ in range(3):  # a concurrent delete may remove an emptied parent directory
            try:
                fd = self._open_dir(parent, create=True)
            except FileNotFoundError:
                continue
            except OSError as e:
                raise StoreError(f"cannot write {key!r} in {self.describe()}: {e}") from e
            tmp = f"{_TMP_PREFIX}{uuid.uuid4().hex}"
            try:
                _write_new(fd, tmp, data)
                self._refuse_late(at)
                # rename replaces a link at `name` rather than writing through it
                os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
                return
            except FileNotFoundError:
                continue
            except (OSError, StoreError) as e:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=fd)
                if isinstance(e, StoreError):
                    raise
                raise StoreError(f"cannot write {key!r} in {self.describe()}: {e}") from e
            finally:
                os.close(fd)
        raise StoreError(f"cannot write {key!r} in {self.describe()}: directory keeps vanishing")

    def put_if_absent(self, key: str, data: bytes) -> bool:
        return self.create_if_absent(key, data) is not None

    # Conditional writes (issue 38 item 3). A create is a hard link (atomic: link() fails
    # if the name exists). A replace or delete compares the file's version and acts under
    # an exclusive flock(2) of its directory, which every conditional replace and delete
    # of a key in it takes: the compare and the rename/unlink are one step for them, and a
    # create cannot interleave (the name exists throughout). Advisory: a plain `put` of the
    # same key is not excluded (nothing writes the lease that way). flock locks are
    # per open file description, so threads of one process exclude each other too.

    def require_conditional_writes(self) -> None:
        pass

    def create_if_absent(self, key: str, data: bytes) -> str | None:
        """Written aside, then hard-linked into place: of two writers exactly one wins,
        and readers never see a partial file. The version is the new file's."""
        parent, _, name = check_key(key).rpartition("/")
        try:
            fd = self._open_dir(parent, create=True)
        except OSError as e:
            raise StoreError(f"cannot write {key!r} in {self.describe()}: {e}") from e
        tmp = f"{_TMP_PREFIX}{uuid.uuid4().hex}"
        try:
            _write_new(fd, tmp, data)
            st = os.stat(tmp, dir_fd=fd, follow_symlinks=False)
            self._refuse_late(self._deadline.at)  # tmp removed below
            try:
                os.link(tmp, name, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
            except FileExistsError:
                return None
            # link() changes the inode's ctime only: its (inode, mtime, size) version stands
            return file_version(st)
        except OSError as e:
            raise StoreError(f"cannot write {key!r} in {self.describe()}: {e}") from e
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=fd)
            os.close(fd)

    def replace_if_match(self, key: str, data: bytes, version: str) -> str | None:
        require_version(key, version)
        parent, _, name = check_key(key).rpartition("/")
        with self._locked_dir(key, parent) as fd:
            if _version_at(fd, name) != version:
                return None
            tmp = f"{_TMP_PREFIX}{uuid.uuid4().hex}"
            try:
                _write_new(fd, tmp, data)
                st = os.stat(tmp, dir_fd=fd, follow_symlinks=False)
                self._refuse_late(self._deadline.at)
                os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
            except (OSError, StoreError) as e:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=fd)
                if isinstance(e, StoreError):
                    raise
                raise StoreError(f"cannot write {key!r} in {self.describe()}: {e}") from e
            return file_version(st)

    def delete_if_match(self, key: str, version: str) -> Outcome:
        require_version(key, version)
        parent, _, name = check_key(key).rpartition("/")
        with self._locked_dir(key, parent) as fd:
            now = _version_at(fd, name)
            if now is None:
                return Outcome.ABSENT
            if now != version:
                return Outcome.CHANGED
            self._refuse_late(self._deadline.at)
            try:
                os.unlink(name, dir_fd=fd)  # never follows a link
            except FileNotFoundError:
                return Outcome.ABSENT
            except OSError as e:
                raise StoreError(f"cannot delete {key!r} in {self.describe()}: {e}") from e
            return Outcome.DELETED

    def _regular(self, f: int, key: str) -> None:
        """Close `f` and raise NotAnObject unless it is a regular file; checked on the raw
        descriptor: `os.fdopen` of a directory raised `IsADirectoryError: ... : 4` (the
        descriptor's number, not the key: issue 41 item 12)."""
        try:
            regular = stat.S_ISREG(os.fstat(f).st_mode)
        except OSError:
            os.close(f)
            raise
        if not regular:
            os.close(f)
            raise NotAnObject(f"{key!r} in {self.describe()} is not a regular file")

    def get_versioned(self, key: str, limit: int) -> Versioned | None:
        """One open file: its version (fstat) and its bytes are the same file's (a
        replace renames a new inode into place, never writes in place)."""
        parent, _, name = check_key(key).rpartition("/")
        try:
            fd = self._open_dir(parent)
            try:
                f = os.open(name, _READ, dir_fd=fd)
            finally:
                os.close(fd)
        except FileNotFoundError:
            return None
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENXIO):
                raise NotAnObject(f"{key!r} in {self.describe()} is not a regular file "
                                  "(a link is never followed)") from None
            raise StoreError(f"cannot read {key!r} in {self.describe()}: {e}") from e
        self._regular(f, key)
        with os.fdopen(f, "rb") as fh:
            st = os.fstat(fh.fileno())
            os.set_blocking(fh.fileno(), True)
            try:
                return Versioned(fh.read(limit), file_version(st))
            except OSError as e:
                raise StoreError(f"cannot read {key!r} in {self.describe()}: {e}") from e

    @contextlib.contextmanager
    def _locked_dir(self, key: str, parent: str) -> Iterator[int]:
        try:
            fd = self._open_dir(parent)
        except FileNotFoundError:
            fd = self._open_dir(parent, create=True)  # absent: compares as absent below
        except OSError as e:
            raise StoreError(f"cannot open the directory of {key!r} in {self.describe()}: "
                             f"{e}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield fd
        finally:
            os.close(fd)  # closing the last descriptor releases the lock

    def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        parent, _, name = check_key(key).rpartition("/")
        try:
            fd = self._open_dir(parent)
            try:
                # O_NONBLOCK: opening a FIFO for reading otherwise blocks until a writer
                # comes (forever); its type is checked before anything is read.
                f = os.open(name, _READ, dir_fd=fd)
            finally:
                os.close(fd)
            self._regular(f, key)
            with os.fdopen(f, "rb") as fh:
                os.set_blocking(fh.fileno(), True)
                if start:
                    fh.seek(start)
                if end is None:
                    return fh.read()
                return fh.read(max(0, end - (start or 0)))
        except FileNotFoundError:
            raise StoreError(f"{key!r} does not exist in {self.describe()}") from None
        except OSError as e:
            if e.errno == errno.ELOOP:  # the parents were opened above: the key itself
                raise NotAnObject(
                    f"cannot read {key!r} in {self.describe()}: a symbolic link, never followed"
                ) from None
            if e.errno in (errno.ENXIO, errno.EISDIR):  # a socket; a directory (fdopen)
                raise NotAnObject(f"{key!r} in {self.describe()} is not a regular file") from None
            raise StoreError(f"cannot read {key!r} in {self.describe()}: {e}") from e

    def head(self, key: str) -> ObjectInfo | None:
        parent, _, name = check_key(key).rpartition("/")
        try:
            fd = self._open_dir(parent)
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            finally:
                os.close(fd)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise StoreError(f"cannot stat {key!r} in {self.describe()}: {e}") from e
        if not stat.S_ISREG(st.st_mode):
            return None  # a link or a directory is not an object
        return ObjectInfo(key, st.st_size, st.st_mtime, file_version(st))

    # The kernel stamps a file's mtime from its coarse clock (`current_time()`,
    # `ktime_get_coarse_real_ts64`: the time at the last tick;
    # https://docs.kernel.org/core-api/timekeeping.html: the coarse variants "are quicker
    # than the non-coarse versions, but less accurate"): the write happened by mtime plus
    # one tick (<= 10 ms at HZ >= 100).
    _MTIME_LAG_S = 0.01

    def stamp(self, key: str) -> Stamp | None:
        """The file's mtime against this host's clock, which stamped it (a directory on
        this host's filesystem; a network filesystem's server stamps it with its own)."""
        info = self.head(key)
        if info is None:
            return None
        return Stamp(info.mtime + self._MTIME_LAG_S, time.time())

    # --- listing ---

    def list_page(
        self,
        prefix: str,
        start_after: str | None = None,
        limit: int = MAX_PAGE_SIZE,
        until: str | None = None,
    ) -> ListPage:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        after = start_after or ""
        with self._lock:
            walk = self._cursors.pop((prefix, after), None)
        if walk is None:
            walk = self._walk_prefix(prefix, after)
        out: list[ObjectInfo] = []
        refused: list[tuple[str, str]] = []
        try:
            for key, info, why in walk:
                if info is None:
                    refused.append((key, why or "refused"))
                    continue
                if len(out) == limit:
                    self._park(prefix, out[-1].key, _prepend((key, info, why), walk))
                    return ListPage(out, truncated=True, refused=refused)
                out.append(info)
                if until is not None and key >= until:
                    # spare the stat()s past the hint
                    self._park(prefix, key, walk)
                    return ListPage(out, truncated=True, refused=refused)
        except OSError as e:
            _close(walk)
            raise StoreError(f"cannot list {prefix!r} in {self.describe()}: {e}") from e
        return ListPage(out, truncated=False, refused=refused)

    def _park(self, prefix: str, last: str, walk: Iterator[_Item]) -> None:
        with self._lock:
            self._cursors[(prefix, last)] = walk
            while len(self._cursors) > _CURSORS:
                _close(self._cursors.popitem(last=False)[1])

    def close(self) -> None:
        with self._lock:
            cursors, self._cursors = list(self._cursors.values()), OrderedDict()
            pruners, self._pruners = self._pruners, None
        for walk in cursors:
            _close(walk)
        if pruners is not None:
            pruners.shutdown()

    def _walk_prefix(self, prefix: str, after: str) -> Iterator[_Item]:
        dir_rel, _, name_prefix = prefix.rpartition("/")
        base = dir_rel + "/" if dir_rel else ""
        try:
            fd = self._open_dir(dir_rel)
        except (FileNotFoundError, NotADirectoryError):
            return  # an absent directory lists as empty, like an absent S3 prefix
        except SymlinkRefused as e:
            yield (base, None, str(e))
            return
        yield from _walk(fd, base, name_prefix, after)

    # --- deletes ---

    def delete_batch(self, keys: list[str]) -> DeleteResult:
        return self._delete(check_batch(keys), {})

    def delete_if_unchanged(self, items: list[tuple[str, str]]) -> DeleteResult:
        """Re-checks each file's (inode, mtime, size) just before its unlink: a file
        rewritten since it was listed (a new inode by an atomic put, or new bytes in place)
        is skipped and reported in `changed`. The check and the unlink are two calls: a
        rewrite between them (microseconds) is not seen."""
        batch = check_batch(items)
        return self._delete([k for k, _ in batch], {k: v for k, v in batch if v})

    def _delete(self, batch: list[str], versions: dict[str, str]) -> DeleteResult:
        result = DeleteResult(len(batch))
        gone, changed, errors = result.gone, result.changed, result.errors
        dirs: dict[str, int | BaseException] = {}
        emptied: set[str] = set()
        at = self._deadline.at  # `send_by`: checked before each unlink
        try:
            for key in batch:
                try:
                    parent, _, name = check_key(key).rpartition("/")
                    fd = dirs.get(parent)
                    if type(fd) is not int:  # not opened yet, or gone, or refused
                        fd = self._dir_for_delete(parent, dirs)
                        if fd is None:
                            gone.add(key)
                            continue  # the directory is gone: so is the key
                    expect = versions.get(key)
                    if expect is not None and expect != file_version(
                        os.stat(name, dir_fd=fd, follow_symlinks=False)
                    ):
                        changed.add(key)
                        continue
                    if at is not None:
                        self._refuse_late(at)  # this key's error: left, listed again
                    if parent:  # before the unlink: an interrupt may come right after it
                        emptied.add(parent)
                    os.unlink(name, dir_fd=fd)  # unlink never follows a link
                except FileNotFoundError:
                    # Already gone: the goal is reached, not by us. The one unlink is the
                    # first and only attempt, and a failed unlink changed nothing (below),
                    # so no earlier attempt of ours can have removed it: never
                    # `gone_unattributed` (S3's absent-after-an-ambiguous-answer, review
                    # rev38x finding 1), as S3 counts a first attempt's NoSuchKey.
                    gone.add(key)
                    continue
                except (OSError, StoreError) as e:
                    # Not applied, so never asked about (S3's ambiguous per-key answer has
                    # no equivalent here, review rev38s finding 1): one unlink per key, no
                    # retry, and a failed one changed nothing (POSIX unlink(): "If -1 is
                    # returned, the named file shall not be changed",
                    # https://pubs.opengroup.org/onlinepubs/9699919799/functions/unlink.html).
                    errors[key] = str(e)
                    continue
        finally:
            try:
                # However the batch ended: a signal's KeyboardInterrupt between an unlink and
                # the prune left an empty directory that no later delete looks at (nothing
                # in it is listed), e.g. a round's journal/<round>/p0000-s0-a0-t0/ after an
                # interrupted `gc-admin expire --apply` and a whole one (newuser8 N2).
                self._prune(emptied, dirs)
            finally:
                for d in dirs.values():
                    if isinstance(d, int):
                        os.close(d)
        return result

    def _dir_for_delete(self, rel: str, dirs: dict[str, int | BaseException]) -> int | None:
        """The descriptor of `rel`, opened once per batch (None: it does not exist)."""
        got: int | BaseException | None = dirs.get(rel)
        if got is None:
            try:
                if rel:
                    # One component from the (cached) parent: a batch spanning many sibling
                    # epoch directories opens each once, not the whole path each time.
                    parent, _, name = rel.rpartition("/")
                    up = self._dir_for_delete(parent, dirs)
                    if up is None:
                        raise FileNotFoundError(errno.ENOENT, "parent directory is gone", parent)
                    got = _open_child(os.dup(up), name, rel, create=False)
                else:
                    got = self._open_root()
            except (OSError, StoreError) as e:
                got = e
            dirs[rel] = got
        if isinstance(got, FileNotFoundError):
            return None
        if isinstance(got, SymlinkRefused):
            raise got
        if isinstance(got, BaseException):
            raise StoreError(f"cannot open {rel!r}: {got}")
        return got

    def _prune(self, emptied: set[str], dirs: dict[str, int | BaseException]) -> None:
        """Remove directories emptied by deletes and their emptied ancestors, deepest level
        first (a parent is tried once all its emptied children were), so dead epochs stop
        costing list time; never the top levels, never the root, and only through
        descriptors reached without links (rmdir never follows one).

        The rmdirs of one level run `_PRUNERS` at a time. Removing a directory is the
        costly part of a GC round on this project's machines (ext4, Linux 6.x): about
        0.2 ms per directory in the GC benchmark's layout (its loop + rmdir baseline; a
        flat test gave 60 us, the cause is not established), and a round empties five
        directories per prefix, 5,000 in all. Issue 29's measurements (the Spark job on
        local[2], 100k eligible keys, load 2-3, median job / list+lstat+unlink loop), taken
        while each task still had 4 delete threads: 8 at a time per batch 0.33x, 2 at a
        time 0.45x, 1 (inline) 0.37x. With the deletes in the task's own thread (the local
        default since), 1 and 2 measured alike within this machine's noise."""
        levels: dict[int, set[str]] = {}
        for rel in emptied:
            levels.setdefault(rel.count("/"), set()).add(rel)
        while levels:
            depth = max(levels)
            todo: list[tuple[str, str, int]] = []  # (parent, name, parent's descriptor)
            for rel in sorted(levels.pop(depth)):
                if depth < _KEEP_DEPTH:
                    continue
                parent, _, name = rel.rpartition("/")
                try:
                    # Resolved here, on the calling thread: `dirs` is this batch's cache.
                    fd = self._dir_for_delete(parent, dirs)
                except (OSError, StoreError):
                    continue
                if fd is not None:
                    todo.append((parent, name, fd))
                # The batch's own descriptor of `rel` is closed first (nothing deeper needs
                # it: deeper levels went before). An open descriptor keeps a removed
                # directory's inode alive, and its release (the costly part of removing a
                # directory, see above) then ran at the batch's final close, one
                # directory after another on the delete thread; closed first,
                # it runs in the rmdir, `_PRUNERS` at a time (issue 29's throughput: the
                # prune was half the task body's time).
                own = dirs.pop(rel, None)
                if isinstance(own, int):
                    os.close(own)
            for parent, removed in zip(
                (t[0] for t in todo), self._rmdirs([(n, fd) for _, n, fd in todo]), strict=True
            ):
                if removed:  # not empty (or gone, or raced with a put): stop there
                    levels.setdefault(depth - 1, set()).add(parent)

    def _rmdirs(self, todo: list[tuple[str, int]]) -> list[bool]:
        """rmdir each (name, directory descriptor), up to `_PRUNERS` at once; True where
        the directory was removed."""
        if len(todo) <= 1 or self.prune_concurrency == 1:
            return [_rmdir(name, fd) for name, fd in todo]
        with self._lock:
            if self._pruners is None:
                self._pruners = ThreadPoolExecutor(self.prune_concurrency,
                                                   thread_name_prefix="epochgc-prune")
            pool = self._pruners
        return list(pool.map(lambda t: _rmdir(*t), todo))


def _reopen(root: str, prune_concurrency: int) -> LocalStore:
    """Unpickling (Spark ships stores to executors): the same directory and settings."""
    return LocalStore(root, prune_concurrency=prune_concurrency)


def _rmdir(name: str, fd: int) -> bool:
    try:
        os.rmdir(name, dir_fd=fd)
    except OSError:
        return False
    return True


def _version_at(fd: int, name: str) -> str | None:
    """The version of the regular file `name` in directory `fd`, None if there is none
    (a link or a directory is not an object: it never matches a version)."""
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return file_version(st) if stat.S_ISREG(st.st_mode) else "not-a-file"


def file_version(st: os.stat_result) -> str:
    """What a conditional delete compares: a put replaces the inode (rename), an in-place
    write changes mtime or size."""
    return f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}"


def _open_child(fd: int, part: str, rel: str, create: bool) -> int:
    """Open directory `part` below `fd` without following a link; closes `fd`."""
    try:
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=fd)
        try:
            child = os.open(part, _DIR, dir_fd=fd)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                try:
                    is_link = stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode)
                except OSError:
                    is_link = False
                what = "is a symbolic link, never followed" if is_link else "is not a directory"
                if is_link or e.errno == errno.ELOOP:
                    raise SymlinkRefused(f"{rel!r}: component {part!r} {what}") from None
            raise
    finally:
        os.close(fd)
    return child


def _walk(fd: int, base: str, name_prefix: str, after: str) -> Iterator[_Item]:
    """Keys under the directory open as `fd` (relative `base`, '' or ending in '/') whose
    first component starts with `name_prefix`, greater than `after`, in key order. Owns
    `fd` (closed when the walk ends or is closed).

    The per-file path is the GC's hot loop (one turn per key listed, issue 29's
    throughput): per name only its sort key is built before the sort, and the full key
    only for the names the walk reaches (a listing that stops at the first key of a
    directory builds one)."""
    try:
        with os.scandir(fd) as it:
            # A directory's keys all start with "name/", so sort it as "name/": that puts
            # "a.b" (0x2e) before "a/x" (0x2f) exactly as a flat key listing would. Names
            # are unique, and a file's never ends in '/': one map holds both kinds.
            by_name = {
                e.name + "/" if e.is_dir(follow_symlinks=False) else e.name: e
                for e in it
                if e.name.startswith(name_prefix) and not e.name.startswith(_TMP_PREFIX)
            }
        for name in sorted(by_name):
            rel = base + name
            entry = by_name[name]
            if rel[-1] == "/":  # a directory (its key ends in '/'; a file name cannot)
                if base in _FLAT:
                    if rel > after and not after.startswith(rel):
                        yield (rel, None, "a directory where only objects are kept: "
                               "malformed, never listed")
                    continue
                if rel.count("/") > (_DATA_DIRS if rel.startswith(_DATA) else _MAX_DIRS):
                    if rel > after and not after.startswith(rel):
                        yield (rel, None, "a directory nested too deep (below "
                               f"{_DATA}NNN/EPOCH/ or {_MAX_DIRS} levels): malformed, "
                               "never listed")
                    continue
                if after.startswith(rel):
                    sub_after = after
                elif rel > after:
                    sub_after = ""
                else:
                    continue  # the whole subtree sorts at or before `after`
                try:
                    child = os.open(entry.name, _DIR, dir_fd=fd)
                except FileNotFoundError:
                    continue  # removed while listing
                except OSError as e:
                    if e.errno in (errno.ELOOP, errno.ENOTDIR):  # swapped for a link
                        yield (rel, None, "a symbolic link, never followed")
                        continue
                    raise
                yield from _walk(child, rel, "", sub_after)
            elif rel > after:
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue  # deleted while listing
                mode = st.st_mode
                if _S_ISREG(mode):
                    yield (rel, ObjectInfo(rel, st.st_size, st.st_mtime, file_version(st)), None)
                elif _S_ISLNK(mode):
                    yield (rel, None, "a symbolic link, never followed")
                else:
                    yield (rel, None, "not a regular file")
    finally:
        os.close(fd)


_S_ISREG, _S_ISLNK = stat.S_ISREG, stat.S_ISLNK


def _prepend(item: _Item, walk: Iterator[_Item]) -> Iterator[_Item]:
    try:
        yield item
        yield from walk
    finally:
        _close(walk)


def _close(walk: Iterator[_Item]) -> None:
    close = getattr(walk, "close", None)
    if close is not None:
        close()  # runs the walk's `finally`: its directory descriptors are closed


def _write_new(fd: int, name: str, data: bytes) -> None:
    """A new file `name` in the directory `fd` holding `data`: O_EXCL and O_NOFOLLOW, so it
    is never an existing file or a link's target."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    out = os.open(name, flags, 0o644, dir_fd=fd)
    try:
        _write_all(out, data)
    finally:
        os.close(out)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
