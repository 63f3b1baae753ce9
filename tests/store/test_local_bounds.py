"""Issue 29 items 3-4 at the store: listing never recurses without bound, and a read never
blocks on a FIFO or other special file (refused before reading)."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from epochgc.impl.store.base import StoreError
from epochgc.impl.store.local import LocalStore

EPOCH_DIR = "level_zero/data/999/000000000000000050/"
_HANG_LIMIT_S = 60.0  # a bound for a hung call (it takes milliseconds), not a timing test


def _deep(root: Path, levels: int) -> str:
    """`levels` nested directories `d/d/...` inside an epoch directory, a file at the
    bottom; returns the first directory's key."""
    fd = os.open(root, os.O_RDONLY)
    os.makedirs(root / EPOCH_DIR, exist_ok=True)
    try:
        cur = os.open(root / EPOCH_DIR, os.O_RDONLY)
        for _ in range(levels):  # one component at a time: the path exceeds PATH_MAX
            os.mkdir("d", dir_fd=cur)
            nxt = os.open("d", os.O_RDONLY, dir_fd=cur)
            os.close(cur)
            cur = nxt
        os.close(os.open("f", os.O_CREAT | os.O_WRONLY, dir_fd=cur))
        os.close(cur)
    finally:
        os.close(fd)
    return EPOCH_DIR + "d/"


def _remove_deep(root: Path) -> None:
    """Remove the tree `_deep` made without recursion (pytest's own clean-up, shutil.rmtree,
    recurses once per level and would fail, in this and every later session)."""
    subprocess.run(["rm", "-rf", str(root / EPOCH_DIR / "d")], check=True)


def test_a_1200_level_tree_below_an_epoch_is_named_not_recursed(tmp_path: Path) -> None:
    # The found defect: the lister recursed until RecursionError (not an OSError, so not a
    # StoreError), failing every round without naming the entry.
    try:
        top = _deep(tmp_path, 1200)
        (tmp_path / EPOCH_DIR / "ok").write_bytes(b"x")
        page = LocalStore(tmp_path).list_page("level_zero/data/999/")
        assert [o.key for o in page.objects] == [EPOCH_DIR + "ok"]
        assert [k for k, _ in page.refused] == [top]
        assert "nested too deep" in page.refused[0][1]
    finally:
        _remove_deep(tmp_path)


def test_a_directory_one_level_below_an_epoch_is_refused(tmp_path: Path) -> None:
    (tmp_path / EPOCH_DIR / "sub").mkdir(parents=True)
    (tmp_path / EPOCH_DIR / "sub" / "x").write_bytes(b"x")
    page = LocalStore(tmp_path).list_page("level_zero/data/999/")
    assert page.objects == [] and [k for k, _ in page.refused] == [EPOCH_DIR + "sub/"]
    # Outside the data prefix, keys may nest (up to 16 levels).
    (tmp_path / "_cluster" / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "_cluster" / "a" / "b" / "c" / "k").write_bytes(b"x")
    assert [o.key for o in LocalStore(tmp_path).list_all("_cluster/")] == ["_cluster/a/b/c/k"]


@pytest.mark.parametrize("kind", ["fifo", "socket"])
def test_a_special_file_is_refused_before_reading(tmp_path: Path, kind: str) -> None:
    # The found defect: `_cluster/partitions.json` as a FIFO blocked the reader in open()
    # forever (its type was checked after open() returned).
    path = tmp_path / "_cluster" / "partitions.json"
    path.parent.mkdir()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        import socket

        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
    got: list[BaseException | bytes] = []

    def read() -> None:
        try:
            got.append(LocalStore(tmp_path).get("_cluster/partitions.json"))
        except BaseException as e:
            got.append(e)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(_HANG_LIMIT_S)
    hung = t.is_alive()
    if hung and kind == "fifo":  # release the old code's blocked open()
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        t.join()
    assert not hung, "the read blocked in open()"
    assert got and isinstance(got[0], StoreError), got
    assert "partitions.json" in str(got[0])
    if kind == "fifo":  # a socket cannot even be opened (ENXIO)
        assert "not a regular file" in str(got[0])
