"""Reviewer's tests for issue 38's go-on channel (branch i38m, review rev38m)."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from epochgc.impl.gc import gate as gate_mod
from epochgc.impl.gc.delete import delete_keys
from epochgc.impl.gc.gate import Gate, GateTarget
from epochgc.impl.gc.journal import (
    START,
    Attempt,
    JournalTarget,
    JournalWriter,
    journal_prefix,
    read_journal,
    write_marker,
)
from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.gc.recover import recover_dead_rounds
from epochgc.impl.store.base import StoreError
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key
from tests.gc.helpers import all_keys, put_local
from tests.gc.test_carried_outcomes import BATCH, CONCURRENCY, PREFIX, _Recording
from tests.gc.test_gate import _Counting, _keys


@pytest.mark.xfail(strict=True, reason="rev38m finding 1")
def test_a_task_told_go_stops_once_a_recovery_wrote_stop(tmp_path: Path) -> None:
    """A round recovered while its driver still answers "go" (its lease looked expired to
    another host: the driver's wall clock behind or stepped back when it wrote the lease,
    whose expiry is wall-clock while `Lease.firm` is monotonic; or `gc-admin reset --force`).
    The recovery writes STOP, reads the journal back and writes the round's `killed`
    record. On main the task's next batch HEADs STOP and sends nothing more; with the
    gate it never looks at STOP again, so every later batch is in no record (until the
    live driver, if it survives, writes its own)."""
    inner = LocalStore(tmp_path / "s", create=True)
    keys = _keys(inner, 160)
    live_round = "20270115T070000.000Z-l1vedr1v"
    prefix = journal_prefix(live_round)
    write_marker(inner, prefix, START, {"round": live_round, "M": 100,
                                        "snapshot_revision": 7, "options": {}})

    def after(n: int) -> None:
        if n == 4:
            recover_dead_rounds(inner, "test", lambda: set())

    store = _Counting(inner, after)
    with Gate("127.0.0.1", lambda: True) as gate:  # the live driver: lease firm, no stop
        writer = JournalWriter(store, JournalTarget(prefix, gate=gate.target),
                               Attempt(0, 0, 0, 1))
        delete_keys(store, ((k, 1, 0.0, "") for k in keys), batch_size=10, concurrency=1,
                    journal=writer)
    left = set(keys) - all_keys(inner)
    [doc] = [json.loads(inner.get(o.key)) for o in inner.list_all(ROUNDS_PREFIX)
             if o.key.endswith(".json")]
    assert store.sent == 4 and doc["counts"]["deleted"] == len(left), (
        f"the recovered record says {doc['counts']['deleted']} deleted; {len(left)} left the "
        f"store ({store.sent} DeleteObjects, 4 before the recovery wrote STOP)")


@pytest.mark.xfail(strict=True, reason="rev38m finding 1")
def test_a_lease_firm_to_its_driver_is_live_to_every_reader(tmp_path: Path) -> None:
    """The trigger of finding 1 with no operator: the driver's wall clock stepped back (a
    VM resumed, an NTP step: issue 38 item 6 treats a 1 h step as real) before a lease
    write. `Lease.firm` measures from the monotonic clock, the lease document's expiry is
    wall-clock, so the driver's gate keeps saying "go" while every other host (the next
    round, `gc-admin show`) reads the lease as expired and recovers the round."""
    from epochgc.impl.gc.lease import Lease
    from epochgc.impl.gc.recover import live_rounds

    store = LocalStore(tmp_path / "s", create=True)
    lease = Lease(lambda: LocalStore(store.root), "20270115T070000.000Z-l1vedr1v",
                  clock=lambda: time.time() - 3600.0)
    lease.acquire()
    try:
        assert lease.firm()
        assert live_rounds(store, time.time()) == {lease.round_id}, (
            "the driver's gate says go (lease firm) while a reader on a true clock finds "
            f"the lease expired: running rounds {live_rounds(store, time.time())}")
    finally:
        lease.release()


def test_a_gate_of_another_round_on_the_dead_drivers_port_is_not_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held: the driver that answered dies and a later round's driver binds the same port
    and answers "go" to everyone. Its answers are signed with another secret: silence to
    the straggler, which has been answered before, so it stops."""
    monkeypatch.setattr(gate_mod, "ASK_TIMEOUT_S", 0.2)
    monkeypatch.setattr(gate_mod, "ASK_TRIES", 2)
    inner = LocalStore(tmp_path / "s", create=True)
    keys = _keys(inner, 100)
    prefix = journal_prefix("20270115T070000.000Z-0ldr0und")
    first = Gate("127.0.0.1", lambda: True)
    later: list[Gate] = []

    def after(n: int) -> None:
        if n == 3:
            first.close()
            other = Gate.__new__(Gate)  # bound on the dead driver's port, its own secret
            other._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            other._sock.bind(("127.0.0.1", first.target.port))
            other.target = GateTarget("127.0.0.1", first.target.port, b"x" * 32)
            other._is_open = lambda: True
            other._closed = threading.Event()
            other._thread = threading.Thread(target=other._run, daemon=True)
            other._thread.start()
            later.append(other)

    store = _Counting(inner, after)
    try:
        writer = JournalWriter(store, JournalTarget(prefix, gate=first.target),
                               Attempt(0, 0, 0, 1))
        stats = delete_keys(store, ((k, 1, 0.0, "") for k in keys), batch_size=10,
                            concurrency=1, journal=writer)
    finally:
        first.close()
        for g in later:
            g.close()
    assert later, "the later round's gate was never bound"
    assert store.sent == 3 and stats.stopped == 1


class _FailingCarrier(_Recording):
    """The first intent that carries outcomes fails to be written (StoreError); with
    `alone_too` so does every `done` written alone after it (the store stays down)."""

    def __init__(self, inner: LocalStore, alone_too: bool) -> None:
        super().__init__(inner)
        self.alone_too, self.failed = alone_too, False

    def put(self, key: str, data: bytes) -> None:
        if key.endswith(".intent.json") and not self.failed and b'"done":' in data:
            self.failed = True
            raise StoreError("injected: the carrying intent's PUT failed")
        if self.failed and self.alone_too and key.endswith(".done.json"):
            raise StoreError("injected: the store is still down")
        super().put(key, data)


@pytest.mark.parametrize("alone_too", [False, True])
def test_a_carrying_intent_that_fails_leaves_a_journal_that_reads_what_left(
    tmp_path: Path, alone_too: bool
) -> None:
    """Held: the intent carrying earlier batches' outcomes cannot be written. Its batch is
    not sent; the outcomes it carried are written alone (or, if that fails too, their
    batches are intents without done, resolved by asking the store). New and old readers
    both count exactly what left the store."""
    inner = LocalStore(tmp_path / "s", create=True)
    keys = [format_key(i % 100, 5, f"k{i:05d}") for i in range(200)]
    for k in keys:
        put_local(tmp_path / "s", k, 0.0)
    store = _FailingCarrier(inner, alone_too)
    writer = JournalWriter(store, JournalTarget(PREFIX), Attempt(0, 0, 0, 1))
    store.writer = writer
    with pytest.raises(StoreError):
        delete_keys(store, ((k, 1, 0.0, "") for k in keys), batch_size=BATCH,
                    concurrency=CONCURRENCY, pool=None, journal=writer)
    assert store.failed
    left = set(keys) - all_keys(inner)
    assert left == store.sent and left
    totals = read_journal(inner, PREFIX)
    assert set(totals.deleted) == left, (len(totals.deleted), len(left))
    assert not (set(totals.errors) & left)
    if not alone_too:  # the carried outcomes were written alone: nothing left to resolve
        assert totals.unfinished == 0, f"{totals.unfinished} batches resolved by the store"
