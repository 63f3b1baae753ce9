"""The GC job never fails open (issue 31): a listing error ends the round with an error, the
last batch is journaled and counted, each journal record is written at its moment (the
intent before the delete request, the outcome after it), only `_cluster/health/NODE.json`
is a report, and a re-read that fails lets no delete through. Each test here is the check
of one of the seeded GC bugs in `tests/conformance/mutants.py` (named in its docstring)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from epochgc.impl.gc.delete import delete_keys
from epochgc.impl.gc.errors import ReportError
from epochgc.impl.gc.journal import Attempt, JournalTarget, JournalWriter, read_journal
from epochgc.impl.gc.reports import HEALTH_PREFIX, read_cluster_view
from epochgc.impl.gc.scan import ScanStats, scan_prefix
from epochgc.impl.gc.stream import recheck
from epochgc.impl.store.base import DeleteResult, ListPage, StoreError
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key, prefix_path
from tests.gc.helpers import JOURNAL, NOW, _Delegating, all_keys, put_local, simple_cluster

D = "level_zero/data/001/000000000000000005/"  # journaled keys are data keys (R20)

GRACE = 60.0


class _ListFails(_Delegating):
    """Every listing of `prefix` after the first `ok` pages fails."""

    def __init__(self, inner: LocalStore, prefix: str, ok: int = 0) -> None:
        super().__init__(inner)
        self.prefix, self.ok = prefix, ok

    def list_page(self, prefix: str, start_after: str | None = None, limit: int = 1000,
                  until: str | None = None) -> ListPage:
        if prefix == self.prefix:
            if self.ok <= 0:
                raise StoreError(f"injected: listing {prefix} failed")
            self.ok -= 1
        return self.inner.list_page(prefix, start_after, limit, until)


def test_a_listing_error_mid_prefix_fails_the_scan(tmp_path: Path) -> None:
    """gc-scan-list-error-ends-prefix: a prefix whose second page fails to list is an error,
    never a prefix listed as far as it got (the round would report success with half of
    its garbage)."""
    for i in range(6):
        put_local(tmp_path, format_key(7, 10, f"k{i}"), age=2 * GRACE)
    store = _ListFails(LocalStore(tmp_path), prefix_path(7), ok=1)
    rows = []
    with pytest.raises(StoreError, match="injected"):
        for row in scan_prefix(store, 7, 100, NOW, GRACE, 3, ScanStats()):
            rows.append(row)
    assert len(rows) == 3  # the first page's, then the error


def test_a_health_listing_error_fails_the_read(tmp_path: Path) -> None:
    """gc-health-list-error-as-empty: a report listing that fails is an error naming it, not
    "no reports" (a round that then reads as blocked, exit 2, hides the store's failure)."""
    simple_cluster(LocalStore(tmp_path, create=True), 50)
    store = _ListFails(LocalStore(tmp_path), HEALTH_PREFIX)
    with pytest.raises(ReportError, match=f"cannot list {HEALTH_PREFIX}"):
        read_cluster_view(store, NOW, 300.0)


def test_a_reread_that_fails_raises(tmp_path: Path) -> None:
    """gc-reread-error-goes: a task's re-read of M whose reports cannot be read raises (the
    task then deletes nothing), never a verdict to go ahead on the driver's M."""
    simple_cluster(LocalStore(tmp_path, create=True), 50)
    store = _ListFails(LocalStore(tmp_path), HEALTH_PREFIX)
    with pytest.raises(ReportError):
        recheck(store, 50, lambda: NOW, 300.0)


def test_a_report_in_a_subdirectory_neither_counts_nor_fails_the_round(tmp_path: Path) -> None:
    """gc-health-subdirectory-filter-dropped: an entry below `_cluster/health/` in a
    subdirectory is not a node's report: it is left out before it is parsed, so it neither
    counts nor makes the round fail."""
    store = LocalStore(tmp_path, create=True)
    simple_cluster(store, 50)
    key = f"{HEALTH_PREFIX}archive/n3.json"
    store.put(key, json.dumps({"node": "n3", "written_at": NOW - 10, "replicas": []}).encode())
    os.utime(tmp_path / key, (NOW - 10, NOW - 10))
    try:
        view = read_cluster_view(store, NOW, 300.0)
    except ReportError as e:
        pytest.fail(f"a report in a subdirectory made the read fail: {e}")
    assert [r.node for r in view.fresh] == ["n1", "n2"]
    assert key not in view.report_keys


class _JournalPutFails(_Delegating):
    """A journal store whose intent records cannot be written."""

    def put(self, key: str, data: bytes) -> None:
        if key.endswith(".intent.json"):
            raise StoreError(f"injected: cannot write {key}")
        self.inner.put(key, data)


def test_a_batch_that_cannot_be_journaled_is_not_deleted(tmp_path: Path) -> None:
    """gc-intent-after-delete: the intent record is written BEFORE the batch's delete
    request: a batch whose intent cannot be written is not deleted (else a task killed
    mid-request leaves deletes no journal accounts for)."""
    data = LocalStore(tmp_path / "data", create=True)
    keys = [f"{D}k{i}" for i in range(3)]
    for k in keys:
        data.put(k, b"x")
    journal = _JournalPutFails(LocalStore(tmp_path / "journal", create=True))
    writer = JournalWriter(journal, JournalTarget(JOURNAL), Attempt(0, 0, 0, 1))
    with pytest.raises(StoreError, match="injected"):
        delete_keys(data, [(k, 1, 0.0, "") for k in keys], batch_size=3, concurrency=1,
                    journal=writer)
    assert all_keys(data) == set(keys)


class _DeleteFails(_Delegating):
    """Deletes of `bad` fail (the rest go through)."""

    def __init__(self, inner: LocalStore, bad: set[str]) -> None:
        super().__init__(inner)
        self.bad = bad

    def delete_batch(self, keys: list[str]) -> DeleteResult:
        ok = [k for k in keys if k not in self.bad]
        res = self.inner.delete_batch(ok)
        return DeleteResult(len(keys), {**res.errors, **dict.fromkeys(
            [k for k in keys if k in self.bad], "injected: delete failed")}, res.gone,
            res.changed)

    def delete_if_unchanged(self, items: list[tuple[str, str]]) -> DeleteResult:
        return self.delete_batch([k for k, _ in items])


def test_the_outcome_record_is_written_after_the_request(tmp_path: Path) -> None:
    """gc-done-before-request: a batch's `done` record is what its request did (written
    after it): a failed delete is journaled as an error, never as deleted, and the last
    (partial) batch is journaled like the others."""
    data = _DeleteFails(LocalStore(tmp_path / "data", create=True), {f"{D}k1", f"{D}k4"})
    keys = [f"{D}k{i}" for i in range(5)]  # batches of 2: the last one holds k/4 alone
    for k in keys:
        data.put(k, b"x")
    jstore = LocalStore(tmp_path / "journal", create=True)
    writer = JournalWriter(jstore, JournalTarget(JOURNAL), Attempt(0, 0, 0, 1))
    stats = delete_keys(data, [(k, 1, 0.0, "") for k in keys], batch_size=2, concurrency=2,
                        journal=writer)
    t = read_journal(jstore, JOURNAL, data)
    assert set(t.errors) == {f"{D}k1", f"{D}k4"} and t.batches == 3, t
    assert set(t.deleted) == {f"{D}k0", f"{D}k2", f"{D}k3"}, t
    assert (stats.deleted, stats.errors, stats.delete_requests) == (3, 2, 3)
    assert all_keys(data.inner) == {f"{D}k1", f"{D}k4"}
