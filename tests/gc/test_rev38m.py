"""Reviewer's tests for issue 38's go-on channel (branch i38m, review rev38m)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from epochgc.impl.gc import gate as gate_mod
from epochgc.impl.gc.bounds import LOOK_FRESH_S, STOP_LOOK_EVERY_S, stop_within_s
from epochgc.impl.gc.delete import delete_keys
from epochgc.impl.gc.gate import Gate
from epochgc.impl.gc.journal import (
    START,
    STOP,
    Attempt,
    JournalTarget,
    JournalWriter,
    journal_prefix,
    read_journal,
    write_marker,
)
from epochgc.impl.gc.lease import DEFAULT_LEASE_S, LEASE_KEY
from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.gc.recover import recover_dead_rounds
from epochgc.impl.gc.stop import RoundStop
from epochgc.impl.gc.watch import RoundWatch, go_on
from epochgc.impl.store.base import StoreError
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key
from tests.gc.helpers import all_keys, left_per_journal, put_local, simple_cluster
from tests.gc.test_carried_outcomes import BATCH, CONCURRENCY, PREFIX, _Recording
from tests.gc.test_gate import _Counting, _keys


class _Clock:
    """The driver's monotonic clock, moved by the recovery's wait (no test waits)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def _live_driver(inner: LocalStore, prefix: str,
                 clock: _Clock) -> tuple[RoundStop, RoundWatch, Gate]:
    """A live driver as `stage._streaming_round` makes it: its watch HEADs the round's STOP
    each look (here: once at the start, then only when the test says), its gate answers
    `go_on` (no lease: always firm here)."""
    simple_cluster(inner, 100, now=time.time())  # healthy: the watch's looks pass
    stop = RoundStop()
    watch = RoundWatch(lambda: LocalStore(inner.root), stop, time.time, 3600.0, 3600.0,
                       lambda _v: None, stop_key=prefix + STOP, monotonic=clock)
    assert watch.poll_once() is None  # the first look: STOP absent, the gate is fresh
    return stop, watch, Gate("127.0.0.1", go_on(stop, None, watch, LOOK_FRESH_S))


@pytest.mark.parametrize("watch_looks", [False, True])
def test_a_task_told_go_stops_once_a_recovery_wrote_stop(
    tmp_path: Path, watch_looks: bool
) -> None:
    """A round recovered while its driver still answers "go" (its lease looked expired to
    another host: the driver's wall clock behind or stepped back when it wrote the lease,
    whose expiry is wall-clock while `Lease.firm` is monotonic; or `gc-admin reset --force`).
    The recovery writes STOP, waits the round's stop bound (its START's `stop_within_s`),
    reads the journal back and writes the round's `killed` record. On i38m the task never
    looked at STOP again and every later batch was in no record (the recovered record said
    40 deleted, 160 left the store). Now: the driver's watch sees STOP at its next look and
    the gate says no (`watch_looks`), and if it does not look (a watch that has stalled),
    the gate says no once its last look is older than `LOOK_FRESH_S`, which the recovery's
    wait covers: nothing is sent after the read-back and the record is what left."""
    inner = LocalStore(tmp_path / "s", create=True)
    keys = _keys(inner, 160)
    live_round = "20270115T070000.000Z-l1vedr1v"
    prefix = journal_prefix(live_round)
    write_marker(inner, prefix, START, {"round": live_round, "M": 100,
                                        "snapshot_revision": 7, "options": {},
                                        "stop_within_s": stop_within_s(DEFAULT_LEASE_S)})
    clock = _Clock()
    stop, watch, gate = _live_driver(inner, prefix, clock)
    recovered: list[int] = []
    waited: list[float] = []

    def wait(s: float) -> None:  # the recovery's wait; meanwhile the live driver looks
        waited.append(s)
        if watch_looks:  # its next HEAD of STOP, once the last is STOP_LOOK_EVERY_S old
            clock.sleep(STOP_LOOK_EVERY_S)
            watch._look()
            s -= STOP_LOOK_EVERY_S
        clock.sleep(s)

    def after(n: int) -> None:
        if n == 4:
            recover_dead_rounds(inner, "test", lambda: set(), sleep=wait)
            recovered.append(store.sent)

    store = _Counting(inner, after)
    with gate:
        writer = JournalWriter(store, JournalTarget(prefix, gate=gate.target),
                               Attempt(0, 0, 0, 1))
        delete_keys(store, ((k, 1, 0.0, "") for k in keys), batch_size=10, concurrency=1,
                    journal=writer)
    left = set(keys) - all_keys(inner)
    [doc] = [json.loads(inner.get(o.key)) for o in inner.list_all(ROUNDS_PREFIX)
             if o.key.endswith(".json")]
    assert sum(waited) == stop_within_s(DEFAULT_LEASE_S) and recovered == [4]
    counts = doc["counts"]
    assert store.sent == 4 and counts["deleted"] + counts["gone_unattributed"] == len(left), (
        f"the recovered record says {counts['deleted']} deleted and "
        f"{counts['gone_unattributed']} gone unattributed; {len(left)} left the store "
        f"({store.sent} DeleteObjects, 4 before the recovery wrote STOP)")
    assert counts["deleted"] <= 30, counts  # 3 requests of 10 keys answered before it
    assert stop.reason == ("stop-marker" if watch_looks else "watch-late")


def test_a_lease_whose_clock_stepped_back_is_not_firm(tmp_path: Path) -> None:
    """The trigger of finding 1 with no operator: the driver's wall clock steps back (a VM
    resumed, an NTP step: issue 38 item 6 treats a 1 h step as real) before a lease
    renewal. `Lease.firm` measures from the monotonic clock, the lease document's expiry is
    wall-clock, so on i38m the gate kept saying "go" while every other host (the next
    round, `gc-admin show`) read the lease as expired and recovered the round (i38m:
    "the driver's gate says go (lease firm) while a reader on a true clock finds the lease
    expired: running rounds set()"). Now a step since the last lease write makes the lease
    unsure for good: the gate says no (the round stops as `lease-unsure`)."""
    from epochgc.impl.gc.lease import Lease
    from epochgc.impl.gc.recover import live_rounds

    store = LocalStore(tmp_path / "s", create=True)
    step = [0.0]
    lease = Lease(lambda: LocalStore(store.root), "20270115T070000.000Z-l1vedr1v",
                  clock=lambda: time.time() + step[0])
    lease.acquire()
    try:
        assert lease.firm() and live_rounds(store, time.time()) == {lease.round_id}
        step[0] = -3600.0  # the step, then a renewal
        assert lease._renew() is None
        # s28e (rev38z10 finding 6): the renewal after a step writes its times measured on
        # the monotonic clock from the last write before the step, no longer the stepped
        # clock's, so a reader on a true clock still reads the lease as live (on i38m it
        # read it as expired, and recovered the running round); the gate says no anyway.
        assert live_rounds(store, time.time()) == {lease.round_id}
        assert not lease.firm(), "the driver's gate says go (lease firm) after a step"
        assert lease.stepped is not None and "-3600" in lease.stepped
        stop = RoundStop()
        assert not go_on(stop, lease.firm, None, LOOK_FRESH_S)()
        assert stop.reason == "lease-unsure"
    finally:
        lease.release()


def test_a_lease_without_a_step_stays_firm(tmp_path: Path) -> None:
    """The boundary of the step check: a wall clock that moves with the monotonic one (a
    steady skew from other hosts included) is no step; a 1.9 s jump is within the
    tolerance, a 2.1 s one is not."""
    from epochgc.impl.gc.lease import STEP_TOLERANCE_S, Lease

    store = LocalStore(tmp_path / "s", create=True)
    for jump, firm in ((0.0, True), (STEP_TOLERANCE_S - 0.1, True),
                       (STEP_TOLERANCE_S + 0.1, False), (-(STEP_TOLERANCE_S + 0.1), False)):
        off = [-7200.0]  # a steady skew: no step

        def clock(off: list[float] = off) -> float:
            return time.time() + off[0]

        lease = Lease(lambda: LocalStore(store.root), f"r{jump}", clock=clock)
        lease.acquire()
        try:
            off[0] += jump
            assert lease.firm() is firm, jump
        finally:
            lease.release()
            store.delete_batch([LEASE_KEY])


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
            # bound on the dead driver's port, open, with its own secret
            later.append(Gate("127.0.0.1", lambda: True, port=first.target.port))

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
    assert left_per_journal(totals) == left, (len(totals.deleted), len(left))
    assert not (set(totals.errors) & left)
    if not alone_too:  # the carried outcomes were written alone: nothing left to resolve
        assert totals.unfinished == 0, f"{totals.unfinished} batches resolved by the store"
        assert set(totals.deleted) == left, "an answered batch is not counted deleted"
