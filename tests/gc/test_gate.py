"""Issue 38, S3 at the limit: a task asks its driver "go on?" before each delete batch
(`impl.gc.gate`) instead of asking the store for the STOP marker (a HEAD per batch, 40 of a
40-batch round's requests on S3). The bound it must keep is the per-batch check's: after
a task can learn of a stop it sends nothing but the request already in flight, and a task
whose driver is dead or unreachable (another host: no `/proc` check) sends nothing more."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.gc import gate as gate_mod
from epochgc.impl.gc.delete import delete_keys
from epochgc.impl.gc.gate import ASK, Gate, GateTarget, ask
from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.journal import (
    JOURNAL_PREFIX,
    START,
    STOP,
    Attempt,
    JournalTarget,
    JournalWriter,
    journal_prefix,
    write_marker,
)
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.gc.recover import recover_dead_rounds
from epochgc.impl.store.base import DeleteResult, ObjectInfo
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key
from tests.gc.helpers import _Delegating, all_keys, local_spec
from tests.gc.test_job import GRACE, clock, make_store
from tests.gc.test_readback_requests import LoggingFactory

# Generous: an answer on loopback takes well under a millisecond; these only bound a
# failing run, the outcome never depends on them.
PATIENT_S, PATIENT_TRIES = 10.0, 3


def _keys(store: LocalStore, n: int) -> list[str]:
    keys = [format_key(i % 100, 5, f"k{i:05d}") for i in range(n)]
    for k in keys:
        store.put(k, b"x")
    return keys


def test_the_driver_answers_go_while_open_and_no_once_asked_to_stop() -> None:
    is_open = threading.Event()
    is_open.set()
    with Gate("127.0.0.1", is_open.is_set) as gate:
        assert ask(gate.target, PATIENT_S, PATIENT_TRIES)
        is_open.clear()
        assert not ask(gate.target, PATIENT_S, PATIENT_TRIES)


def test_a_closed_gate_is_no_at_once() -> None:
    gate = Gate("127.0.0.1", lambda: True)
    gate.close()
    # the port is closed: the kernel answers port unreachable (ECONNREFUSED), no wait
    assert not ask(gate.target, timeout_s=60.0, tries=5)


def test_silence_is_no() -> None:
    """A driver host lost (or a network cut): nothing answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as mute:
        mute.bind(("127.0.0.1", 0))
        target = GateTarget("127.0.0.1", mute.getsockname()[1], b"s" * 32)
        assert not ask(target, timeout_s=0.2, tries=2)


def test_an_answer_without_the_rounds_secret_is_not_go() -> None:
    """Anyone who can send to the task may answer; only the driver can sign "go"."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as forger:
        forger.bind(("127.0.0.1", 0))
        target = GateTarget("127.0.0.1", forger.getsockname()[1], b"s" * 32)

        def forge() -> None:
            for _ in range(2):
                data, addr = forger.recvfrom(64)
                nonce = data[len(ASK):]
                forger.sendto(b"go" + nonce + gate_mod._mac(b"x" * 32, b"go", nonce), addr)

        t = threading.Thread(target=forge, daemon=True)
        t.start()
        assert not ask(target, timeout_s=2.0, tries=2)
        t.join(10)


def test_the_answer_names_its_nonce_and_the_secret() -> None:
    gate = Gate("127.0.0.1", lambda: True)
    try:
        answer = gate.answer(ASK + b"n" * 16)
        assert answer is not None and answer.startswith(b"go" + b"n" * 16)
        assert answer[18:] == gate_mod._mac(gate.target.secret, b"go", b"n" * 16)
        assert gate.answer(b"junk") is None and gate.answer(ASK + b"short") is None
        assert "secret" not in repr(gate.target) and repr(gate.target.secret) not in repr(
            gate.target)
    finally:
        gate.close()


class _Counting(_Delegating):
    def __init__(self, inner: Any, after: Any = None) -> None:
        super().__init__(inner)
        self.sent = 0
        self.heads: list[str] = []
        self.after = after

    def delete_if_unchanged(self, items: list[tuple[str, str]]) -> DeleteResult:
        result = self.inner.delete_if_unchanged(items)
        self.sent += 1
        if self.after is not None:
            self.after(self.sent)
        return result

    def head(self, key: str) -> ObjectInfo | None:
        self.heads.append(key)
        return self.inner.head(key)


@pytest.mark.parametrize("k", [1, 2, 5, 9])
def test_a_stop_after_request_k_sends_nothing_more_and_asks_the_store_nothing(
    tmp_path: Path, k: int
) -> None:
    """One request at a time: the driver asked to stop right after the k-th DeleteObjects
    answered; the next batch's ask is told no (the per-batch STOP HEAD's bound: 0 more)."""
    inner = LocalStore(tmp_path / "s", create=True)
    keys = _keys(inner, 100)
    stopped = threading.Event()

    def after(n: int) -> None:
        if n == k:
            stopped.set()

    store = _Counting(inner, after)
    prefix = journal_prefix("20270115T090000.000Z-g4te0000")
    with Gate("127.0.0.1", lambda: not stopped.is_set()) as gate:
        writer = JournalWriter(store, JournalTarget(prefix, gate=gate.target),
                               Attempt(0, 0, 0, 1))
        stats = delete_keys(store, ((key, 1, 0.0, "") for key in keys), batch_size=10,
                            concurrency=1, journal=writer)
    assert store.sent == k, f"{store.sent - k} DeleteObjects after the stop"
    assert stats.stopped == 1 and len(set(keys) - all_keys(inner)) == 10 * k
    assert not [h for h in store.heads if h.endswith("/" + STOP)], "asked the store for STOP"


@pytest.mark.parametrize("dead", ["closed", "silent"])
def test_a_straggler_whose_driver_died_on_another_host_sends_nothing_more(
    tmp_path: Path, dead: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rev38b finding 1 with the gate: a task of a dead round (its driver gone on another
    host: no /proc check) is recovered after its 4th DeleteObjects. Its driver's gate is
    closed (the process died: port unreachable) or silent (its host is lost); either way
    the next ask is no, nothing more is sent and the dead round's record is exact."""
    monkeypatch.setattr(gate_mod, "ASK_TIMEOUT_S", 0.2)
    monkeypatch.setattr(gate_mod, "ASK_TRIES", 2)
    inner = LocalStore(tmp_path / "s", create=True)
    keys = _keys(inner, 160)
    dead_round = "20270115T070000.000Z-str4ggl3"
    prefix = journal_prefix(dead_round)
    write_marker(inner, prefix, START, {"round": dead_round, "M": 100,
                                        "snapshot_revision": 7, "options": {}})
    gate = Gate("127.0.0.1", lambda: True)
    mute = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def after(n: int) -> None:
        if n == 4:
            gate.close()  # the driver dies
            if dead == "silent":  # ... and its host with it: nothing answers at all
                mute.bind(("127.0.0.1", gate.target.port))
            recover_dead_rounds(inner, "test", lambda: set())

    store = _Counting(inner, after)
    try:
        writer = JournalWriter(store, JournalTarget(prefix, gate=gate.target),
                               Attempt(0, 0, 0, 1))
        delete_keys(store, ((k, 1, 0.0, "") for k in keys), batch_size=10, concurrency=1,
                    journal=writer)
    finally:
        gate.close()
        mute.close()
    left = set(keys) - all_keys(inner)
    [doc] = [json.loads(inner.get(o.key)) for o in inner.list_all(ROUNDS_PREFIX)
             if o.key.endswith(".json")]
    assert store.sent == 4, f"{store.sent - 4} DeleteObjects after the driver died"
    counts = doc["counts"]
    # What left the store, deleted (answered) and gone unattributed (the 4th request's
    # answer was never journaled: review rev38v finding 3) together.
    assert doc["outcome"] == "driver-gone"
    assert counts["deleted"] + counts["gone_unattributed"] == len(left) == 40, counts
    assert counts["deleted"] <= 30, counts


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_stop_while_the_task_lists_sends_nothing(tmp_path: Path, concurrency: int) -> None:
    """rev38b finding 7 with the gate: the driver asked to stop while the task still lists
    its first keys: no DeleteObjects at all."""
    inner = LocalStore(tmp_path / "s", create=True)
    keys = _keys(inner, 200)
    stopped = threading.Event()

    def listed() -> Any:
        stopped.set()
        for k in keys:
            yield (k, 1, 0.0, "")

    store = _Counting(inner)
    prefix = journal_prefix("20270115T090000.000Z-l1st1ng1")
    with Gate("127.0.0.1", lambda: not stopped.is_set()) as gate:
        writer = JournalWriter(store, JournalTarget(prefix, gate=gate.target),
                               Attempt(0, 0, 0, 1))
        delete_keys(store, listed(), batch_size=10, concurrency=concurrency, journal=writer)
    assert store.sent == 0, f"{store.sent} DeleteObjects after the stop"


@pytest.mark.spark
def test_a_rounds_tasks_ask_their_driver_not_the_store(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real round: no task HEADs the STOP marker (there was one per batch, and one a
    second while listing); the driver's watch HEADs it once a look (review rev38m finding
    1: a recovery's STOP must reach a round whose driver still answers), and the record is
    exact."""
    eligible, rest = make_store(tmp_path)
    store = LoggingFactory(local_spec(tmp_path), str(tmp_path.parent / "calls.log"),
                           heads=True)
    from epochgc.impl.gc.watch import RoundWatch

    looked = [0]
    poll_once = RoundWatch.poll_once

    def counted(self: RoundWatch) -> str | None:  # the watch runs in the driver's process
        looked[0] += 1
        return poll_once(self)

    monkeypatch.setattr(RoundWatch, "poll_once", counted)
    s = run_gc(spark, store, GcOptions(grace_s=GRACE, tasks=3, delete_batch_size=2),
               clock=clock)
    assert s.exit_code == 0 and s.deleted == len(eligible) and s.interrupted is None, s
    assert not eligible & all_keys(LocalStore(tmp_path))
    assert rest <= all_keys(LocalStore(tmp_path))
    stop_heads = [c for c in store.calls() if c[0] == "head" and c[1].endswith("/" + STOP)
                  and c[1].startswith(JOURNAL_PREFIX)]
    # the first look HEADs it, later ones once the last HEAD is 30 s old: never per batch
    assert 1 <= len(stop_heads) <= looked[0], f"{len(stop_heads)} STOP HEADs, {looked[0]} looks"


def test_a_gate_that_never_answered_is_given_up_for_the_stop_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """UDP filtered between the task's host and the driver's (or the driver died before the
    first ask): no answer ever came, so silence proves nothing; the task asks the store for
    the STOP marker as before, and stops at it."""
    monkeypatch.setattr(gate_mod, "ASK_TIMEOUT_S", 0.2)
    monkeypatch.setattr(gate_mod, "ASK_TRIES", 2)
    inner = LocalStore(tmp_path / "s", create=True)
    keys = _keys(inner, 100)
    prefix = journal_prefix("20270115T090000.000Z-f1lt3red")

    def after(n: int) -> None:
        if n == 3:
            write_marker(inner, prefix, STOP, {"reason": "SIGTERM"})

    store = _Counting(inner, after)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as mute:
        mute.bind(("127.0.0.1", 0))
        target = GateTarget("127.0.0.1", mute.getsockname()[1], b"s" * 32)
        writer = JournalWriter(store, JournalTarget(prefix, gate=target), Attempt(0, 0, 0, 1))
        stats = delete_keys(store, ((k, 1, 0.0, "") for k in keys), batch_size=10,
                            concurrency=1, journal=writer)
    assert store.sent == 3 and stats.stopped == 1
    assert writer.gate is None  # given up after the first silence


def test_a_lease_no_longer_firm_closes_the_gate_and_stops_the_round(spark: Any) -> None:
    """The driver's answer (`stage._gate`): "go" while the round runs and its lease is
    firm; once the lease is not, "no", and the round stops as `lease-unsure` (its record
    says why); a stop request (signal, pause) is "no" too."""
    from epochgc.impl.gc.stage import _gate, _Round
    from epochgc.impl.gc.stop import RoundStop

    for cause in ("lease", "stop"):
        stop = RoundStop()
        firm = threading.Event()
        firm.set()
        rnd = _Round(None, None, None, 0, 0.0, time.time, None, None,  # type: ignore[arg-type]
                     stop, firm.is_set)
        gate = _gate(spark.sparkContext, rnd, None)
        assert gate is not None
        try:
            assert ask(gate.target, PATIENT_S, PATIENT_TRIES)
            if cause == "lease":
                firm.clear()
            else:
                stop.request("SIGTERM")
            assert not ask(gate.target, PATIENT_S, PATIENT_TRIES)
            assert stop.reason == ("lease-unsure" if cause == "lease" else "SIGTERM")
        finally:
            gate.close()


def test_a_lease_is_firm_while_a_quarter_of_it_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from epochgc.impl.gc import lease as lease_mod

    now = [1000.0]
    store = LocalStore(tmp_path / "s", create=True)
    # its wall clock moves with its elapsed one (else a step: never firm again)
    lease = lease_mod.Lease(lambda: LocalStore(store.root), "r1", duration_s=400.0,
                            clock=lambda: now[0], elapsed=lambda: now[0])
    assert not lease.firm()  # not held yet
    lease.acquire()
    assert lease.firm()
    now[0] += 299.0  # 101 s left of 400: more than a quarter
    assert lease.firm()
    now[0] += 2.0  # 99 s left
    assert not lease.firm()
    assert lease._renew() is None  # a renewal that succeeds makes it firm again
    assert lease.firm()
    lease.release()
    assert not lease.firm()
