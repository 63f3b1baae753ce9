"""The ObjectStore contract, run against the local store and both loopback S3 servers."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.store.base import ObjectStore, StoreError
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.s3 import S3Store
from epochgc.model.keys import format_key, parse_key
from tests.store.s3server import S3_SERVERS, new_bucket


@pytest.fixture(params=["local", *S3_SERVERS])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ObjectStore]:
    if request.param == "local":
        yield LocalStore(tmp_path)
        return
    endpoint = request.getfixturevalue(f"{request.param}_endpoint")
    s = S3Store(new_bucket(endpoint), "root/dir", endpoint_url=endpoint)
    yield s
    s.close()


# Names chosen so that flat key order differs from a naive sorted directory walk:
# "a.b" (0x2e) sorts before "a/x" (0x2f), "a-z" (0x2d) before both.
KEYS = ["a/x", "a.b", "a-z", "a/y/1", "a/y/2", "b", "a/y0"]


def test_put_get_head_and_range(store: ObjectStore) -> None:
    store.put("d/obj", b"0123456789")
    assert store.get("d/obj") == b"0123456789"
    assert store.get("d/obj", 2, 5) == b"234"
    assert store.get("d/obj", 7) == b"789"
    assert store.get("d/obj", 0, 0) == b""
    info = store.head("d/obj")
    assert info is not None and info.size == 10 and abs(info.mtime - time.time()) < 60
    assert store.head("d/none") is None
    store.put("d/obj", b"new")  # replace
    assert store.get("d/obj") == b"new"
    with pytest.raises(StoreError, match="does not exist"):
        store.get("d/none")


def _component_order(key: str) -> tuple[str, ...]:
    return tuple(key.split("/"))


def _byte_order(key: str) -> str:
    return key


@pytest.fixture
def order(request: pytest.FixtureRequest) -> Callable[[str], Any]:
    """The sort key of the listing order of this test's store. S3 requires byte (code
    point) order; SeaweedFS (4.48) lists as a walk of its directory tree, comparing keys
    component by component (`a/x` before `a-z`). The two agree whenever, at each depth, the
    components have one width and no byte below `/`: the GC's keys
    (`level_zero/data/NNN/EPOCH/uuid`) do, which `test_gc_keys_list_in_epoch_order` pins."""
    server = request.node.callspec.params["store"]
    return _component_order if server == "seaweedfs" else _byte_order


def _after(keys: list[str], start: str, order: Callable[[str], Any]) -> list[str]:
    return sorted((k for k in keys if order(k) > order(start)), key=order)


def test_listing_is_in_key_order_and_pages(
    store: ObjectStore, order: Callable[[str], Any]
) -> None:
    for k in KEYS:
        store.put(k, k.encode())
    listed = sorted(KEYS, key=order)
    assert [o.key for o in store.list_all("")] == listed
    pages = list(store.list("", page_size=2))
    assert [len(p) for p in pages] == [2, 2, 2, 1]
    assert [o.key for p in pages for o in p] == listed
    assert [o.key for o in store.list_all("a/")] == ["a/x", "a/y/1", "a/y/2", "a/y0"]
    assert [o.key for o in store.list_all("a/y")] == ["a/y/1", "a/y/2", "a/y0"]
    page = store.list_page("", start_after="a/x", limit=3)
    assert [o.key for o in page.objects] == ["a/y/1", "a/y/2", "a/y0"] and page.truncated
    after_dir = store.list_page("", start_after="a/y/", limit=10)
    assert [o.key for o in after_dir.objects] == _after(KEYS, "a/y/", order)
    assert not after_dir.truncated
    assert store.list_page("zz/").objects == []


def test_gc_keys_list_in_epoch_order(store: ObjectStore) -> None:
    """Every server lists the GC's own keys in epoch order, which is what lets a GC task
    stop at the first epoch above M (`impl/gc/scan.py`)."""
    keys = [format_key(p, e, u) for p in (5, 50) for e in (9, 10, 99, 100, 10**17)
            for u in ("0" * 32, "f" * 32)]
    keys += ["level_zero/data/005/000000000000000010.tmp", "level_zero/data/005/x"]
    for k in keys:
        store.put(k, b"x")
    listed = [o.key for o in store.list_all("level_zero/data/005/")]
    well_formed = [k for k in listed if k.count("/") == 4]
    epochs = [parse_key(k).epoch for k in well_formed]
    assert epochs == sorted(epochs) and len(well_formed) == 10
    assert sorted(listed) == sorted(k for k in keys if k.startswith("level_zero/data/005/"))
    page = store.list_page("level_zero/data/005/", start_after=well_formed[3], limit=1000)
    assert [o.key for o in page.objects if o.key.count("/") == 4] == well_formed[4:]


def test_until_hint_ends_a_page_early_only_where_it_can(
    store: ObjectStore, order: Callable[[str], Any]
) -> None:
    for k in KEYS:
        store.put(k, b"x")
    keys = [o.key for o in store.list_page("", None, 10, until="a/y").objects]
    if isinstance(store, LocalStore):
        assert keys == ["a-z", "a.b", "a/x", "a/y/1"]  # up to the first key >= until
    else:
        assert keys == sorted(KEYS, key=order)  # S3 has no end bound: the hint is ignored


def test_delete_batch_treats_missing_as_success(
    store: ObjectStore, order: Callable[[str], Any]
) -> None:
    for k in KEYS:
        store.put(k, b"x")
    result = store.delete_batch(["a/x", "a/y/1", "never/there"])
    # Missing is success, counted apart where the backend can tell (issue 29).
    assert result.errors == {} and result.deleted + len(result.gone) == 3
    assert result.gone <= {"never/there"}
    left = sorted(set(KEYS) - {"a/x", "a/y/1"}, key=order)
    assert [o.key for o in store.list_all("")] == left
    with pytest.raises(ValueError, match="exceeds 1000"):
        store.delete_batch([f"k{i}" for i in range(1001)])


@pytest.mark.parametrize("key", ["", "/abs", "a//b", "a/../b", "./a", "a/", "a\\b"])
def test_invalid_keys_are_refused(store: ObjectStore, key: str) -> None:
    with pytest.raises(StoreError, match="invalid key"):
        store.put(key, b"x")


def test_large_listing_pages_of_1000(store: ObjectStore) -> None:
    n = 2500 if isinstance(store, LocalStore) else 1100  # moto serves ~200 puts/s
    if isinstance(store, LocalStore):
        for i in range(n):
            p = store.root / f"many/{i // 100:02d}/{i:05d}"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(b"")
    else:
        with ThreadPoolExecutor(8) as pool:  # only to make the setup quick
            list(pool.map(lambda i: store.put(f"many/{i // 100:02d}/{i:05d}", b""), range(n)))
    pages = list(store.list("many/"))
    assert [len(p) for p in pages] == [1000] * (n // 1000) + [n % 1000]
    keys = [o.key for p in pages for o in p]
    assert keys == sorted(keys) and len(set(keys)) == n
    removed = store.delete_batch(keys[:1000])
    assert removed.deleted == 1000 and not removed.errors
    assert sum(len(p) for p in store.list("many/")) == n - 1000
