"""Issue 38, GC on S3 at the limit: the requests a round spends after its last delete.

On main before this change a round, once its tasks returned, read every journal entry back
from the store one GET at a time (80 of a 40-batch round's 323 requests beyond the least on
SeaweedFS) while its watch went on looking at the pause state and the health reports (65
more). The returned attempts' entries now come back with their results; the store is read
only for what did not return; the watch stops once no task runs."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.gc import journal as journal_mod
from epochgc.impl.gc.delete import delete_keys
from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.journal import (
    JOURNAL_PREFIX,
    Attempt,
    JournalTarget,
    JournalWriter,
    journal_prefix,
    read_journal,
)
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.store.base import ListPage, ObjectInfo, ObjectStore
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.url import StoreSpec
from epochgc.model.keys import format_key
from tests.gc.helpers import NOW, _Delegating, all_keys, local_spec
from tests.gc.test_job import GRACE, clock, make_store


def _log(path: str, doc: list[Any]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (json.dumps(doc) + "\n").encode())  # one O_APPEND write: atomic
    finally:
        os.close(fd)


class _Logging(_Delegating):
    """Logs every GET of a journal entry (and with `heads`, every HEAD), and at each
    listing of a round's journal (the driver's read-back) whether the round's watch thread
    is still alive."""

    def __init__(self, inner: ObjectStore, log: str, heads: bool) -> None:
        super().__init__(inner)
        self.log, self.heads = log, heads

    def head(self, key: str) -> ObjectInfo | None:
        if self.heads:
            _log(self.log, ["head", key])
        return self.inner.head(key)

    def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        if key.startswith(JOURNAL_PREFIX):
            _log(self.log, ["get", key])
        return self.inner.get(key, start, end)

    def list_page(self, prefix: str, start_after: str | None = None, limit: int = 1000,
                  until: str | None = None) -> ListPage:
        if prefix.startswith(JOURNAL_PREFIX) and prefix != JOURNAL_PREFIX:
            watching = any(t.name == "epochgc-watch" and t.is_alive()
                           for t in threading.enumerate())
            _log(self.log, ["readback", watching])
        return self.inner.list_page(prefix, start_after, limit, until)


@dataclass(frozen=True)
class LoggingFactory:
    inner: StoreSpec
    log: str
    heads: bool = False

    def __call__(self) -> ObjectStore:
        return _Logging(self.inner(), self.log, self.heads)

    def calls(self) -> list[list[Any]]:
        if not os.path.exists(self.log):
            return []
        return [json.loads(line) for line in Path(self.log).read_text().splitlines()]


@pytest.mark.spark
def test_a_round_reads_back_no_entry_its_returned_tasks_wrote_and_no_longer_watches(
    spark: Any, tmp_path: Path
) -> None:
    eligible, rest = make_store(tmp_path)
    store = LoggingFactory(local_spec(tmp_path), str(tmp_path.parent / "calls.log"))
    s = run_gc(spark, store, GcOptions(grace_s=GRACE, tasks=3, delete_batch_size=2,
                                       watch_interval_s=0.01), clock=clock)
    assert s.exit_code == 0 and s.deleted == len(eligible), s
    assert all_keys(LocalStore(tmp_path)) >= rest
    assert not eligible & all_keys(LocalStore(tmp_path))
    calls = store.calls()
    gets = [c[1] for c in calls if c[0] == "get" and "/" in c[1][len(JOURNAL_PREFIX):]
            and c[1].endswith((".intent.json", ".done.json"))]
    assert s.delete_requests >= 6
    assert gets == [], f"{len(gets)} journal entries read back one GET each: {gets[:4]}"
    readbacks = [c[1] for c in calls if c[0] == "readback"]
    assert readbacks and not any(readbacks), "the watch still looked during the read-back"


def _deleted_by(store: LocalStore, prefix: str, attempt: Attempt, keys: list[str]) -> None:
    writer = JournalWriter(store, JournalTarget(prefix), attempt)
    delete_keys(store, ((k, 1, 0.0, "") for k in keys), batch_size=3, concurrency=1,
                journal=writer)
    return None


class _CountingGets(_Delegating):
    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.gets: list[str] = []

    def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        self.gets.append(key)
        return self.inner.get(key, start, end)


def _store_with_keys(tmp_path: Path, n: int) -> tuple[LocalStore, list[str]]:
    inner = LocalStore(tmp_path / "s", create=True)
    keys = [format_key(i % 100, 5, f"k{i:04d}") for i in range(n)]
    for k in keys:
        inner.put(k, b"x")
    return inner, keys


def test_the_read_back_gets_only_what_did_not_return(tmp_path: Path) -> None:
    """Two attempts; one returned its entries (`known`), the other (killed, a speculative
    copy whose result Spark dropped) did not: only the latter's are read, and the totals
    are those of a read of everything."""
    inner, keys = _store_with_keys(tmp_path, 20)
    prefix = journal_prefix("20270115T080000.000Z-kn0wn000")
    returned = JournalWriter(inner, JournalTarget(prefix), Attempt(0, 0, 0, 1))
    delete_keys(inner, ((k, 1, 0.0, "") for k in keys[:10]), batch_size=3, concurrency=1,
                journal=returned)
    _deleted_by(inner, prefix, Attempt(0, 1, 1, 2), keys[10:])
    known = returned.written()
    # 4 batches of the first attempt, two per intent: 2 intents and 2 dones
    assert len(known) == 4
    counting = _CountingGets(inner)
    totals = read_journal(counting, prefix, known=known)
    plain = read_journal(inner, prefix)
    assert set(totals.deleted) == set(plain.deleted) == set(keys)
    assert totals.batches == plain.batches == 8
    assert counting.gets and all("-t2/" in k for k in counting.gets), counting.gets
    assert len(counting.gets) == 4  # the other attempt's 2 intents and 2 dones


def test_a_task_past_the_known_limit_returns_none_and_is_read_from_the_store(
    tmp_path: Path,
) -> None:
    inner, keys = _store_with_keys(tmp_path, 12)
    prefix = journal_prefix("20270115T080000.000Z-l1m1t000")
    writer = JournalWriter(inner, JournalTarget(prefix, known_limit=300), Attempt(0, 0, 0, 1))
    delete_keys(inner, ((k, 1, 0.0, "") for k in keys), batch_size=3, concurrency=1,
                journal=writer)
    assert writer.written() == {}
    assert set(read_journal(inner, prefix, known=writer.written()).deleted) == set(keys)


@pytest.mark.spark
def test_the_tasks_share_of_the_result_size_limit(spark: Any) -> None:
    """All tasks' entries together stay within half of spark.driver.maxResultSize (1 GiB by
    default): 20 tasks may return 26 MiB each, 200 tasks 2.6 MiB."""
    from epochgc.impl.gc.stage import known_limit

    assert known_limit(spark.sparkContext, 20) == (1 << 30) // 40
    assert known_limit(spark.sparkContext, 200) == (1 << 30) // 400
    assert known_limit(spark.sparkContext, 1) == journal_mod.KNOWN_LIMIT


def test_known_entries_are_taken_only_for_what_the_listing_shows(tmp_path: Path) -> None:
    """The listing says what exists: an entry only the caller has (not in the store) adds
    nothing, so `known` can never make a batch that is not in the journal count."""
    inner = LocalStore(tmp_path / "s", create=True)
    prefix = journal_prefix("20270115T080000.000Z-l1st0nly")
    forged = {"p0000-s0-a0-t9/00000000.intent.json":
              json.dumps({"keys": ["level_zero/data/001/5/x"], "sizes": [1],
                          "ages": [NOW]}).encode()}
    totals = read_journal(inner, prefix, known=forged)
    assert not totals.deleted and totals.batches == 0
