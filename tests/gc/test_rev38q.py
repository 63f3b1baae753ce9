"""Review rev38q: issue 38's deletion path as merged (main 648f116), attacked as one whole:
the gate, carried outcomes, the send deadline, the recovery and S3's ambiguous answers.

Each failing test is `xfail(strict=True, reason="rev38q finding N")`; the report is
/work/notes/review38q.md."""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from epochgc.impl.gc.delete import delete_keys
from epochgc.impl.gc.gate import Gate
from epochgc.impl.gc.journal import (
    Attempt,
    JournalTarget,
    JournalWriter,
    journal_prefix,
    read_journal,
)
from epochgc.impl.store.base import DeleteResult, ObjectInfo, StoreError
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.retry import Backoff, Retrier
from epochgc.impl.store.s3 import S3Store
from epochgc.model.keys import format_key
from tests.gc.helpers import all_keys, left_per_journal, put_local
from tests.store.s3proxy import Call, Fault, s3_proxy

D = "level_zero/data/001/000000000000000005/"  # journaled keys are data keys (R20)

PREFIX = journal_prefix("20270115T100000.000Z-rev38q00")


def _s3(bucket: str, endpoint: str) -> S3Store:
    # Two attempts per request and per key (botocore and the key retry): fast, and each
    # retry meets the same fault.
    return S3Store(bucket, "c", endpoint_url=endpoint, max_attempts=2,
                   key_retry=Retrier(Backoff(attempts=2, base_s=0.0, cap_s=0.0),
                                     random.Random(1), lambda s: None))


def _items(keys: list[str]) -> list[tuple[str, int, float, str]]:
    return [(k, 1, 7200.0, "") for k in keys]


@pytest.mark.s3
def test_a_batch_whose_outcome_is_unknown_is_resolved_by_the_read_back(
    s3_endpoint: str, s3_bucket: str
) -> None:
    """DeleteObjects applied and answered 500 on every attempt (S3: "might not have
    processed"), and the HEADs that would resolve it fail too (the same outage): the task
    journals each key as an error whose outcome is "unknown". The read-back, later, with
    the store answering again, must ask the store about such keys, not count them as
    failed: they left the store, and the next round will never list them."""
    keys = [f"{D}k{i}" for i in range(4)]
    direct = _s3(s3_bucket, s3_endpoint)
    for k in keys:
        direct.put(k, b"x")

    def plan(c: Call) -> Fault | None:
        if c.kind == "delete":
            return Fault.APPLIED_THEN_500
        if c.kind == "head" and "/data/" in c.key:
            return Fault.NOT_APPLIED_500
        return None

    with s3_proxy(s3_endpoint, faults=plan, quiet=True) as p:
        store = _s3(s3_bucket, p.endpoint)
        writer = JournalWriter(store, JournalTarget(PREFIX), Attempt(0, 0, 0, 1))
        stats = delete_keys(store, _items(keys), batch_size=4, concurrency=1,
                            journal=writer)
        store.close()
    try:
        left = [k for k in keys if direct.head(k) is None]
        totals = read_journal(direct, PREFIX)
    finally:
        direct.close()
    assert left == keys, left  # the server applied the delete
    assert left_per_journal(totals) == set(left) and not totals.errors, (
        f"{len(left)} keys left the store; the task counted {stats.deleted} deleted, "
        f"{stats.errors} errors; the read-back (the store answering again) says "
        f"{len(totals.deleted)} deleted, {len(totals.gone_unattributed)} gone unattributed, "
        f"{len(totals.errors)} errors: {sorted(totals.errors.values())[:1]}")
    # Answered 500 ("might not have processed"): no answer says the round removed them.
    assert not totals.deleted, totals.deleted


class _Clock:
    """The send-deadline clock (CLOCK_BOOTTIME in production), stepped by the test: what a
    stalled executor (a long GC pause, a frozen container, a suspend) looks like to it."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class _StalledLocal(LocalStore):
    """Batch 0's delete answers only once batch 1 is on its way (its outcome then waits to
    ride in batch 1's intent, as on a busy pipeline); batch 1's "go on?" (the HEAD of STOP)
    answers once that outcome is waiting, and then the executor stalls past the batch's
    send deadline before it writes batch 1's intent."""

    writer: JournalWriter
    clock: _Clock
    asks = 0

    def head(self, key: str) -> ObjectInfo | None:
        if key.endswith("/STOP"):
            self.asks += 1
            if self.asks == 2:  # batch 0's outcome waiting, or (it found a key gone:
                # review rev38v finding 5) written alone at once
                _until(lambda: bool(self.writer._carry) or any(
                    n.endswith("/00000000.done.json") for n in self.writer.written()))
                self.clock.t += 1000.0  # past send_within_s (80 s)
        return super().head(key)

    def delete_if_unchanged(self, items: list[tuple[str, str]]) -> DeleteResult:
        if items[0][0].endswith("k0000"):
            _until(lambda: self.writer._coming > 0)
        return super().delete_if_unchanged(items)


def _until(cond: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 60
    while not cond():
        assert time.monotonic() < deadline, "the pipeline never reached the state"
        time.sleep(0.001)


def test_an_outcome_waiting_for_an_intent_refused_by_the_deadline_is_still_journaled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batch 0's outcome waits to ride in batch 1's intent. Batch 1's executor stalls past
    its send deadline between its "go" and its intent: the intent PUT is refused, so
    `intent` writes the waiting outcomes alone, but inside batch 1's `send_by` bound,
    which refuses them too (the StoreError is swallowed). Batch 0's outcome is then in no
    entry: the read-back asks the store, and a key another writer had removed before the
    round's delete (`gone`) is counted as deleted by the round."""
    clock = _Clock()
    monkeypatch.setattr("epochgc.impl.gc.delete.send_clock", clock)
    monkeypatch.setattr("epochgc.impl.store.local.send_clock", clock)
    root = tmp_path / "s"
    store = _StalledLocal(root, create=True)
    store.clock = clock
    keys = [format_key(1, 5, f"k{i:04d}") for i in range(8)]
    for k in keys:
        put_local(root, k, 7200.0)
    os.unlink(root / keys[1])  # removed by someone else after the listing
    writer = JournalWriter(store, JournalTarget(PREFIX, send_within_s=80.0),
                           Attempt(0, 0, 0, 1))
    store.writer = writer
    with pytest.raises(StoreError):  # batch 1's intent: refused, the task fails
        delete_keys(store, _items(keys), batch_size=4, concurrency=2, journal=writer,
                    group=1)  # one batch per intent: the outcome waits for the next
    assert all_keys(store) == set(keys[4:])  # batch 0 deleted (k1 was gone), batch 1 not
    entries = sorted(o.key.rsplit("/", 1)[1] for o in store.list_all(PREFIX))
    totals = read_journal(store, PREFIX)
    assert keys[1] not in totals.deleted and len(totals.deleted) == 3, (
        f"batch 0 deleted 3 keys and found {keys[1]} already gone; its outcome waited for "
        f"batch 1's intent, which the send deadline refused, and was written nowhere "
        f"(journal entries: {entries}); the read-back counts {len(totals.deleted)} "
        f"deleted (the key another writer removed among them), already gone "
        f"{sorted(totals.already_gone)}")


def test_an_attempt_that_first_asks_after_the_stage_ended_sends_nothing(tmp_path: Path) -> None:
    """A round that completes writes no STOP: its driver closes the gate once `collect`
    returns, reads the journal back and writes the record. An attempt of that stage still
    running then (a speculative copy being killed, an executor taken for lost that is
    not: the PySpark worker outlives the kill by `spark.python.task.killTimeout`) that has
    not asked yet gets no answer (port unreachable, or silence across hosts): "never
    answered" falls back to a HEAD of STOP, finds none, and deletes. Its keys are those the
    completed attempt failed on, which the record says are "listed again next round"; they
    leave the store after the read-back, in no record."""
    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    key = format_key(1, 5, "k0000")
    put_local(root, key, 7200.0)  # the key the round's record lists as an error
    gate = Gate("127.0.0.1", lambda: True)
    target = JournalTarget(PREFIX, gate=gate.target, send_within_s=80.0)
    gate.close()  # the stage is over: the driver reads the journal back
    before = read_journal(store, PREFIX)
    late = JournalWriter(store, target, Attempt(0, 1, 0, 2))
    stats = delete_keys(store, _items([key]), batch_size=1, concurrency=1, journal=late)
    assert key in all_keys(store), (
        f"an attempt whose first ask met the closed gate deleted {stats.deleted} key(s) "
        f"after the read-back (which counted {len(before.deleted)}): no STOP exists for a "
        "round that completed, so the HEAD it falls back to said go")


def test_a_key_two_attempts_saw_differently_counts_once(tmp_path: Path) -> None:
    """Two attempts of one partition (a speculative copy, a retry after a lost executor)
    both journal key k: one was killed after its intent (resolved by asking the store:
    still there, an error), the other's conditional delete found k rewritten since it was
    listed (`changed`). The record counts the key in both: one key, two outcomes."""
    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    key = format_key(1, 5, "k0000")
    put_local(root, key, 7200.0)
    a = JournalWriter(store, JournalTarget(PREFIX), Attempt(0, 0, 0, 1))
    a.intent(_items([key]))  # killed before its request
    b = JournalWriter(store, JournalTarget(PREFIX), Attempt(0, 1, 0, 2))
    seq = b.intent(_items([key]))
    b.done(seq, DeleteResult(1, changed={key}))
    totals = read_journal(store, PREFIX)
    counted = {"errors": key in totals.errors, "changed": key in totals.changed,
               "deleted": key in totals.deleted, "already_gone": key in totals.already_gone}
    assert sum(counted.values()) == 1, f"one key, counted as {counted}"


class _OneHeadFails(LocalStore):
    """The data store as the read-back sees it: one HEAD fails (EACCES on a directory, a
    503 storm outlasting botocore's retries); `heals()` ends it."""

    failing: str | None = None

    def head(self, key: str) -> ObjectInfo | None:
        if key == self.failing:
            raise StoreError(f"cannot stat {key!r}: [Errno 13] Permission denied")
        return super().head(key)


def test_one_head_failing_in_the_read_back_does_not_lose_the_rounds_count_for_good(
    tmp_path: Path
) -> None:
    """A dead round: batch 0 deleted 2 keys (its outcome journaled), batch 1's attempt was
    killed after its request (2 keys, one of them gone). Its recovery reads the journal
    back and one HEAD of batch 1's keys fails: `read_journal` raises, so the recovered
    record says the journal could not be read back and 0 deleted; it is final (a round
    with a record is never looked at again), though the CLI's own message for that state
    says "gc-admin show reads it again". Issue 38 item 2 asked the read-back to skip what
    it cannot read, count the rest and say how much it could not."""
    from epochgc.impl.gc.journal import START, write_marker
    from epochgc.impl.gc.recover import recover_dead_rounds, stop_dead_rounds

    round_id = "20270115T100000.000Z-rev38q05"
    prefix = journal_prefix(round_id)
    root = tmp_path / "s"
    store = _OneHeadFails(root, create=True)
    keys = [format_key(1, 5, f"k{i:04d}") for i in range(4)]
    for k in keys:
        put_local(root, k, 7200.0)
    write_marker(store, prefix, START, {"round": round_id, "M": 9, "stop_within_s": 1.0})
    w = JournalWriter(store, JournalTarget(prefix), Attempt(0, 0, 0, 1))
    seq = w.intent(_items(keys[:2]))
    w.done(seq, store.delete_if_unchanged([(k, "") for k in keys[:2]]))
    w.intent(_items(keys[2:]))
    store.delete_if_unchanged([(keys[3], "")])  # sent, answered, then killed: no outcome
    store.failing = keys[2]  # still there, but its HEAD fails during the read-back
    got = recover_dead_rounds(store, "gc-admin reset", lambda: set(),
                              sleep=lambda s: None)
    store.failing = None
    again = stop_dead_rounds(store, "gc-admin show", lambda: set())  # what show does
    record = json.loads(store.get(f"_cluster/gc/rounds/{round_id}.json"))
    counts = record["counts"]
    # Batch 0's 2 keys by its answer; batch 1's key 3 found absent, its answer unrecorded.
    assert (counts["deleted"], counts["gone_unattributed"]) == (2, 1), (
        f"3 keys of the dead round left the store; one HEAD failed during its recovery's "
        f"read-back and its record says deleted {counts['deleted']}, gone unattributed "
        f"{counts.get('gone_unattributed')}, journal_read "
        f"{record.get('journal_read')}, error {record.get('error')!r} (recovered: "
        f"{[r.deleted for r in got]}); `gc-admin show` afterwards recorded {again} "
        "(nothing reads a recorded round's journal again)")
