"""Issue 12, items 2 and 7: the local store never follows a symbolic link (no read, write,
delete or directory removal outside the root), reports what it refused, and lists a large
directory in linear time (a listing continued page by page resumes its walk)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from epochgc.impl.store.base import StoreError
from epochgc.impl.store.local import LocalStore

EPOCH5 = "000000000000000005"


def tree(root: Path) -> dict[str, tuple[str, bytes | str]]:
    """Every entry under `root`, links not followed: what each is and holds."""
    out: dict[str, tuple[str, bytes | str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir", b"")
            else:
                out[rel] = ("file", p.read_bytes())
    return out


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    """The found store: level_zero/data/004 -> /elsewhere, which holds a victim."""
    root, elsewhere = tmp_path / "store", tmp_path / "elsewhere"
    (elsewhere / EPOCH5).mkdir(parents=True)
    (elsewhere / EPOCH5 / "victim").write_bytes(b"precious")
    (root / "level_zero/data").mkdir(parents=True)
    (root / "level_zero/data/004").symlink_to(elsewhere)
    (root / f"level_zero/data/005/{EPOCH5}").mkdir(parents=True)
    (root / f"level_zero/data/005/{EPOCH5}/real").write_bytes(b"x")
    (root / f"level_zero/data/005/{EPOCH5}/link").symlink_to(elsewhere / EPOCH5 / "victim")
    (root / f"level_zero/data/005/{EPOCH5}/dangling").symlink_to(tmp_path / "nowhere")
    (root / "_cluster").mkdir()
    (root / "_cluster/gc").symlink_to(elsewhere)
    return root, elsewhere


def test_a_symlinked_prefix_is_refused_not_followed(planted: tuple[Path, Path]) -> None:
    root, _ = planted
    page = LocalStore(root).list_page("level_zero/data/004/")
    assert page.objects == [] and not page.truncated
    assert [k for k, _ in page.refused] == ["level_zero/data/004/"]
    assert "symbolic link" in page.refused[0][1]


def test_symlinked_files_are_refused_not_listed(planted: tuple[Path, Path]) -> None:
    root, _ = planted
    page = LocalStore(root).list_page("level_zero/data/005/")
    assert [o.key for o in page.objects] == [f"level_zero/data/005/{EPOCH5}/real"]
    assert sorted(k for k, _ in page.refused) == [
        f"level_zero/data/005/{EPOCH5}/dangling",
        f"level_zero/data/005/{EPOCH5}/link",
    ]
    listed = {o.key for o in LocalStore(root).list_all("")}
    assert listed == {f"level_zero/data/005/{EPOCH5}/real"}


def test_nothing_is_deleted_through_a_link(planted: tuple[Path, Path]) -> None:
    root, elsewhere = planted
    outside = tree(elsewhere)
    store = LocalStore(root)
    victim = f"level_zero/data/004/{EPOCH5}/victim"
    result = store.delete_batch([victim])
    assert list(result.errors) == [victim] and "symbolic link" in result.errors[victim]
    assert tree(elsewhere) == outside  # the victim and its directory are still there


def test_every_key_of_a_batch_under_a_link_is_an_error(planted: tuple[Path, Path]) -> None:
    """The delete loop reuses a batch's open directory descriptors without a call per key
    (issue 29's throughput); a directory refused once (a link) stays refused for every
    later key of the batch below it: each is an error, never counted `gone`."""
    root, elsewhere = planted
    (elsewhere / EPOCH5 / "second").write_bytes(b"precious too")
    outside = tree(elsewhere)
    keys = [f"level_zero/data/004/{EPOCH5}/victim", f"level_zero/data/004/{EPOCH5}/second"]
    result = LocalStore(root).delete_if_unchanged([(k, "") for k in keys])
    assert sorted(result.errors) == sorted(keys) and not result.gone and result.deleted == 0
    assert all("symbolic link" in why for why in result.errors.values())
    assert tree(elsewhere) == outside


def test_no_write_or_read_through_a_link(planted: tuple[Path, Path]) -> None:
    root, elsewhere = planted
    outside = tree(elsewhere)
    store = LocalStore(root)
    with pytest.raises(StoreError, match="symbolic link"):
        store.put("_cluster/gc/rounds/r.json", b"{}")
    with pytest.raises(StoreError, match="symbolic link"):
        store.get(f"level_zero/data/005/{EPOCH5}/link")
    with pytest.raises(StoreError, match="symbolic link"):
        store.get(f"level_zero/data/004/{EPOCH5}/victim")
    assert store.head(f"level_zero/data/005/{EPOCH5}/link") is None
    assert tree(elsewhere) == outside


def test_a_link_swapped_in_after_listing_is_not_followed(tmp_path: Path) -> None:
    # The listing saw a real directory; before the delete it became a link elsewhere.
    root, elsewhere = tmp_path / "store", tmp_path / "elsewhere"
    store = LocalStore(root, create=True)
    key = f"level_zero/data/006/{EPOCH5}/k"
    store.put(key, b"x")
    assert [o.key for o in store.list_all("level_zero/")] == [key]
    (elsewhere / EPOCH5).mkdir(parents=True)
    (elsewhere / EPOCH5 / "k").write_bytes(b"precious")
    os.rename(root / "level_zero/data/006", tmp_path / "moved")
    (root / "level_zero/data/006").symlink_to(elsewhere)
    outside = tree(elsewhere)
    assert key in store.delete_batch([key]).errors
    assert tree(elsewhere) == outside


def test_pruning_never_leaves_the_root(tmp_path: Path) -> None:
    # Deleting the last key of a directory whose parent is a link must not rmdir the
    # link's target (the found round "removed its directory").
    root, elsewhere = tmp_path / "store", tmp_path / "elsewhere"
    (root / "level_zero/data").mkdir(parents=True)
    (elsewhere / "sub").mkdir(parents=True)
    (root / "level_zero/data/007").symlink_to(elsewhere)
    outside = tree(elsewhere)
    LocalStore(root).delete_batch([f"level_zero/data/007/sub/{EPOCH5}"])
    assert tree(elsewhere) == outside


def test_listing_a_big_directory_in_pages_reads_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2,000 keys in one directory, pages of 100: the old store re-read and re-sorted the
    # whole directory for every page (20 reads here, 2.5 s per page at 20,000 keys).
    d = tmp_path / "level_zero/data/000" / EPOCH5
    d.mkdir(parents=True)
    for i in range(2000):
        os.close(os.open(d / f"k{i:05d}", os.O_CREAT | os.O_WRONLY, 0o644))
    store = LocalStore(tmp_path)
    reads = []
    real = os.scandir

    def counting(path: object) -> object:
        reads.append(path)
        return real(path)  # type: ignore[call-overload]

    monkeypatch.setattr(os, "scandir", counting)
    keys = [o.key for page in store.list("level_zero/data/000/", page_size=100) for o in page]
    assert keys == sorted(keys) and len(keys) == 2000
    assert len(reads) == 2  # the prefix directory and the epoch directory, once each
    store.close()
