"""A group's removal from a node's data directory, through a FileIO so that the crash-state
explorer (tests/raft/crashexplore.py) runs these very calls.

Order matters: the tombstone is durable before anything is deleted, so a crash at any call
leaves either the whole group (no tombstone) or a tombstone, which keeps the group from
coming back on restart whatever part of its directory is left."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

from epochgc.impl.raft.fileio import EntryKind, FileIO, make_dirs_durable


def tombstone_path(data_dir: str, group_id: int) -> str:
    """Where the tombstone of `group_id` lives in a node's data directory."""
    return os.path.join(data_dir, "removed", f"g{group_id}")


def group_path(data_dir: str, group_id: int) -> str:
    """The directory of `group_id`'s log in a node's data directory."""
    return os.path.join(data_dir, f"g{group_id}")


def remove_group_files(
    fs: FileIO, data_dir: str, group_id: int, stop_group: Callable[[], None]
) -> None:
    """Remove `group_id` from a node's data directory: its tombstone made durable, then
    `stop_group()` (the group closes its log), then its directory deleted. Raises OSError
    from the tombstone (nothing deleted, the group still running)."""
    make_tombstone_durable(fs, data_dir, group_id)
    stop_group()
    delete_tree(fs, group_path(data_dir, group_id))


def make_tombstone_durable(fs: FileIO, data_dir: str, group_id: int) -> None:
    """Create the tombstone and make it durable: its directory in its parent, the empty
    file, then its directory entry. Raises OSError (nothing is deleted yet)."""
    tomb = tombstone_path(data_dir, group_id)
    make_dirs_durable(fs, os.path.dirname(tomb))
    if not fs.exists(tomb):  # a removal tried again (after a failure) finds it there
        fd = fs.open_append(tomb, create=True)
        try:
            fs.fsync(fd)
        finally:
            fs.close(fd)
    fs.fsync_dir(os.path.dirname(tomb))


def delete_tree(fs: FileIO, path: str) -> None:
    """Delete `path` and everything under it, never following a link (a link is unlinked,
    not descended). Best effort: an entry that cannot be deleted is left; the tombstone
    already says the group is gone."""
    try:
        names = fs.listdir(path)
    except OSError:
        return
    for name in names:
        child = os.path.join(path, name)
        try:
            if fs.entry_kind(child) is EntryKind.DIRECTORY:
                delete_tree(fs, child)
            else:
                fs.unlink(child)
        except OSError:
            continue
    with contextlib.suppress(OSError):
        fs.rmdir(path)
