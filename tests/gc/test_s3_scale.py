"""GC rounds on S3 at its boundary: per-key errors in 200 replies, many requests in
flight, listing tasks that do not depend on executor registration (issue 12 item 4/5)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.gc import stage
from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.gc.stage import listing_tasks
from epochgc.impl.store.base import ObjectStore
from epochgc.impl.store.url import StoreSpec
from epochgc.model.keys import PREFIXES, format_key
from tests.gc.helpers import all_keys, local_spec, simple_cluster
from tests.store.s3proxy import S3Proxy, s3_proxy

pytestmark = [pytest.mark.spark, pytest.mark.s3]
_NOW_OK: dict[str, Any] = {"grace_s": 0.0, "allow_short_grace": True}  # objects are new


def _throttle(key: str, attempt: int) -> str | None:
    # A third of the keys are throttled twice per key inside 200 replies, then succeed.
    if "/obj" in key and int(key.rsplit("-", 1)[1]) % 3 == 0 and attempt < 2:
        return "SlowDown"
    if key.endswith("/never"):
        return "InternalError"
    return None


@pytest.fixture
def throttling(s3_endpoint: str) -> Iterator[S3Proxy]:
    with s3_proxy(s3_endpoint, fail=_throttle) as p:
        yield p


def _populate(store: ObjectStore, m: int) -> set[str]:
    eligible = set()
    for p in (0, 7, 500, 999):
        for i in range(15):
            key = format_key(p, 1 + i % 5, f"obj-{i}")
            store.put(key, b"xy")
            eligible.add(key)
        store.put(format_key(p, m + 1, "live"), b"xy")
    return eligible


def test_per_key_errors_are_retried_then_counted_in_a_round(
    spark: Any, s3_bucket: str, s3_endpoint: str, throttling: S3Proxy,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """Throttled keys are retried until gone; one that keeps failing is retried a bounded
    number of times, then counted (exit 1) and left for the next round. The stuck key's
    per-key InternalError is no final answer (review rev38z4 finding 1): the read-back asks
    for the wait for requests that may still be at the server (`stage.SENT_APPLIED_S`),
    recorded and asserted, not slept (70 s of CI time)."""
    waited: list[float] = []
    monkeypatch.setattr(stage, "SENT_WAIT_SLEEP", waited.append)
    direct = StoreSpec("s3", s3_bucket, "c", s3_endpoint)()
    simple_cluster(direct, 10, now=time.time())  # real time: ages also use LastModified
    eligible = _populate(direct, 10)
    stuck = format_key(3, 2, "never")
    direct.put(stuck, b"x")
    before = all_keys(direct)
    spec = StoreSpec("s3", s3_bucket, "c", throttling.endpoint)
    options = GcOptions(**_NOW_OK, delete_batch_size=7, delete_concurrency=3)
    s = run_gc(spark, spec, options)
    assert throttling.injected["SlowDown"] >= 2 * (len(eligible) // 3), s.lines()
    assert (s.exit_code, s.errors, s.deleted) == (1, 1, len(eligible)), s.lines()
    assert any("InternalError" in e for e in s.error_samples)
    assert waited and all(0 < w <= stage.SENT_APPLIED_S for w in waited), waited
    assert before - all_keys(direct) == eligible  # the stuck key is still there
    assert 1 < throttling.delete_attempts["c/" + stuck] <= 10  # retried, and bounded
    # The proxy timed every DeleteObjects (the S3 benchmark's deleting phase uses them).
    assert len(throttling.delete_spans) >= s.delete_requests > 0, s.lines()  # + retries
    assert all(start <= end for start, end in throttling.delete_spans)


@dataclass(frozen=True)
class OpenLog:
    """A store factory that records each open by a Spark task (stage, partition)."""

    inner: StoreSpec
    log: str

    def __call__(self) -> ObjectStore:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is not None:
            fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            try:
                os.write(fd, f"{ctx.stageId()} {ctx.partitionId()}\n".encode())
            finally:
                os.close(fd)
        return self.inner()


def test_listing_tasks_are_a_function_of_the_prefix_count(spark: Any, tmp_path: Path) -> None:
    """Not of defaultParallelism (2 here; 2 on a cluster before executors register)."""
    spec = local_spec(tmp_path / "store")
    store = spec()
    simple_cluster(store, 10, now=time.time())
    store.put(format_key(4, 3, "a"), b"x")
    log = str(tmp_path / "opens")
    s = run_gc(
        spark, OpenLog(spec, log), GcOptions(grace_s=0, allow_short_grace=True, dry_run=True)
    )
    assert s.eligible == 1
    tasks = listing_tasks(PREFIXES, spark.sparkContext.master)
    assert spark.sparkContext.defaultParallelism != tasks
    opens = Path(log).read_text().split("\n")[:-1]
    first_stage = min(int(line.split()[0]) for line in opens)  # the listing
    listing = {line for line in opens if int(line.split()[0]) == first_stage}
    assert len(listing) == tasks
    assert listing_tasks(PREFIXES) == listing_tasks(PREFIXES, "spark://h:7077") == 20


@pytest.mark.parametrize(("master", "tasks"), [
    ("local", 2), ("local[1]", 2), ("local[2]", 4), ("local[2,3]", 4), ("local[3 , 2]", 6),
    ("local[10]", 20), ("local[64]", 20), ("yarn", 20), ("local-cluster[2,1,1024]", 20),
    ("k8s://https://h:6443", 20),
])
def test_a_local_master_gets_two_listing_tasks_per_core(master: str, tasks: int) -> None:
    # Issue 29: every task's launch (tens of ms) is paid on the local master's own cores.
    assert listing_tasks(PREFIXES, master) == tasks


def test_local_star_counts_this_machines_cores() -> None:
    assert listing_tasks(PREFIXES, "local[*]") == min(20, 2 * (os.cpu_count() or 1))
