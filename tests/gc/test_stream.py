"""Issue 12 (SPEC R21a): a real round deletes while its listing continues, and every task
re-reads M before its first delete, so a lower M published after the round computed M (and
before the task's re-read, which runs while the first pages are listed) stops it."""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.gc.delete import batches_taken_at_most
from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.journal import STOP, JournalTarget, write_marker
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.gc.recheck import Go, Refused
from epochgc.impl.gc.reports import HEALTH_PREFIX
from epochgc.impl.gc.scan import ScanStats
from epochgc.impl.gc.stage import default_deleters, default_listers
from epochgc.impl.gc.stream import (
    HANDOFF_PER_LISTER,
    LISTER_THREAD,
    TaskResult,
    list_and_delete_task,
    listed,
)
from epochgc.impl.store.base import DeleteResult, ListPage, ObjectStore, StoreError
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.url import StoreSpec
from epochgc.model.keys import format_key, parse_key
from tests.gc.helpers import (
    JOURNAL,
    NOW,
    _Delegating,
    all_keys,
    local_spec,
    put_local,
    run_task,
    write_health,
)
from tests.gc.test_job import GRACE, make_store


def _append(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (line + "\n").encode())  # one small O_APPEND write: atomic
    finally:
        os.close(fd)


class _Recording(_Delegating):
    """Logs every data-prefix list, every listing of the reports and every delete, in the
    order the store saw them; optionally republishes the reports with a lower M (as a
    cluster whose reports changed after the driver's read), `lower_when`: "reread", on a
    task's first listing of the reports, before the listing answers (a task without the
    driver's report keys reads every report after that); "driver-closed", when the first
    store opened (the driver's) is closed, after its read and before any task starts (a
    task's re-read also reads the driver's reports alongside its listing)."""

    def __init__(
        self, inner: ObjectStore, log: str, lower_m_to: int | None, lower_when: str, first: bool
    ) -> None:
        super().__init__(inner)
        self.log, self.lower_m_to, self.lower_when, self.first = log, lower_m_to, lower_when, first

    def _lower(self) -> None:
        if self.lower_m_to is not None:
            m = self.lower_m_to
            write_health(self.inner, "n1", NOW - 5, [("t/0", m), ("t/1", m + 8)])
            write_health(self.inner, "n2", NOW - 5, [("t/0", m), ("t/1", None)])

    def close(self) -> None:
        if self.first and self.lower_when == "driver-closed":
            self._lower()
        self.inner.close()

    def list_page(
        self,
        prefix: str,
        start_after: str | None = None,
        limit: int = 1000,
        until: str | None = None,
    ) -> ListPage:
        if prefix == HEALTH_PREFIX:
            first = _count(self.log, "H") == 0
            _append(self.log, "H")
            if first and self.lower_when == "reread":
                self._lower()
        if prefix.startswith("level_zero/data/"):
            _append(self.log, f"L {prefix}")
        return self.inner.list_page(prefix, start_after, limit, until)

    def delete_batch(self, keys: list[str]) -> DeleteResult:
        _append(self.log, "D " + json.dumps(keys))
        return self.inner.delete_batch(keys)


@dataclass(frozen=True)
class Recording:
    inner: StoreSpec
    log: str
    lower_m_to: int | None = None
    lower_when: str = "reread"

    def __call__(self) -> ObjectStore:
        first = _count(self.log, "O") == 0
        _append(self.log, "O")
        return _Recording(self.inner(), self.log, self.lower_m_to, self.lower_when, first)

    def events(self) -> list[tuple[str, str]]:
        return _events(self.log)


def _events(log: str) -> list[tuple[str, str]]:
    return [(line[0], line[2:]) for line in Path(log).read_text().splitlines()]


def _count(log: str, kind: str) -> int:
    try:
        return sum(line[:1] == kind for line in Path(log).read_text().splitlines())
    except FileNotFoundError:
        return 0


def _in(prefix_path: str, lo: int, hi: int) -> bool:
    return lo <= int(prefix_path.split("/")[2]) < hi


def _garbage(root: Path, prefixes: range, per_prefix: int, m: int = 100) -> set[str]:
    keys = set()
    for p in prefixes:
        for i in range(per_prefix):
            key = format_key(p, m - 1 - i % 3, f"g{i}")
            put_local(root, key, age=GRACE + 60)
            keys.add(key)
    return keys


def _most_ahead(listers: int, deleters: int, batch: int, rows_per_prefix: int) -> int:
    """The most non-empty prefixes a task lists before its first delete request, by the
    code's bounds (not by how its threads happen to be scheduled): its deletes take the
    groups in the workers and one more of batches of `batch` rows before they wait for a
    request (`delete.batches_taken_at_most`); each prefix of `rows_per_prefix` eligible rows is one
    chunk, of which the listing queues HANDOFF_PER_LISTER per lister and holds one in each
    lister's hand (`stream.listed`)."""
    taken = batches_taken_at_most(deleters) * batch
    return -(-taken // rows_per_prefix) + (HANDOFF_PER_LISTER + 1) * listers


def _garbage_lists_around_first_delete(events: list[tuple[str, str]]) -> tuple[int, int]:
    """List requests of the garbage prefixes (10-99) before and after the first delete."""
    first_delete = next(i for i, (kind, _) in enumerate(events) if kind == "D")
    lists = [i for i, (kind, p) in enumerate(events) if kind == "L" and _in(p, 10, 100)]
    before = sum(i < first_delete for i in lists)
    return before, len(lists) - before


def _one_task(rec: Recording, listers: int = 1) -> tuple[TaskResult, set[str]]:
    """One task over all prefixes: M=100, pages of 3 keys, batches of 5, one in flight;
    its result and the keys its journal says it deleted."""
    task = list_and_delete_task(
        rec, 100, NOW, GRACE, 3, 5, 1, listers, lambda: NOW, 300.0, iter(range(1000)),
        journal=JournalTarget(JOURNAL),
    )
    return run_task(task, rec.inner())


@pytest.mark.parametrize("listers", [1, 4])
def test_deletes_start_before_the_listing_ends(tmp_path: Path, listers: int) -> None:
    # One task, plain Python: the store sees deletes interleaved with the listing, not a
    # listing followed by deletes.
    root = tmp_path / "store"
    make_store(root)
    garbage = _garbage(root, range(10, 40), 4)
    rec = Recording(local_spec(root), str(tmp_path / "log"))
    result, deleted = _one_task(rec, listers)
    events = rec.events()
    first_delete = next(i for i, (kind, _) in enumerate(events) if kind == "D")
    last_list = max(i for i, (kind, _) in enumerate(events) if kind == "L")
    assert first_delete < last_list / 10, (first_delete, last_list)
    assert garbage <= deleted and not (deleted & all_keys(LocalStore(root)))
    assert result.verdict == Go()


@pytest.mark.parametrize("listers", [1, 4])
def test_m_republished_lower_before_the_reread_stops_the_first_delete(
    tmp_path: Path, listers: int
) -> None:
    root = tmp_path / "store"
    make_store(root)
    _garbage(root, range(10, 40), 4)
    before = all_keys(LocalStore(root))
    rec = Recording(local_spec(root), str(tmp_path / "log"), lower_m_to=90)
    result, deleted = _one_task(rec, listers)
    assert result.verdict == Refused("M moved backwards from 100 to 90 before the first delete")
    assert not any(kind == "D" for kind, _ in rec.events())
    assert all_keys(LocalStore(root)) == before and not deleted


class _HoldsDeletes(_Recording):
    """Holds every delete request until the log has `until` list requests of the garbage
    prefixes (10-99): a task whose delete threads are scheduled late (a loaded machine)
    while its listers run on."""

    until = 0
    LIMIT_S = 300.0  # a guard, not a timing: a hold the listing cannot reach ends here,
    # and the test's lower bound fails

    def delete_batch(self, keys: list[str]) -> DeleteResult:
        deadline = time.monotonic() + self.LIMIT_S
        while time.monotonic() < deadline and sum(
            kind == "L" and _in(p, 10, 100) for kind, p in _events(self.log)
        ) < self.until:
            time.sleep(0.01)
        return super().delete_batch(keys)


@dataclass(frozen=True)
class HoldsDeletes(Recording):
    until: int = 0

    def __call__(self) -> ObjectStore:
        _append(self.log, "O")
        held = _HoldsDeletes(self.inner(), self.log, None, "", False)
        held.until = self.until
        return held


def test_the_listing_runs_no_further_ahead_of_held_deletes_than_its_bound(
    tmp_path: Path,
) -> None:
    """test_a_round_deletes_while_listing_and_rereads_m failed under load (its delete
    threads ran late while its listers ran on, and it asserted a share of the listing after
    the first delete that only a prompt scheduler gives). With every delete held until the
    listing has gone as far ahead as the bound says it can (the chunks of prefixes 0 and 1
    may use two of its places), the listing stops there: no further than the bound before
    the first delete, and the rest after it. The same task as one of that round's two."""
    root = tmp_path / "store"
    make_store(root)
    garbage = _garbage(root, range(10, 100), 3)
    most = _most_ahead(4, 4, 4, 3)  # 39 prefixes of 90: 78 list requests of 180
    rec = HoldsDeletes(local_spec(root), str(tmp_path / "log"), until=2 * (most - 2))
    task = list_and_delete_task(
        rec, 100, NOW, GRACE, 2, 4, 4, 4, lambda: NOW, 300.0, iter(range(500)),
        journal=JournalTarget(JOURNAL),
    )
    result, deleted = run_task(task, rec.inner())
    before, after = _garbage_lists_around_first_delete(rec.events())
    assert 2 * (most - 2) <= before <= 2 * most and after > 0, (before, after, most)
    assert garbage <= deleted and result.verdict == Go()


class _Failing(_Delegating):
    def list_page(
        self,
        prefix: str,
        start_after: str | None = None,
        limit: int = 1000,
        until: str | None = None,
    ) -> ListPage:
        if prefix == "level_zero/data/777/":
            raise StoreError("injected: listing 777 failed")
        return self.inner.list_page(prefix, start_after, limit, until)


def test_a_lister_thread_error_reaches_the_task_and_stops_the_others(tmp_path: Path) -> None:
    root = tmp_path / "store"
    make_store(root)
    store = _Failing(LocalStore(root))
    with pytest.raises(StoreError, match="777"):
        list(listed(store, range(1000), 100, NOW, GRACE, 3, ScanStats(), 4))
    assert not _listers()  # no lister left behind
    # Closing the generator early (a refused re-read) stops the listers too: with more
    # non-empty prefixes than the handoff holds, they cannot have finished on their own.
    _garbage(root, range(10, 40), 1)
    rows = listed(LocalStore(root), range(1000), 100, NOW, GRACE, 3, ScanStats(), 4)
    next(rows)
    assert _listers()
    rows.close()
    assert not _listers()


def _listers() -> list[str]:
    """The lister threads alive, by name: the process's thread count also moves with other
    threads (Spark's, a pool's) that start or end on their own schedule."""
    return [t.name for t in threading.enumerate() if t.name.startswith(LISTER_THREAD)]


class _StopsAt(_Recording):
    """Writes the round's STOP marker (as the driver does on SIGINT, SIGTERM or a
    --deadline) inside the task's `at`-th data-prefix list request, before it answers."""

    at = 5
    # Listers run concurrently: two may log their requests (5th, 6th) before either checks,
    # so "exactly the 5th" could be seen by none and no STOP written (CI, under load):
    # the first check at or past it writes, once.
    _once = threading.Lock()

    def list_page(
        self,
        prefix: str,
        start_after: str | None = None,
        limit: int = 1000,
        until: str | None = None,
    ) -> ListPage:
        page = super().list_page(prefix, start_after, limit, until)
        if prefix.startswith("level_zero/data/"):
            with self._once:
                if _count(self.log, "L") >= self.at and _count(self.log, "S") == 0:
                    write_marker(self.inner, JOURNAL, STOP, {"reason": "SIGINT"})
                    _append(self.log, "S")
        return page


@dataclass(frozen=True)
class StopsAt(Recording):
    def __call__(self) -> ObjectStore:
        _append(self.log, "O")
        return _StopsAt(self.inner(), self.log, None, "", False)


@pytest.mark.parametrize("listers", [1, 4])
def test_the_listing_stops_at_the_rounds_stop_marker(tmp_path: Path, listers: int) -> None:
    """Issue 41 item 2: STOP stopped a task's deletes, not its listing: Ctrl-C mid-round
    on S3 took 8-54 s (the tasks listed on to their next full batch, and another, before
    they looked), and a --deadline ended the round 17 s late. A list request begun after
    the marker exists may only be one whose lister had already looked (one per other
    lister thread)."""
    root = tmp_path / "store"
    make_store(root)
    _garbage(root, range(10, 40), 4)
    rec = StopsAt(local_spec(root), str(tmp_path / "log"))
    task = list_and_delete_task(  # batches of 1000: no batch fills before the listing ends
        rec, 100, NOW, GRACE, 3, 1000, 1, listers, lambda: NOW, 300.0, iter(range(1000)),
        journal=JournalTarget(JOURNAL), list_stop_every_s=0.0,  # a look before every page
    )
    result, deleted = run_task(task, rec.inner())
    kinds = [kind for kind, _ in rec.events()]
    assert result.deleted.stopped == 1  # its last batch met the marker, and was not sent
    after = kinds[kinds.index("S") + 1:].count("L")
    assert after <= listers - 1, f"{after} list request(s) after the STOP marker"
    assert not deleted and not any(k == "D" for k in kinds)


@pytest.mark.spark
def test_a_round_deletes_while_listing_and_rereads_m(spark: Any, tmp_path: Path) -> None:
    # Through real Spark, two tasks: deletes interleave with listing; then a round whose
    # reports drop to M=90 after the driver read them deletes nothing at or above 90
    # (here: nothing at all), exits 1 and writes no manifest.
    root = tmp_path / "store"
    eligible, _ = make_store(root)
    eligible |= _garbage(root, range(10, 100), 3)
    rec = Recording(local_spec(root), str(tmp_path / "log"))
    opts = GcOptions(grace_s=GRACE, tasks=2, page_size=2, delete_batch_size=4,
                     list_concurrency=4, delete_concurrency=4)
    s = run_gc(spark, rec, opts, clock=lambda: NOW)
    assert s.exit_code == 0 and s.deleted == len(eligible)
    # The task holding prefixes 0-499 lists its garbage prefixes (10-99, two requests
    # each) while it deletes: before the round's first delete it listed no further than
    # its bounded lookahead, however late its delete threads ran (a share "most after the
    # first delete" held only on a quiet machine: test_the_listing_runs_no_further_...),
    # and the rest after it.
    ahead, behind = _garbage_lists_around_first_delete(rec.events())
    assert ahead <= 2 * _most_ahead(4, 4, 4, 3) and behind > 0, (ahead, behind)

    root2 = tmp_path / "again"
    make_store(root2)
    _garbage(root2, range(10, 100), 3)
    before = all_keys(LocalStore(root2))
    rec2 = Recording(
        local_spec(root2), str(tmp_path / "log2"), lower_m_to=90, lower_when="driver-closed"
    )
    manifest = tmp_path / "m.parquet"
    opts2 = GcOptions(grace_s=GRACE, tasks=2, page_size=2, manifest=str(manifest))
    s = run_gc(spark, rec2, opts2, clock=lambda: NOW)
    assert s.exit_code == 1 and "backwards from 100 to 90" in (s.refused or "")
    gone = before - all_keys(LocalStore(root2))
    assert not any(parse_key(k).epoch >= 90 for k in gone)
    assert s.deleted == len(gone) == 0 and not manifest.exists()


def test_listers_default_to_four_on_s3_and_one_on_a_local_directory(tmp_path: Path) -> None:
    assert default_listers(local_spec(tmp_path)) == 1
    assert default_listers(StoreSpec("s3", "bucket", "p", "http://127.0.0.1:9")) == 4


def test_deleters_default_to_four_on_s3_and_one_on_a_local_directory(tmp_path: Path) -> None:
    # Issue 29: on a local directory more delete threads only contend for the interpreter
    # lock; one request in flight runs in the task's own thread (delete.delete_keys).
    assert GcOptions().delete_concurrency is None
    assert default_deleters(local_spec(tmp_path)) == 1
    assert default_deleters(StoreSpec("s3", "bucket", "p", "http://127.0.0.1:9")) == 4


def test_the_listing_asks_the_store_for_stop_at_most_once_per_interval() -> None:
    """A HEAD per list page doubled a round's requests on S3 (a LIST answers up to 1000
    keys): the store is asked once per `every_s` of the injected clock; the driver's death
    (a local read) at every page."""
    from epochgc.impl.gc.stream import StopSeen

    class Journal:
        heads = 0
        gone = False
        stop = False

        def driver_gone(self) -> bool:
            return self.gone

        def stop_requested(self) -> bool:
            self.heads += 1
            return self.stop

    t = [0.0]
    j = Journal()
    seen = StopSeen(j, every_s=1.0, monotonic=lambda: t[0])  # type: ignore[arg-type]
    for _ in range(50):  # fifty pages within the first second: one look
        assert not seen()
        t[0] += 0.01
    assert j.heads == 1
    t[0] = 1.0
    j.stop = True
    assert seen() and j.heads == 2 and seen() and j.heads == 2
    k = Journal()
    k.gone = True
    assert StopSeen(k)() and k.heads == 0  # type: ignore[arg-type]
