"""Issue 38, S3 at the limit: on a store answering in tens of seconds (the bench at a small
server share: ~23 s a request), a batch whose intent was written and which then waits for a
delete slot behind others' requests must still be sent, within its bound (`bounds.py`: no
request later than `send_within_s` after the "go on?" it was sent on).

Before: a batch asked once, before its intent, and the pipeline (4 chains per slot) then
waited for a slot: behind 3 requests of 30 s its DeleteObjects came more than 80 s after
its ask, and the send bound refused it (its keys not deleted, each an error). Now each
request asks again right before it is sent, holding its slot. The clock is injected (each
request moves it 30 s): nothing here waits. The journal is written through a store that
bounds nothing (the default `send_by`), so that what is checked is the DeleteObjects'
bound alone: an intent is sent right after its ask in real time, while here other threads'
requests may move the injected clock in between."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.gc import delete as delete_mod
from epochgc.impl.gc.delete import PIPELINE, delete_keys
from epochgc.impl.gc.gate import Gate
from epochgc.impl.gc.journal import (
    Attempt,
    JournalTarget,
    JournalWriter,
    journal_prefix,
    read_journal,
)
from epochgc.impl.store import local as local_mod
from epochgc.impl.store.base import DeleteResult, StoreError
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key
from tests.gc.helpers import _Delegating, all_keys, put_local

PREFIX = journal_prefix("20270115T100000.000Z-s10wreq0")
REQUEST_S = 30.0
SEND_WITHIN_S = 80.0


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        with self.lock:
            return self.t

    def advance(self, s: float) -> None:
        with self.lock:
            self.t += s


class _SlowDeletes(_Delegating):
    """Each DeleteObjects takes `REQUEST_S` on the injected clock (after it is applied, so
    its own send is checked at the time it was sent)."""

    def __init__(self, inner: LocalStore, clock: _Clock) -> None:
        super().__init__(inner)
        self.clock = clock

    def send_by(self, deadline: float | None) -> Any:
        return self.inner.send_by(deadline)

    def delete_if_unchanged(self, items: list[tuple[str, str]]) -> DeleteResult:
        try:
            return self.inner.delete_if_unchanged(items)
        finally:
            self.clock.advance(REQUEST_S)


@pytest.mark.parametrize("gated", [True, False], ids=["gate", "store-stop"])
def test_a_batch_waiting_for_a_slot_behind_slow_requests_is_sent_within_its_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gated: bool
) -> None:
    clock = _Clock()
    monkeypatch.setattr(delete_mod, "send_clock", clock)
    monkeypatch.setattr(local_mod, "send_clock", clock)
    root = tmp_path / "s"
    inner = LocalStore(root, create=True)
    keys = [format_key(i % 100, 5, f"k{i:05d}") for i in range(16)]
    for k in keys:
        put_local(root, k, 0.0)
    store = _SlowDeletes(inner, clock)
    with Gate("127.0.0.1", lambda: True) as gate:
        target = JournalTarget(PREFIX, gate=gate.target if gated else None,
                               send_within_s=SEND_WITHIN_S)
        writer = JournalWriter(_Delegating(LocalStore(root)), target, Attempt(0, 0, 0, 1))
        # One delete slot, a pool of workers: batches wait for the slot behind others'
        # requests, and no other request runs between a request's ask and its send.
        with ThreadPoolExecutor(PIPELINE) as pool:
            stats = delete_keys(store, ((k, 1, 0.0, "") for k in keys), batch_size=1,
                                concurrency=1, pool=pool, journal=writer)
    late = {k: why for k, why in read_journal(inner, PREFIX).errors.items()}
    assert not late and stats.errors == 0, (
        f"{len(late)} of 16 batches refused by the send bound: each request took "
        f"{REQUEST_S:g} s, and a batch asked before its intent waited behind others' "
        f"requests for a slot past {SEND_WITHIN_S:g} s: {sorted(set(late.values()))}")
    assert all_keys(inner).isdisjoint(keys) and stats.deleted == 16


class _StalledLocal(LocalStore):
    """(rev38q finding 2's scenario, one batch per intent.) Batch 0's delete answers only
    once batch 1 is on its way (its outcome then waits to ride in batch 1's intent); batch
    1's "go on?" (the HEAD of STOP) answers once that outcome waits, and then the executor
    stalls past the send bound before it writes batch 1's intent."""

    writer: JournalWriter
    clock: _Clock
    asks = 0

    def head(self, key: str) -> Any:
        if key.endswith("/STOP"):
            self.asks += 1
            if self.asks == 2:
                _until(self._outcome_out)
                self.clock.advance(1000.0)  # past send_within_s (80 s)
        return super().head(key)

    def _outcome_out(self) -> bool:
        """Batch 0's outcome waits to ride (a clean one) or is written alone at once (one
        that found a key gone, since review rev38v finding 5)."""
        return bool(self.writer._carry) or any(
            o.key.endswith(".done.json") for o in self.list_all(PREFIX))

    def delete_if_unchanged(self, items: list[tuple[str, str]]) -> DeleteResult:
        if items[0][0].endswith("k0000"):
            _until(lambda: self.writer._coming > 0)
        return super().delete_if_unchanged(items)


def _until(cond: Any) -> None:
    deadline = time.monotonic() + 60  # a bound for a hung test, not a timing assumption
    while not cond():
        assert time.monotonic() < deadline, "the pipeline never reached the state"
        time.sleep(0.001)


def test_an_outcome_waiting_for_an_intent_its_send_bound_refuses_is_written_at_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review rev38q finding 2: batch 0's outcome waited to ride in batch 1's intent, whose
    PUT the send bound refused; `intent` then wrote the waiting outcome alone inside that
    same bound, refused too, and it was in no entry: the read-back asked the store and
    counted a key another writer had removed (`gone`) as deleted by the round. Now the
    outcome waits again and the task's end writes it (outside any batch's bound). One
    batch per intent (`group=1`), as in the review's scenario: the path is the same for
    two."""
    clock = _Clock()
    monkeypatch.setattr(delete_mod, "send_clock", clock)
    monkeypatch.setattr(local_mod, "send_clock", clock)
    root = tmp_path / "s"
    store = _StalledLocal(root, create=True)
    store.clock = clock
    keys = [format_key(1, 5, f"k{i:04d}") for i in range(8)]
    for k in keys:
        put_local(root, k, 7200.0)
    (root / keys[1]).unlink()  # removed by someone else after the listing
    writer = JournalWriter(store, JournalTarget(PREFIX, send_within_s=SEND_WITHIN_S),
                           Attempt(0, 0, 0, 1))
    store.writer = writer
    with pytest.raises(StoreError):  # batch 1's intent: refused, the task fails
        delete_keys(store, ((k, 1, 7200.0, "") for k in keys), batch_size=4,
                    concurrency=2, journal=writer, group=1)
    assert all_keys(store) == set(keys[4:])  # batch 0 deleted (k1 was gone), batch 1 not
    totals = read_journal(store, PREFIX)
    assert keys[1] not in totals.deleted and len(totals.deleted) == 3, (
        f"batch 0's outcome (3 deleted, {keys[1]} already gone) is in no entry: the "
        f"read-back counts {len(totals.deleted)} deleted, already gone "
        f"{sorted(totals.already_gone)}")
    assert totals.already_gone == {keys[1]}
