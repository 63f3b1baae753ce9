"""Borrowed task pools (`impl.gc.pools`): a GC task body run on long-lived pools (as the
conformance harness runs it, a round every few steps) does what it does on its own pools:
the same rows and deletes, the same reads in flight together, nothing submitted still
running when the call returns, and no new threads per call."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from epochgc.impl.gc.journal import JournalTarget
from epochgc.impl.gc.pools import TaskPools
from epochgc.impl.gc.recheck import Go, Refused, Verdict
from epochgc.impl.gc.reports import HEALTH_PREFIX, PARTITIONS_KEY, REPORT_READERS, read_cluster_view
from epochgc.impl.gc.stream import list_and_delete_task
from epochgc.impl.store.base import ListPage, ObjectStore, StoreError
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import JOURNAL, NOW, _Delegating, all_keys, local_spec, run_task
from tests.gc.test_job import GRACE, make_store
from tests.gc.test_stream import Recording, _garbage

REPORTS = (f"{HEALTH_PREFIX}n1.json", f"{HEALTH_PREFIX}n2.json")


@pytest.fixture
def pools() -> Iterator[TaskPools]:
    p = TaskPools.create(REPORT_READERS, 2)
    yield p
    p.close()


def _task(
    rec: Recording, pools: TaskPools | None, report_keys: tuple[str, ...] = REPORTS
) -> tuple[Verdict | None, set[str]]:
    """The task's re-read verdict and the keys its journal says it deleted."""
    result, deleted = run_task(list_and_delete_task(
        rec, 100, NOW, GRACE, 3, 5, 2, 1, lambda: NOW, 300.0, iter(range(1000)),
        journal=JournalTarget(JOURNAL), report_keys=report_keys, pools=pools), rec.inner())
    return result.verdict, deleted


@pytest.mark.parametrize("lower_m_to", [None, 90])
def test_a_task_on_borrowed_pools_gives_the_same_rows_and_deletes(
    tmp_path: Path, pools: TaskPools, lower_m_to: int | None
) -> None:
    outcome = []
    inline = TaskPools.inline(REPORT_READERS, 2)
    for name, borrowed in (("own", None), ("borrowed", pools), ("inline", inline)):
        root = tmp_path / name
        make_store(root)
        _garbage(root, range(10, 40), 4)
        rec = Recording(local_spec(root), str(tmp_path / f"{name}.log"), lower_m_to=lower_m_to)
        # Lowered on the re-read's listing: with the driver's report keys those reads may
        # start before it (by design, test_stream), so here every report is read after it.
        verdict, deleted = _task(rec, borrowed, REPORTS if lower_m_to is None else ())
        outcome.append((verdict, sorted(deleted), all_keys(LocalStore(root))))
    assert outcome[0] == outcome[1] == outcome[2]
    assert isinstance(outcome[1][0], Refused if lower_m_to is not None else Go)
    assert bool(outcome[1][1]) == (lower_m_to is None)


@pytest.mark.parametrize("borrow", [False, True])
def test_borrowed_pools_start_no_thread_per_task(
    tmp_path: Path, pools: TaskPools, borrow: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_store(tmp_path)
    # The store prunes emptied directories on the calling thread too (no pruner pool).
    rec = Recording(replace(local_spec(tmp_path), prune_concurrency=1), str(tmp_path / "log"))
    started: list[str] = []
    start = threading.Thread.start

    def counted(self: threading.Thread) -> None:
        started.append(self.name)
        start(self)

    monkeypatch.setattr(threading.Thread, "start", counted)
    for _ in range(6):
        _task(rec, pools if borrow else None)
    if borrow:  # at most each pool's workers, ever
        assert len(started) <= 1 + REPORT_READERS + 2, started
    else:  # the re-read, its readers and the deleters: threads of their own every task
        assert len(started) >= 6 * 3, started


class _Rendezvous(_Delegating):
    """Each read of the snapshot and the two reports waits until all three are in flight:
    a reader that runs them one at a time breaks the barrier."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        # A hang bound, not a timing: a serial reader never completes the rendezvous and
        # breaks it after 60 s; parallel readers meet however loaded the machine is.
        self.barrier = threading.Barrier(3, timeout=60)

    def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        if key == PARTITIONS_KEY or key in REPORTS:
            self.barrier.wait()
        return self.inner.get(key, start, end)


def test_borrowed_report_readers_read_together(tmp_path: Path, pools: TaskPools) -> None:
    make_store(tmp_path)
    store = _Rendezvous(LocalStore(tmp_path))
    view = read_cluster_view(store, NOW, 300.0, REPORT_READERS, REPORTS, pools.reports)
    assert view.gc_epoch().M == 100


class _SlowReportFailingListing(_Delegating):
    """The listing fails at once; a report read ahead of it is still running then."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.finished: list[str] = []

    def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        if key in REPORTS:
            time.sleep(0.3)
            self.finished.append(key)
        return self.inner.get(key, start, end)

    def list_page(
        self, prefix: str, start_after: str | None = None, limit: int = 1000,
        until: str | None = None,
    ) -> ListPage:
        if prefix == HEALTH_PREFIX:
            raise StoreError("injected: listing the reports failed")
        return self.inner.list_page(prefix, start_after, limit, until)


@pytest.mark.parametrize("borrow", [False, True])
def test_a_failed_read_returns_only_after_its_reads_finished(
    tmp_path: Path, pools: TaskPools, borrow: bool
) -> None:
    # As the pool's shutdown does for its own pool: nothing submitted outlives the call.
    make_store(tmp_path)
    store = _SlowReportFailingListing(LocalStore(tmp_path))
    with pytest.raises(Exception, match="listing the reports failed"):
        read_cluster_view(store, NOW, 300.0, REPORT_READERS, REPORTS,
                          pools.reports if borrow else None)
    assert sorted(store.finished) == sorted(REPORTS)


def test_pools_of_another_concurrency_are_refused(tmp_path: Path) -> None:
    make_store(tmp_path)
    rec = Recording(local_spec(tmp_path), str(tmp_path / "log"))
    small = TaskPools.create(REPORT_READERS, 1)
    try:
        with pytest.raises(ValueError, match="1 deleters; the call asks for 8 and 2"):
            _task(rec, small)
    finally:
        small.close()


def test_inline_pools_run_each_call_when_submitted_and_start_no_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`TaskPools.inline` (the conformance harness's): a call has run, in the caller's
    thread, when `submit` returns; its exception is its future's; a whole task starts no
    thread."""
    inline = TaskPools.inline(REPORT_READERS, 2)
    ran: list[str] = []
    fut = inline.delete.submit(lambda x: ran.append(threading.current_thread().name) or x, 7)
    assert fut.done() and fut.result() == 7 and ran == [threading.current_thread().name]
    bad = inline.reports.submit(lambda: 1 // 0)
    assert isinstance(bad.exception(), ZeroDivisionError)
    inline.check(REPORT_READERS, 2)
    with pytest.raises(ValueError, match="pools need at least 1 worker"):
        TaskPools.inline(0, 2)
    make_store(tmp_path)
    _garbage(tmp_path, range(10, 20), 3)
    # The store prunes emptied directories on the calling thread too (no pruner pool).
    rec = Recording(replace(local_spec(tmp_path), prune_concurrency=1), str(tmp_path / "log"))
    started: list[str] = []
    monkeypatch.setattr(threading.Thread, "start", lambda self: started.append(self.name))
    _, deleted = _task(rec, inline)
    assert started == [] and deleted
