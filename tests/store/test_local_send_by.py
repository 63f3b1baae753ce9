"""The local store's send bound (review rev38n findings 2 and 7): within `send_by`, no
write or unlink of the thread is made once the deadline has passed, measured on a clock
that counts a suspended host's time."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from epochgc.impl.store import base
from epochgc.impl.store.base import StoreError, send_clock
from epochgc.impl.store.local import LocalStore


def _store(tmp_path: Path, keys: list[str]) -> LocalStore:
    store = LocalStore(tmp_path / "s", create=True)
    for k in keys:
        store.put(k, b"x")
    return store


def test_a_delete_past_its_deadline_unlinks_nothing(tmp_path: Path) -> None:
    """Each unlink is checked: a batch whose deadline passed (the thread stalled after its
    go) reports every key as an error (left, listed again) and unlinks none. Old code:
    `AssertionError: set()` (all four unlinked: `send_by` bounded nothing locally)."""
    keys = [f"a/k{i}" for i in range(4)]
    store = _store(tmp_path, keys)
    with store.send_by(send_clock() - 1.0):
        result = store.delete_batch(keys)
    left = {k for k in keys if store.head(k) is not None}
    assert left == set(keys), left
    assert set(result.errors) == set(keys) and result.deleted == 0


def test_writes_past_the_deadline_are_refused_and_leave_no_file(tmp_path: Path) -> None:
    store = _store(tmp_path, ["a/v"])
    version = store.head("a/v")
    assert version is not None
    with store.send_by(send_clock() - 1.0):
        for write in (lambda: store.put("a/p", b"x"),
                      lambda: store.create_if_absent("a/c", b"x"),
                      lambda: store.replace_if_match("a/v", b"y", version.version),
                      lambda: store.delete_if_match("a/v", version.version)):
            with pytest.raises(StoreError, match="not sent"):
                write()
    assert sorted(o.key for o in store.list_all("a/")) == ["a/v"]  # no temporary left
    assert store.get("a/v") == b"x"


def test_the_bound_is_per_thread_and_ends_with_the_block(tmp_path: Path) -> None:
    """Another thread's writes and the same thread's after the `with` are not bounded."""
    keys = ["a/k0", "a/k1"]
    store = _store(tmp_path, keys)
    other: list[int] = []
    with store.send_by(send_clock() - 1.0):
        t = threading.Thread(target=lambda: other.append(store.delete_batch(["a/k0"]).deleted))
        t.start()
        t.join()
    assert other == [1]
    assert store.delete_batch(["a/k1"]).deleted == 1
    with store.send_by(send_clock() + 3600.0):  # within its bound: sent
        store.put("a/k2", b"x")
    assert store.head("a/k2") is not None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="CLOCK_BOOTTIME is Linux's")
def test_the_send_clock_counts_suspend_on_linux() -> None:
    """Finding 7: `time.monotonic` is CLOCK_MONOTONIC on Linux, which stops while the host
    is suspended; the deadline is measured on CLOCK_BOOTTIME (no suspend here to show the
    difference: the clock chosen is what is checked)."""
    assert base._BOOTTIME == time.CLOCK_BOOTTIME
    before = time.clock_gettime(time.CLOCK_BOOTTIME)
    assert before <= send_clock() <= time.clock_gettime(time.CLOCK_BOOTTIME)
