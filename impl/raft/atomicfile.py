"""atomic_write: a file replaced whole or not at all (temp file, write, fsync, rename, fsync
the directory), and _write_all, which continues short writes."""

from __future__ import annotations

import os

from epochgc.impl.raft.fileio import FileIO, OsFileIO


def atomic_write(path: str, data: bytes, fs: FileIO | None = None) -> None:
    """Replace path with data so that a crash leaves either the old or the new content."""
    fs = fs or OsFileIO()
    tmp = path + ".tmp"
    fd = fs.open_trunc(tmp)
    try:
        _write_all(fs, fd, data)
        fs.fsync(fd)
    finally:
        fs.close(fd)
    fs.replace(tmp, path)
    fs.fsync_dir(os.path.dirname(path) or ".")


def _write_all(fs: FileIO, fd: int, data: bytes) -> None:
    """write(2) may write less than asked (a signal, a nearly full disk): continue."""
    off = 0
    while off < len(data):
        n = fs.write(fd, data[off:] if off else data)
        if n <= 0:
            raise OSError(f"write returned {n}")
        off += n
