"""Issue 41 (i41y item 1): a control-plane read of a store that throttles (503 SlowDown)
is retried with jittered exponential backoff for longer than a read that fails otherwise
(`impl/store/readretry.py`). With 3 attempts for everything, 30 % of answers SlowDown
failed 1 `gc-admin show` in 12, and a burst of three on the first HEAD failed a round.

Real: moto on loopback behind `s3proxy` answering a seeded share of requests 503 SlowDown
(not forwarded, as S3 refuses a throttled request). The backoff's randomness is a seeded
Random and its sleep records the wait instead of sleeping: no test waits on a clock."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.gc.reports import HEALTH_PREFIX, PARTITIONS_KEY
from epochgc.impl.store.base import StoreError
from epochgc.impl.store.patience import (
    ATTEMPTS_ENV,
    READ_TIMEOUT_ENV,
    SAY_AFTER_ENV,
    THROTTLED_BASE_ENV,
    Patience,
)
from epochgc.impl.store.readretry import Failure, Tries, Waiter, classify
from epochgc.impl.store.s3 import S3Store
from tests.store.s3proxy import Call, Fault, FaultPlan, S3Proxy, s3_proxy
from tests.store.s3server import DUMMY_AWS_ENV

pytest.importorskip("boto3")
pytestmark = pytest.mark.s3

ROOT = Path(__file__).resolve().parents[2]
HEAD = "/{bucket}/p1/_cluster/partitions.json"


class Recorder:
    """The sleep of the backoff: records each wait, sleeps none."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def bucket(moto_store_bucket: str) -> str:
    return moto_store_bucket


@dataclass
class Proxied:
    """The proxy in front of moto, and the fault plan the test sets."""

    proxy: S3Proxy | None = None
    plan: FaultPlan = lambda _call: None

    @property
    def endpoint(self) -> str:
        assert self.proxy is not None
        return self.proxy.endpoint

    def faulted(self, fault: Fault) -> int:
        assert self.proxy is not None
        return self.proxy.faulted[fault]


@pytest.fixture
def proxied(moto_endpoint: str) -> Iterator[Proxied]:
    p = Proxied()
    with s3_proxy(moto_endpoint, faults=lambda call: p.plan(call)) as proxy:
        p.proxy = proxy
        yield p


def _store(proxied: Proxied, bucket: str, sleep: Recorder) -> S3Store:
    return S3Store(bucket, "p1", endpoint_url=proxied.endpoint, patience=Patience(),
                   read_waiter=Waiter(random.Random(41), sleep))


def _first(n: int, fault: Fault, path: str) -> FaultPlan:
    """`fault` for the first `n` HEADs of `path`."""
    return lambda call: (fault if (call.kind, call.key) == ("head", path) and call.attempt < n
                         else None)


def test_a_burst_of_three_slowdowns_on_the_first_read_is_waited_out(
        proxied: Proxied, bucket: str) -> None:
    """Old code: StoreError "head '_cluster/partitions.json' ... failed: An error occurred
    (503) when calling the HeadObject operation (reached max retries: 2): Service
    Unavailable" (3 attempts, the third throttled too)."""
    proxied.plan = _first(3, Fault.SLOW_DOWN, HEAD.format(bucket=bucket))
    sleep = Recorder()
    store = _store(proxied, bucket, sleep)
    try:
        assert store.head(PARTITIONS_KEY) is not None
    finally:
        store.close()
    assert proxied.faulted(Fault.SLOW_DOWN) == 3
    # botocore's throttling backoff: rand * min(1 s * 2**i, 20 s) before retry i
    assert len(sleep.waits) == 3
    assert all(0 <= w <= min(2.0**i, 20.0) for i, w in enumerate(sleep.waits)), sleep.waits


def _share(seed: int, share: float) -> FaultPlan:
    """SlowDown for a seeded `share` of requests, each decided by (path, attempt) alone,
    so the plan does not depend on the order of the requests; the path without its bucket,
    whose name counts the buckets made before (it made the draws, so the count of faults,
    depend on which tests ran first: 1 failure in a directory run, passing alone)."""
    def plan(call: Call) -> Fault | None:
        path = call.key.split("/", 2)[-1]
        draw = random.Random(f"{seed}:{call.kind}:{path}:{call.attempt}").random()
        return Fault.SLOW_DOWN if draw < share else None
    return plan


def test_a_store_throttling_30_percent_of_answers_is_read_every_time(
        proxied: Proxied, bucket: str) -> None:
    """Six times the control reads of a `gc-admin show` (is it a store, the cluster view,
    the pause state, the lease, the rounds, versioning), 30 % of answers SlowDown (the
    tester saw 1 `show` in 12 fail; six keep the suite short). Old code, on the 3rd: "get
    bucket versioning in s3://.../p1/ at ... failed: An error occurred (SlowDown) when
    calling the GetBucketVersioning operation (reached max retries: 2): Please reduce your
    request rate." (seeds 1, 3 and 5 fail it too)."""
    proxied.plan = _share(2, 0.3)
    sleep = Recorder()
    store = _store(proxied, bucket, sleep)
    try:
        for _ in range(6):
            assert store.head(PARTITIONS_KEY) is not None
            assert store.get(PARTITIONS_KEY)
            assert store.list_page(HEALTH_PREFIX).objects
            assert store.get_versioned("_cluster/gc/admin.json", 4096) is None
            assert store.get_versioned("_cluster/gc/lease.json", 4096) is None
            store.list_page("_cluster/gc/rounds/")
            assert store.versioning() is None
    finally:
        store.close()
    assert proxied.faulted(Fault.SLOW_DOWN) >= 10  # it did throttle


def test_500_to_everything_still_fails_after_three_quick_attempts(
        proxied: Proxied, bucket: str) -> None:
    """K4 (newuser9): an endpoint answering 500 InternalError is not throttling: its bound
    stays 3 attempts with botocore's 50 ms backoff base (at most 0.05 + 0.1 s)."""
    proxied.plan = lambda _call: Fault.NOT_APPLIED_500
    sleep = Recorder()
    store = _store(proxied, bucket, sleep)
    try:
        with pytest.raises(StoreError, match=r"failed: .*\(500\)"):
            store.head(PARTITIONS_KEY)
    finally:
        store.close()
    assert proxied.faulted(Fault.NOT_APPLIED_500) == 3
    assert len(sleep.waits) == 2 and sum(sleep.waits) <= 0.15, sleep.waits


def test_a_store_that_keeps_throttling_ends_after_its_bound_naming_it(
        proxied: Proxied, bucket: str) -> None:
    proxied.plan = lambda _call: Fault.SLOW_DOWN
    sleep = Recorder()
    store = _store(proxied, bucket, sleep)
    try:
        with pytest.raises(StoreError) as e:
            store.get(PARTITIONS_KEY)
    finally:
        store.close()
    assert proxied.faulted(Fault.SLOW_DOWN) == 10
    assert len(sleep.waits) == 9
    assert str(e.value).startswith(
        f"get '_cluster/partitions.json' in s3://{bucket}/p1/ at "), e.value
    assert (f": still throttled after 10 attempts ({sum(sleep.waits):.1f} s of backoff): "
            "SlowDown: ") in str(e.value), e.value


def _client_error(status: int, code: str) -> Exception:
    from botocore.exceptions import ClientError

    response: Any = {"Error": {"Code": code, "Message": "m"},
                     "ResponseMetadata": {"HTTPStatusCode": status}}
    return ClientError(response, "HeadObject")


@pytest.mark.parametrize(("status", "code", "kind"), [
    (503, "SlowDown", Failure.THROTTLED),
    (503, "503", Failure.THROTTLED),  # a HEAD's answer: no body, the status is the code
    (429, "429", Failure.THROTTLED),
    (400, "RequestLimitExceeded", Failure.THROTTLED),
    (400, "ThrottlingException", Failure.THROTTLED),
    (500, "InternalError", Failure.TRANSIENT),
    (502, "502", Failure.TRANSIENT),
    (400, "RequestTimeout", Failure.TRANSIENT),
    (404, "NoSuchKey", Failure.FINAL),
    (403, "AccessDenied", Failure.FINAL),
])
def test_what_is_throttling(status: int, code: str, kind: Failure) -> None:
    assert classify(_client_error(status, code)) is kind


def test_no_answer_is_transient_and_the_waiting_line_says_which() -> None:
    from botocore.exceptions import EndpointConnectionError, ReadTimeoutError

    assert classify(ReadTimeoutError(endpoint_url="http://x")) is Failure.TRANSIENT
    assert classify(EndpointConnectionError(endpoint_url="http://x")) is Failure.TRANSIENT
    assert classify(ValueError("x")) is Failure.FINAL
    tries = Tries()
    assert tries.say() == "no answer yet"
    tries.counts[Failure.THROTTLED], tries.last = 4, Failure.THROTTLED
    assert tries.say() == "throttled (4 attempts so far), backing off"


def test_gc_admin_show_waits_out_a_burst_of_slowdowns(
        proxied: Proxied, bucket: str, tmp_path: Path) -> None:
    """The command, end to end (its backoff base made 10 ms through the environment).
    Old code: exit 1, "gc-admin: show: cannot read _cluster/partitions.json: head ...
    (reached max retries: 2): Service Unavailable"."""
    proxied.plan = _first(3, Fault.SLOW_DOWN, HEAD.format(bucket=bucket))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWS_") and not k.startswith("EPOCHGC_")}
    env.update(PYTHONPATH=str(ROOT), **DUMMY_AWS_ENV,
               **{READ_TIMEOUT_ENV: "600", ATTEMPTS_ENV: "3", SAY_AFTER_ENV: "600",
                  THROTTLED_BASE_ENV: "0.01"})
    p = subprocess.run([sys.executable, "-m", "epochgc", "gc-admin", "show", "--json",
                        "--store", f"s3://{bucket}/p1", "--s3-endpoint",
                        proxied.endpoint],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "cannot read" not in p.stderr, p.stderr
    assert p.returncode in (0, 2), p.stderr  # what the cluster gives (its reports' age)
    assert proxied.faulted(Fault.SLOW_DOWN) == 3
