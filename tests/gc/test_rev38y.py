"""Review rev38y of i38y (issue 38): the record's counts after a Spark-retried task (item
7). The finding was a strict xfail; fixed by i38z, the test pins the fix."""

from __future__ import annotations

from pathlib import Path

from epochgc.impl.gc.journal import (
    Attempt,
    JournalTarget,
    JournalWriter,
    journal_prefix,
    read_journal,
)
from epochgc.impl.gc.stage import listed_elsewhere, partial_listing
from epochgc.impl.gc.summary import GcSummary
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key

PREFIX = journal_prefix("20270115T100000.000Z-rev38y00")


def test_keys_a_stopped_retry_listed_and_its_killed_twin_named_count_once(
    tmp_path: Path
) -> None:
    """Attempt 0 of a partition journals its intent for k0..k3 and is killed -9 before it
    sends (nothing deleted). Spark retries the task; the retry lists k0..k3 again (its
    ScanStats: 4 listed, 4 eligible) and the round is stopped (SIGTERM) before the retry's
    group is submitted: `delete_keys` breaks at `stop.is_set()` and writes no intent, and
    the retry returns (stopped). The journal's read-back with the retry returned takes
    k0..k3 as keys only the killed attempt named and `listed_elsewhere` adds them to the
    retry's own count of the same 4 keys."""
    store = LocalStore(tmp_path, create=True)
    keys = [format_key(1, 5, f"k{i}") for i in range(4)]
    for k in keys:
        store.put(k, b"x")
    killed, retry = Attempt(1, 0, 0, 1), Attempt(1, 1, 0, 2)
    JournalWriter(store, JournalTarget(PREFIX), killed).intent(
        [(k, 1, 1.0, "") for k in keys])  # killed before its request: nothing sent
    # The retry wrote nothing (stopped before its group's intent).
    # The retry returned stopped (its DeleteStats.stopped, as stage.py passes it).
    t = read_journal(store, PREFIX, returned={retry.name()}, stopped={retry.name()},
                     before_asking=lambda n, ago: False)
    s = GcSummary(journal=PREFIX, M=7, listed=4, fetched=4, eligible=4, eligible_bytes=4)
    s.deleted, s.gone_unattributed = len(t.deleted), len(t.gone_unattributed)
    listed_elsewhere(s, t)
    partial_listing(s, t)  # the round was stopped: the record's counts are "at least"
    assert all(store.head(k) is not None for k in keys)  # 4 keys, none deleted
    assert (s.eligible, s.listed) == (4, 4), (
        f"4 keys exist, both attempts listed the same 4, yet the record says at least "
        f"{s.listed} listed, {s.eligible} eligible ({s.eligible_bytes} bytes)")
