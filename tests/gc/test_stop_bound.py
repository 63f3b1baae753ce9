"""Issue 38, review rev38m findings 2-4: the bound from a round's STOP to its last request
(`impl/gc/bounds.py`), enforced where it is claimed; the recovery waits it; the watch
checks the lease with no task asking; the lease is renewed while the round recovers others.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.gc import recover as recover_mod
from epochgc.impl.gc.bounds import (
    CONNECT_TIMEOUT_S,
    MAX_STOP_WITHIN_S,
    READ_TIMEOUT_S,
    REQUEST_IN_WITHIN_S,
    send_within_s,
    stop_within_s,
)
from epochgc.impl.gc.delete import delete_keys
from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.journal import (
    START,
    STOP,
    Attempt,
    JournalTarget,
    JournalWriter,
    journal_prefix,
    write_marker,
)
from epochgc.impl.gc.lease import DEFAULT_LEASE_S
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.gc.recover import recover_dead_rounds
from epochgc.impl.gc.stop import RoundStop
from epochgc.impl.gc.watch import LEASE_UNSURE, RoundWatch
from epochgc.impl.store.base import StoreError
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.s3 import S3Store
from epochgc.model.keys import format_key
from tests.gc.helpers import NOW, local_spec, simple_cluster
from tests.store.s3proxy import Call, Fault, s3_proxy

DEAD = "20270115T060000.000Z-deadr0nd"


def _start(store: LocalStore, round_id: str, **extra: Any) -> str:
    prefix = journal_prefix(round_id)
    write_marker(store, prefix, START, {"round": round_id, "M": 100, "snapshot_revision": 7,
                                        "options": {}, **extra})
    return prefix


@pytest.mark.parametrize(("given", "waits"), [
    ({"stop_within_s": 240.0}, 240.0),  # the round's own bound
    ({}, None),  # a START of a version whose tasks HEAD STOP before each batch: no wait
    ({"stop_within_s": "soon"}, MAX_STOP_WITHIN_S),  # damaged: the longest
    ({"stop_within_s": 1e9}, MAX_STOP_WITHIN_S),  # capped
])
def test_the_recovery_waits_the_rounds_bound_after_its_stop(
    tmp_path: Path, given: dict[str, Any], waits: float | None
) -> None:
    """Finding 1's second half: between writing STOP and reading back, the recovery waits
    the dead round's own bound (from its START), once for all the rounds it recovers."""
    store = LocalStore(tmp_path / "s", create=True)
    prefix = _start(store, DEAD, **given)
    other = _start(store, "20270115T050000.000Z-0ther0nd")  # a pre-bound round: no wait
    slept: list[tuple[float, bool, bool]] = []

    def sleep(s: float) -> None:  # both STOPs are written before the wait
        slept.append((s, store.head(prefix + STOP) is not None,
                      store.head(other + STOP) is not None))

    told: list[float] = []
    done = recover_dead_rounds(store, "test", lambda: set(), sleep=sleep,
                               waiting=lambda s, _rounds: told.append(s))
    assert len(done) == 2
    # in steps of WAIT_STEP_S (newuser4 F3: the operator is told what is left after each)
    assert sum(s for s, _, _ in slept) == (0 if waits is None else waits)
    assert all(a and b for _, a, b in slept)
    assert told == ([] if waits is None else [waits])  # the whole wait, said first


def test_a_round_writes_its_bound_in_its_start() -> None:
    """The bound a START carries, with the default lease: a look's freshness (90 s) plus a
    quarter of the lease (150 s), of which the last request's way into the server (a
    connect, a TLS handshake, two writes: 4 connect timeouts, then a read timeout: review
    rev38z11 finding 1), plus a read timeout for the last copy an intermediary sent as that
    attempt ended (review rev38z9: 240 s fell 60 s short of it)."""
    assert REQUEST_IN_WITHIN_S == 4 * CONNECT_TIMEOUT_S + READ_TIMEOUT_S == 100.0
    assert send_within_s(DEFAULT_LEASE_S) == DEFAULT_LEASE_S / 4 - REQUEST_IN_WITHIN_S == 50.0
    assert stop_within_s(DEFAULT_LEASE_S) == 300.0


def test_the_watch_stops_a_round_whose_lease_is_unsure_with_no_task_asking(
    tmp_path: Path,
) -> None:
    """Finding 3: `lease-unsure` was decided only inside a task's ask; tasks that gave the
    gate up for STOP (UDP filtered) ran on. Now each look of the watch asks the lease too.
    Old code: `AssertionError: None` (the look passed)."""
    store = LocalStore(tmp_path / "s", create=True)
    simple_cluster(store, 100, now=time.time())
    firm = [True]
    stop = RoundStop()
    watch = RoundWatch(lambda: LocalStore(store.root), stop, time.time, 3600.0, 3600.0,
                       lambda _v: None, firm=lambda: firm[0])
    assert watch.poll_once() is None
    firm[0] = False
    assert watch.poll_once() == LEASE_UNSURE
    assert watch._look() and stop.reason == LEASE_UNSURE


@pytest.mark.spark
def test_the_lease_is_renewed_while_the_round_recovers_others(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 4: `_round` took the lease, recovered every dead round (each waits its bound
    now: 240 s), and only then started renewing; a recovery longer than a quarter of the
    lease left the round `lease-unsure`, longer than its whole duration let it expire.
    Now the renewals run during the recovery. Old code: `AssertionError: no renewal thread
    while the round recovered a dead one`."""
    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    simple_cluster(store, 100)
    _start(store, DEAD, stop_within_s=stop_within_s(DEFAULT_LEASE_S))
    seen: list[float] = []

    def sleep(s: float) -> None:
        assert any(t.name == "epochgc-lease" for t in threading.enumerate()), (
            "no renewal thread while the round recovered a dead one")
        seen.append(s)

    monkeypatch.setattr(recover_mod, "SLEEP", sleep)
    s = run_gc(spark, local_spec(root), GcOptions(tasks=1), clock=lambda: NOW)
    assert s.recovered == [DEAD] and sum(seen) == stop_within_s(DEFAULT_LEASE_S), s


# --- finding 2: a batch's requests are sent within its bound (S3, moto and SeaweedFS) ---


class _Late:
    """A clock for the store's `send_by`: moved past the deadline by the fault plan."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_the_s3_client_gives_up_an_attempt_within_its_timeouts(
    s3_endpoint: str, s3_bucket: str
) -> None:
    """The bound's last link: botocore's connect and read timeouts are set, not its 60 s
    defaults left implicit (old code: 60 and 60)."""
    config = S3Store(s3_bucket, "gc", endpoint_url=s3_endpoint).client.meta.config
    assert (config.connect_timeout, config.read_timeout) == (CONNECT_TIMEOUT_S,
                                                             READ_TIMEOUT_S)


def test_a_delete_retried_past_its_deadline_is_not_sent_and_is_resolved(
    s3_endpoint: str, s3_bucket: str
) -> None:
    """Finding 2: the first DeleteObjects is applied and answered 500 (S3: such a request
    "might not have processed"), and by then the batch's time is up: botocore's retry is
    not sent (old code: botocore re-sent it, up to 10 attempts of 60 + 60 s each: no
    bound), and the keys, ambiguous, are resolved by asking the store: all gone (not
    attributed to the request: its answer was a 500, review rev38x finding 1)."""
    clock = _Late()

    def faults(call: Call) -> Fault | None:
        if call.kind == "delete":
            clock.t = 100.0  # the batch's time runs out while this request is answered
            return Fault.APPLIED_THEN_500 if call.attempt == 0 else None
        return None

    with s3_proxy(s3_endpoint, faults=faults) as p:
        store = S3Store(s3_bucket, "gc-late", endpoint_url=p.endpoint)
        store.monotonic = clock
        keys = [format_key(i, 5, f"k{i}") for i in range(3)]
        for k in keys:
            store.put(k, b"x")
        with store.send_by(50.0):
            result = store.delete_batch(keys)
        deletes = sum(n for (kind, _), n in p.calls.items() if kind == "delete")
        assert deletes == 1, f"{deletes} DeleteObjects sent past the batch's deadline"
        assert result.gone_unattributed == set(keys) and not result.errors, result
        assert all(store.head(k) is None for k in keys)


def test_a_batch_told_go_too_long_ago_sends_nothing(
    s3_endpoint: str, s3_bucket: str
) -> None:
    """The task's side: `delete_keys` bounds each batch's intent and delete from before its
    "go on?" by the journal's `send_within_s`; past it nothing of the batch is sent (here:
    a bound already over, so the intent PUT is refused and the batch never reaches its
    DeleteObjects)."""
    with s3_proxy(s3_endpoint) as p:
        store = S3Store(s3_bucket, "gc-task", endpoint_url=p.endpoint)
        keys = [format_key(i, 5, f"t{i}") for i in range(4)]
        for k in keys:
            store.put(k, b"x")
        puts_before = sum(n for (kind, _), n in p.calls.items() if kind == "put")
        writer = JournalWriter(store, JournalTarget(journal_prefix(DEAD), send_within_s=-1.0),
                               Attempt(0, 0, 0, 1))
        with pytest.raises(StoreError, match="not sent: past the time"):
            delete_keys(store, ((k, 1, 0.0, "") for k in keys), batch_size=2,
                        concurrency=1, journal=writer)
        kinds = {kind for (kind, _), n in p.calls.items() if n}
        puts = sum(n for (kind, _), n in p.calls.items() if kind == "put")
        assert "delete" not in kinds and puts == puts_before, p.calls
        assert all(store.head(k) is not None for k in keys)


def test_the_same_batch_in_time_is_sent(s3_endpoint: str, s3_bucket: str) -> None:
    """The boundary: the default bound (80 s) lets an ordinary batch through."""
    store = S3Store(s3_bucket, "gc-ok", endpoint_url=s3_endpoint)
    keys = [format_key(i, 5, f"o{i}") for i in range(4)]
    for k in keys:
        store.put(k, b"x")
    writer = JournalWriter(store, JournalTarget(journal_prefix(DEAD),
                                                send_within_s=send_within_s(DEFAULT_LEASE_S)),
                           Attempt(0, 0, 0, 1))
    stats = delete_keys(store, ((k, 1, 0.0, "") for k in keys), batch_size=2, concurrency=1,
                        journal=writer)
    assert stats.deleted == 4 and all(store.head(k) is None for k in keys)
