"""The conformance harness's own view of the object store, read by path with `os.scandir`
and `os.lstat` rather than through the LocalStore under test."""

from __future__ import annotations

import os
import stat

from epochgc.impl.store.local import _TMP_PREFIX as TMP_FILE_PREFIX
from epochgc.model.keys import DATA_PREFIX


def stored_files(root: str | os.PathLike[str], prefix: str,
                 mtimes: bool = False) -> list[tuple[str, float]]:
    """(key, mtime if `mtimes` else 0.0) of every regular file under `prefix` (a directory
    path ending in "/") of the store directory `root`, in key order: the harness's own view
    of what the store holds, read by path with `os.scandir` rather than through the
    LocalStore under test (and without its per-directory descriptors, which cost ~2% of a
    step here). Like LocalStore, it skips in-progress temp files and lists no link."""
    out: list[tuple[str, float]] = []
    todo = [prefix]
    while todo:
        rel = todo.pop()
        try:
            it = os.scandir(os.path.join(root, rel))
        except FileNotFoundError:
            continue
        with it:
            for e in it:
                if e.name.startswith(TMP_FILE_PREFIX):
                    continue
                if e.is_dir(follow_symlinks=False):
                    todo.append(f"{rel}{e.name}/")
                elif e.is_file(follow_symlinks=False):
                    out.append((rel + e.name,
                                e.stat(follow_symlinks=False).st_mtime if mtimes else 0.0))
    out.sort()
    return out


def _regular_file(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False


def _prefixes(listing: list[tuple[str, float]]) -> set[int]:
    """The prefixes of the data keys listed (any entry under `level_zero/data/NNN/`)."""
    out = set()
    for key, _ in listing:
        head = key[len(DATA_PREFIX):].split("/", 1)[0]
        if head.isdigit() and len(head) == 3:
            out.add(int(head))
    return out
