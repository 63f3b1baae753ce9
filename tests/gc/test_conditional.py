"""Issue 29 item 7: deletes are conditional. An eligible key rewritten with fresh bytes
between its listing and its delete is skipped and counted (`changed`), and the manifest
does not list it (on a local store: (inode, mtime, size) re-checked just before unlink)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from epochgc.impl.gc.journal import JournalTarget
from epochgc.impl.gc.stream import list_and_delete_task
from epochgc.impl.store.base import DeleteResult, ObjectStore
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key
from tests.gc.helpers import JOURNAL, NOW, _Delegating, all_keys, put_local, read_journal, run_task
from tests.gc.test_job import GRACE


class _Rewrites(_Delegating):
    """Rewrites `key` just before the first delete request (after the listing saw it)."""

    def __init__(self, inner: LocalStore, key: str, how: str) -> None:
        super().__init__(inner)
        self.local, self.key, self.how, self.done = inner, key, how, False

    def _rewrite(self) -> None:
        if self.done:
            return
        self.done = True
        if self.how == "put":  # an atomic put: a new inode
            self.local.put(self.key, b"fresh bytes")
        else:  # new bytes in place: same inode, new size and mtime
            with open(self.local.root / self.key, "r+b") as f:
                f.write(b"fresh bytes")
            os.utime(self.local.root / self.key, (NOW, NOW))

    def delete_batch(self, keys: list[str]) -> DeleteResult:
        self._rewrite()
        return self.inner.delete_batch(keys)

    def delete_if_unchanged(self, items: list[tuple[str, str]]) -> DeleteResult:
        self._rewrite()
        return self.inner.delete_if_unchanged(items)


@dataclass(frozen=True)
class _Factory:
    root: str
    key: str
    how: str

    def __call__(self) -> ObjectStore:
        return _Rewrites(LocalStore(self.root), self.key, self.how)


@pytest.mark.parametrize("how", ["put", "in-place"])
def test_a_key_rewritten_after_its_listing_is_not_deleted(tmp_path: Path, how: str) -> None:
    # The found defect: deletes were by name only; the fresh object was deleted and the
    # manifest showed the old size and age.
    from tests.gc.helpers import simple_cluster

    simple_cluster(LocalStore(tmp_path, create=True), 100)
    keys = {format_key(p, 50, f"k{p}") for p in range(5)}
    for k in keys:
        put_local(tmp_path, k, age=GRACE + 60)
    target = format_key(3, 50, "k3")
    task = list_and_delete_task(
        _Factory(str(tmp_path), target, how), 100, NOW, GRACE, 10, 10, 1, 1, lambda: NOW,
        300.0, iter(range(10)), journal=JournalTarget(JOURNAL))
    result, deleted = run_task(task, LocalStore(tmp_path))
    assert (tmp_path / target).read_bytes() == b"fresh bytes"
    assert all_keys(LocalStore(tmp_path)) & keys == {target}
    assert deleted == keys - {target}
    totals = read_journal(LocalStore(tmp_path), JOURNAL)
    assert totals.changed == {target} and result.deleted.changed == 1


def test_local_delete_if_unchanged(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put("a/x", b"1")
    store.put("a/y", b"2")
    vx, vy = store.head("a/x").version, store.head("a/y").version  # type: ignore[union-attr]
    store.put("a/y", b"2")  # same bytes, new inode
    r = store.delete_if_unchanged([("a/x", vx), ("a/y", vy), ("a/z", "1:2:3")])
    assert r.changed == {"a/y"} and r.gone == {"a/z"} and r.deleted == 1 and not r.errors
    assert [o.key for o in store.list_all("")] == ["a/y"]


def test_a_same_size_rewrite_in_place_is_changed_not_deleted(tmp_path: Path) -> None:
    """Issue 42 survivor 6: an object rewritten in place (same inode) with bytes of the same
    size after it was listed: only its mtime tells, so the version must include it (a
    version of (inode, size) let the conditional delete remove the fresh bytes). The
    rewrite's mtime is set explicitly (a second later): a rewrite within one timestamp tick
    of the listing is not visible to any (inode, mtime, size) check, as the method says."""
    store = LocalStore(tmp_path)
    store.put("a/x", b"old bytes")
    listed = store.head("a/x")
    assert listed is not None
    path = tmp_path / "a" / "x"
    ino, mtime_ns = path.stat().st_ino, path.stat().st_mtime_ns
    with open(path, "r+b") as f:  # in place: same inode, same size
        f.write(b"new bytes")
    os.utime(path, ns=(mtime_ns + 10**9, mtime_ns + 10**9))
    assert path.stat().st_ino == ino and path.stat().st_size == len(b"old bytes")
    r = store.delete_if_unchanged([("a/x", listed.version)])
    assert r.changed == {"a/x"} and r.deleted == 0 and not r.errors, r
    assert path.read_bytes() == b"new bytes"
