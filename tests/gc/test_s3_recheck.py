"""The re-read of M on a real S3-protocol server (moto on loopback) behind the latency proxy
(issue 12, SPEC R21a/R31): its reads go out together and alongside the task's first list
page (one round trip when the driver's reports are all there is), a report the listing
finds beyond those is still read and counted, and no delete reaches the server before the
re-read's verdict is known."""

from __future__ import annotations

import time
from collections.abc import Iterator
from itertools import combinations

import pytest

from epochgc.impl.gc.journal import JournalTarget
from epochgc.impl.gc.recheck import Refused
from epochgc.impl.gc.stream import TaskResult, list_and_delete_task
from epochgc.impl.store.url import StoreSpec
from epochgc.model.keys import format_key
from tests.gc.helpers import (
    JOURNAL,
    all_keys,
    run_task,
    simple_cluster,
    write_health,
    write_partitions,
)
from tests.store.s3proxy import S3Proxy, Span, s3_proxy

pytestmark = pytest.mark.s3

# Every request waits this long at the proxy: requests sent one after another never
# overlap, requests sent together overlap unless a thread starts this late.
LATENCY_S = 0.5


@pytest.fixture
def slow(s3_endpoint: str) -> Iterator[S3Proxy]:
    with s3_proxy(s3_endpoint, latency_s=LATENCY_S) as p:
        yield p


def _setup(bucket: str, endpoint: str, reports_m: int) -> set[str]:
    """Three nodes' reports (cluster M = `reports_m`) and 24 keys with epochs 1-3."""
    store = StoreSpec("s3", bucket, "c", endpoint)()
    now = time.time()  # the store's LastModified is real time: the reports are fresh
    simple_cluster(store, reports_m, now=now)
    write_health(store, "n3", now - 10, [("t/0", reports_m)])
    keys = {format_key(p, 1 + i % 3, f"obj-{i}") for p in range(4) for i in range(6)}
    for key in keys:
        store.put(key, b"x")
    return keys


DRIVER_READ = tuple(f"_cluster/health/n{i}.json" for i in (1, 2, 3))


def _task(
    bucket: str, proxy: S3Proxy, m: int, seen: tuple[str, ...] = DRIVER_READ
) -> tuple[TaskResult, set[str]]:
    """One task as Spark runs it: M=`m` and the reports `seen` by the driver, 8 prefixes,
    4 listers, batches of 5 keys (the first one is ready after the first page), 4 deletes
    in flight."""
    spec = StoreSpec("s3", bucket, "c", proxy.endpoint, connections=16)
    rows = list_and_delete_task(
        spec,
        m,
        time.time(),
        0.0,
        1000,
        5,
        4,
        4,
        time.time,
        300.0,
        iter(range(8)),
        journal=JournalTarget(JOURNAL),
        report_keys=seen,
    )
    out = run_task(rows, spec())
    assert proxy.wait_recorded(), proxy.in_flight  # its last answers' spans, recorded
    return out


def _reread(spans: list[Span]) -> tuple[Span, Span, list[Span]]:
    """The task's re-read: (snapshot GET, report listing, report GETs)."""
    (snapshot,) = [s for s in spans if s.kind == "get" and "partitions.json" in s.path]
    (listing,) = [s for s in spans if s.kind == "list" and "health" in s.path]
    reports = [s for s in spans if s.kind == "get" and "/_cluster/health/" in s.path]
    return snapshot, listing, reports


def test_the_reread_overlaps_the_first_page_and_precedes_every_delete(
    s3_endpoint: str, s3_bucket: str, slow: S3Proxy
) -> None:
    keys = _setup(s3_bucket, s3_endpoint, 10)
    _, deleted = _task(s3_bucket, slow, 10)
    spans = list(slow.spans)
    snapshot, listing, reports = _reread(spans)
    first_page = min((s for s in spans if "level_zero" in s.path), key=lambda s: s.arrived)
    # One round trip for the snapshot, the report listing, the three reports the driver
    # read and the first data page.
    together = [snapshot, listing, *reports, first_page]
    assert len(reports) == 3 and all(a.overlaps(b) for a, b in combinations(together, 2)), spans
    deletes = [s for s in spans if s.kind == "delete"]
    assert deletes and min(d.arrived for d in deletes) >= max(
        s.answered for s in (snapshot, listing, *reports)
    ), spans
    assert deleted == keys
    assert not all_keys(StoreSpec("s3", s3_bucket, "c", s3_endpoint)()) & keys


def test_a_lowered_report_seen_by_the_reread_refuses_every_delete(
    s3_endpoint: str, s3_bucket: str, slow: S3Proxy
) -> None:
    # The driver computed M=10; by the task's re-read the reports say 5. The first batch
    # is listed well before the re-read's verdict (one round trip against two): a task
    # that deleted before knowing it would have deleted here.
    keys = _setup(s3_bucket, s3_endpoint, 5)
    result, deleted = _task(s3_bucket, slow, 10)
    assert result.verdict == Refused("M moved backwards from 10 to 5 before the first delete")
    assert not [s for s in slow.spans if s.kind == "delete"]
    assert not deleted
    assert keys <= all_keys(StoreSpec("s3", s3_bucket, "c", s3_endpoint)())


def test_a_report_beyond_the_drivers_is_read_after_the_listing_and_counts(
    s3_endpoint: str, s3_bucket: str, slow: S3Proxy
) -> None:
    # The driver read n1-n3 (M=10); since, partition t/2 was created and its replica on
    # a new node n4 reports 4. Only the listing names n4, so its read is a second round
    # trip; the task counts it (without it the round would be blocked on t/2) and refuses.
    keys = _setup(s3_bucket, s3_endpoint, 10)
    store = StoreSpec("s3", s3_bucket, "c", s3_endpoint)()
    write_partitions(store, 10**6, ["t/0", "t/1", "t/2"])
    write_health(store, "n4", time.time() - 10, [("t/2", 4)])
    result, _ = _task(s3_bucket, slow, 10)
    assert result.verdict == Refused("M moved backwards from 10 to 4 before the first delete")
    spans = list(slow.spans)
    _, listing, reports = _reread(spans)
    (late,) = [s for s in reports if s.path.endswith("/n4.json")]
    assert late.arrived >= listing.answered, spans
    assert not [s for s in spans if s.kind == "delete"]
    assert keys <= all_keys(store)


def test_an_expected_report_gone_since_is_not_counted(
    s3_endpoint: str, s3_bucket: str, slow: S3Proxy
) -> None:
    # The driver read n1-n3 and a fourth node's report that is gone now: the re-read asks
    # for it with the others, finds it missing and, as the listing does not name it,
    # neither fails nor counts it (here the round goes on with M=10).
    keys = _setup(s3_bucket, s3_endpoint, 10)
    result, deleted = _task(s3_bucket, slow, 10, (*DRIVER_READ, "_cluster/health/gone.json"))
    assert not isinstance(result.verdict, Refused)
    assert any(s.path.endswith("/gone.json") for s in slow.spans)
    assert deleted == keys
