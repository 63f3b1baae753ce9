"""Review rev38o: the fixes of review rev38n (i38o) attacked. Each failing test is a finding
(xfail strict, "rev38o finding N"); the others are what held."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.gc.journal import (
    END,
    START,
    STOP,
    Attempt,
    JournalTarget,
    JournalWriter,
    journal_prefix,
    write_marker,
)
from epochgc.impl.gc.record import number_round, record_document, round_key, write_record
from epochgc.impl.gc.recover import recover_dead_rounds, stop_dead_rounds
from epochgc.impl.gc.sequence import SEQ_PREFIX, markers
from epochgc.impl.gc.show import last_round
from epochgc.impl.gc.stop import RoundStop
from epochgc.impl.gc.summary import GcSummary
from epochgc.impl.store import local as local_mod
from epochgc.impl.store.base import DeleteResult, ObjectStore, StoreError
from epochgc.impl.store.hooked import HookedStore
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.s3 import S3Store
from epochgc.model.keys import format_key
from tests.gc.helpers import HOUR, put_local, simple_cluster
from tests.store.backends import Opener
from tests.store.s3proxy import Call, Fault, s3_proxy

GRACE = 12 * HOUR


def _dead(root: Path, round_id: str, bound: float | None = 240.0) -> set[str]:
    """A round killed after one journaled batch: START (with its stop bound; None: a START
    of a version before the bound), an intent and its outcome, no END. Returns the keys it
    deleted."""
    store = LocalStore(root)
    prefix = journal_prefix(round_id)
    start: dict[str, Any] = {"round": round_id, "M": 100, "snapshot_revision": 7,
                             "options": {}}
    if bound is not None:
        start["stop_within_s"] = bound
    write_marker(store, prefix, START, start)
    keys = [format_key(p, 50, round_id[-4:]) for p in range(3)]
    for k in keys:
        put_local(root, k, age=GRACE + 60)
    w = JournalWriter(store, JournalTarget(prefix), Attempt(0, 0, 0, 1))
    seq = w.intent([(k, 1, GRACE, "") for k in keys])
    store.delete_batch(keys)
    w.done(seq, DeleteResult(len(keys)))
    return set(keys)


def _set_mtime(root: Path, key: str, t: float) -> None:
    os.utime(root / key, (t, t))


def _record(store: LocalStore, round_id: str) -> dict[str, Any]:
    doc = json.loads(store.get(round_key(round_id)))
    assert isinstance(doc, dict)
    return doc


# --- finding 1: a STOP written by an earlier look (show, or a recovery a stop ended) is
# --- taken for the dead round's last journal entry: its record's duration is hours off


@pytest.mark.parametrize("earlier", ["show", "interrupted-recovery"])
def test_a_dead_rounds_duration_ends_at_its_last_entry_not_at_an_earlier_looks_stop(
    tmp_path: Path, earlier: str,
) -> None:
    """The dead round ran 10 s (START .. its last journal entry). A first look wrote its
    STOP an hour later and did not record it (`gc-admin show` no longer waits; or the next
    round's recovery was ended by SIGTERM/--deadline); the recovery that records it takes
    the journal's span "before our STOP joins it", but the earlier STOP is already in it."""
    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    rid = "20270115T060000.000Z-deadr0nd"
    _dead(root, rid)
    prefix = journal_prefix(rid)
    t0 = 1_800_000_000.0
    for o in store.list_all(prefix):
        _set_mtime(root, o.key, t0 + (0.0 if o.key.endswith(START) else 10.0))
    if earlier == "show":
        done, stopping = stop_dead_rounds(store, "gc-admin show", lambda: set())
        assert (done, [s.round_id for s in stopping]) == ([], [rid])
    else:
        stop = RoundStop()
        out = recover_dead_rounds(store, "round next", lambda: set(),
                                  sleep=lambda _s: stop.request("SIGTERM"), stop=stop)
        assert out == []
    assert store.head(prefix + STOP) is not None and store.head(round_key(rid)) is None
    _set_mtime(root, prefix + STOP, t0 + HOUR)  # that look ran an hour after the death
    [_r] = recover_dead_rounds(store, "round later", lambda: set(), sleep=lambda _s: None)
    seconds = _record(store, rid)["seconds"]
    assert seconds == pytest.approx(10.0, abs=1.0), (
        f"the dead round's journal spans 10 s; its record says it ran {seconds} s (up to "
        f"the STOP the earlier look ({earlier}) wrote an hour later)")


# --- finding 2: two recoveries of several dead rounds at once give one of them two
# --- numbers; the sequence's last marker then names a round that is not the last recorded


class _ClaimsAfter(LocalStore):
    """Recovery B's store: the first time B lists the sequence (its first claim, for the
    first dead round, after its re-look and read-back found no record), recovery A, started
    at the same time, records every dead round first."""

    other: Any = None

    def list_page(self, prefix: str, *args: Any, **kwargs: Any) -> Any:
        if prefix == SEQ_PREFIX and self.other is not None:
            run, self.other = self.other, None
            run()
        return super().list_page(prefix, *args, **kwargs)


@pytest.mark.parametrize("how", ["two-shows-after-an-upgrade", "two-resets"])
def test_two_recoveries_of_five_dead_rounds_give_each_one_number(
    tmp_path: Path, how: str,
) -> None:
    """Five dead rounds. `two-shows-after-an-upgrade`: their STARTs have no bound (written
    by a version before it: every killed round it left is unrecorded), so `gc-admin show`
    records them without a wait, and two run at once (two monitors; or the first round
    after the upgrade). `two-resets`: two `gc-admin reset`s (their waits overlap). B
    re-looks (no record), reads the first round back and claims its number just after A
    recorded all five: `claim` scans the 4 highest markers for its round, A's marker for it
    is the 5th, so B takes a 6th number for it (then loses the create)."""
    root = tmp_path / "s"
    LocalStore(root, create=True)
    rounds = [f"20270115T0{h}0000.000Z-dead{h:04d}" for h in range(1, 6)]
    for r in rounds:
        _dead(root, r, None if how.startswith("two-shows") else 240.0)
    a = LocalStore(root)
    b = _ClaimsAfter(root)

    def recover(store: LocalStore, by: str) -> Any:
        if how.startswith("two-shows"):
            return stop_dead_rounds(store, by, lambda: set())
        return recover_dead_rounds(store, by, lambda: set(), sleep=lambda _s: None)

    b.other = lambda: recover(a, "gc-admin show")
    recover(b, "gc-admin show")
    by_round: dict[str, list[int]] = {}
    for m in markers(a):
        by_round.setdefault(m.round_id, []).append(m.seq)
    last = last_round(a)
    assert last is not None
    once = all(len(v) == 1 for v in by_round.values())
    assert once and last["key"] == round_key(rounds[-1]), (
        f"numbers per round: {by_round}; `gc-admin show`'s last round is "
        f"{last['key']} (its record says seq {last['seq']}), recorded first of the "
        f"five; {rounds[-1]} was recorded last")


# --- held: the conditional create of the recovered record against a live driver


def _drivers(prefix: str, rid: str) -> GcSummary:
    return GcSummary(M=100, revision=7, round_id=rid, journal=prefix,
                     interrupted="stop-marker", deleted=3)


class _DriverAt(LocalStore):
    """Runs `act` (the live driver's END and record) right before the recovery's first
    request of the kind `when` names (then never again)."""

    act: Any = None
    when = ""

    def _maybe(self, kind: str, key: str) -> None:
        if self.act is not None and kind == self.when:
            act, self.act = self.act, None
            act()

    def head(self, key: str) -> Any:
        if key.startswith("_cluster/gc/rounds/"):
            self._maybe("head-record", key)
        return super().head(key)

    def list_page(self, prefix: str, *args: Any, **kwargs: Any) -> Any:
        if prefix == SEQ_PREFIX:
            self._maybe("claim", prefix)
        return super().list_page(prefix, *args, **kwargs)

    def create_if_absent(self, key: str, data: bytes) -> str | None:
        if key.startswith("_cluster/gc/rounds/"):
            self._maybe("create-record", key)
        return super().create_if_absent(key, data)


_WHEN = ["head-record", "claim", "create-record", "after"]


@pytest.mark.parametrize(("when", "record_fails"), [
    *((w, False) for w in _WHEN),
    ("head-record", True),
    ("claim", True),
    ("create-record", True),
    # After the recovery finished, a driver's END over the recovered one and a failed
    # record PUT left the recovered record for good (no later look rereads a recorded
    # round). Now the driver leaves OWN_END before its END, and the next look makes the
    # record from that END.
    ("after", True),
])
def test_a_live_driver_recording_at_any_point_of_the_recovery_keeps_its_record(
    tmp_path: Path, when: str, record_fails: bool,
) -> None:
    """The driver (alive) numbers the round, writes END then its record
    (`job._write_record`) before the recovery's re-look, before its claim, before its
    create, or after it all; with `record_fails` its record PUT fails after its END. The
    store ends with the driver's outcome wherever the driver's record or END could be seen
    (after the recovery, from the next look: the next round's, here), and the round has
    one number. Old code, `after-True`: `AssertionError: the driver wrote END
    (interrupted) and its record PUT failed; the store's record says 'killed' (recovered
    by 'gc-admin reset')`."""
    from epochgc.impl.gc.job import _write_record
    from epochgc.impl.gc.options import GcOptions
    from epochgc.impl.gc.recover import OWN_END

    root = tmp_path / "s"
    LocalStore(root, create=True)
    rid = "20270115T060000.000Z-l1ver0nd"
    _dead(root, rid)
    prefix = journal_prefix(rid)
    drv = LocalStore(root)
    s = _drivers(prefix, rid)

    class _RecordPutFails(LocalStore):
        def put(self, key: str, data: bytes) -> None:
            if key == round_key(rid):
                raise StoreError(f"put {key!r}: 503 SlowDown (injected)")
            super().put(key, data)

    def driver_records() -> None:
        _write_record(lambda: _RecordPutFails(root) if record_fails else LocalStore(root),
                      s, GcOptions())
        assert (s.record_error is not None) == record_fails, s.record_error

    store = _DriverAt(root)
    store.when = when
    store.act = driver_records
    recover_dead_rounds(store, "gc-admin reset", lambda: set(), sleep=lambda _s: None)
    if when == "after":
        driver_records()
        recover_dead_rounds(LocalStore(root), "round b", lambda: set(),
                            sleep=lambda _s: None)
    assert drv.head(prefix + OWN_END) is None
    rec = _record(drv, rid)
    seqs = sorted(m.seq for m in markers(drv))
    end = json.loads(drv.get(prefix + END))
    assert seqs == [1] and rec["seq"] == 1 and end["seq"] == 1, (seqs, rec["seq"], end["seq"])
    assert end["outcome"] == "interrupted", end["outcome"]
    assert rec["outcome"] == "interrupted", (
        f"the driver wrote END ({end['outcome']}) and its record PUT failed; the store's "
        f"record says {rec['outcome']!r} (recovered by {rec.get('recovered_by')!r})")
    assert rec["counts"]["deleted"] == 3


# --- held: the local store's send deadline in a delete batch


def test_a_local_batch_crossing_its_deadline_reports_exactly_the_keys_it_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The deadline passes between two keys of one batch: the keys before it are unlinked
    and not errors; those after are errors and still there (no key reported as an error
    that left, none unlinked after the deadline)."""
    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    keys = [format_key(p, 50, "x") for p in range(8)]
    for k in keys:
        put_local(root, k, age=GRACE + 60)
    ticks = iter(range(1000))
    monkeypatch.setattr(local_mod, "send_clock", lambda: float(next(ticks)))
    with store.send_by(3.5):  # the 5th check (tick 4) is past it
        result = store.delete_batch(keys)
    left = {k for k in keys if (root / k).exists()}
    assert set(result.errors) == left == set(keys[4:]), (sorted(result.errors), sorted(left))
    assert result.deleted == 4 and not result.gone and not result.changed


# --- held: a stop ends the wait; the next recovery waits again and records once


def test_a_recovery_ended_by_a_stop_is_finished_by_the_next_which_waits_and_records_once(
    tmp_path: Path,
) -> None:
    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    rid = "20270115T060000.000Z-deadr0nd"
    deleted = _dead(root, rid)
    stop = RoundStop()
    assert recover_dead_rounds(store, "round a", lambda: set(),
                               sleep=lambda _s: stop.request("SIGTERM"), stop=stop) == []
    prefix = journal_prefix(rid)
    assert store.head(prefix + STOP) is not None
    assert store.head(round_key(rid)) is None and store.head(prefix + END) is None
    assert list(store.list_all(SEQ_PREFIX)) == []
    waited: list[float] = []
    [r] = recover_dead_rounds(store, "round b", lambda: set(), sleep=waited.append)
    assert sum(waited) == 240.0  # in steps (newuser4 F3)
    rec = _record(store, rid)
    assert (rec["outcome"], rec["counts"]["deleted"], r.deleted) == ("driver-gone", len(deleted),
                                                                     len(deleted))
    assert [m.seq for m in markers(store)] == [1] and rec["seq"] == 1
    # a third look finds it recorded: no STOP rewritten, no wait, no number
    waited.clear()
    assert recover_dead_rounds(store, "round c", lambda: set(), sleep=waited.append) == []
    assert waited == [] and [m.seq for m in markers(store)] == [1]


# --- held: the same interleavings on every store the GC runs on (the conditional create is
# --- a hard link locally, PutObject If-None-Match: * on moto and SeaweedFS)


def _dead_on(store: ObjectStore, round_id: str) -> None:
    prefix = journal_prefix(round_id)
    write_marker(store, prefix, START, {"round": round_id, "M": 100, "snapshot_revision": 7,
                                        "options": {}, "stop_within_s": 240.0})
    keys = [format_key(p, 50, "s3") for p in range(3)]
    for k in keys:
        store.put(k, b"x")
    w = JournalWriter(store, JournalTarget(prefix), Attempt(0, 0, 0, 1))
    seq = w.intent([(k, 1, GRACE, "") for k in keys])
    store.delete_batch(keys)
    w.done(seq, DeleteResult(len(keys)))


@pytest.mark.parametrize("when", ["head '_cluster/gc/rounds/", "list '_cluster/gc/seq/'",
                                  "put '_cluster/gc/rounds/", "second-recovery"])
def test_the_recovered_record_is_created_only_if_absent_on_every_store(
    open_store: Opener, when: str,
) -> None:
    """A live driver (its number, END and record), or a second recovery, acts right before
    the recovery's re-look, its claim, or its create of the record: one record, the first
    writer's, one number, on local, moto and SeaweedFS."""
    rid = "20270115T060000.000Z-l1ver0nd"
    base = open_store()
    _dead_on(base, rid)
    prefix = journal_prefix(rid)
    s = _drivers(prefix, rid)
    other = open_store()
    pending: list[Any] = []

    def driver_records() -> None:
        number_round(other, s)
        write_marker(other, prefix, END, record_document(s, {}))
        write_record(other, s, {})

    def second() -> None:
        recover_dead_rounds(other, "gc-admin show", lambda: set(), sleep=lambda _s: None)

    if when == "second-recovery":
        pending.append(second)
        when = "list '_cluster/gc/seq/'"
    else:
        pending.append(driver_records)

    def hook(what: str) -> None:
        if pending and what.startswith(when):
            pending.pop()()

    got = recover_dead_rounds(HookedStore(open_store(), hook), "gc-admin reset",
                              lambda: set(), sleep=lambda _s: None)
    assert not pending
    rec = json.loads(base.get(round_key(rid)))
    seqs = sorted(m.seq for m in markers(base))
    assert seqs == [1] and rec["seq"] == 1, (seqs, rec["seq"])
    if rec.get("recovered_by") is None:
        assert rec["outcome"] == "interrupted" and got == []
    else:
        assert (rec["outcome"], rec["recovered_by"]) == ("driver-gone", "gc-admin show"), rec
        assert got == []
    assert rec["counts"]["deleted"] == 3


# --- finding 4: the recovered record's create applied but answered 500 (S3: "might not
# --- have processed"): botocore retries it, the server answers 412 (it is there now), and
# --- the recovery takes its own record for another writer's


@pytest.mark.parametrize("fault", [Fault.APPLIED_THEN_500, Fault.APPLIED_THEN_RESET])
def test_a_recovered_record_whose_create_was_applied_and_answered_an_error_is_reported(
    s3_endpoint: str, s3_bucket: str, fault: Fault,
) -> None:
    rid = "20270115T060000.000Z-deadr0nd"
    direct = S3Store(s3_bucket, "gc", endpoint_url=s3_endpoint)
    _dead_on(direct, rid)
    prefix = journal_prefix(rid)
    plan = [fault]

    def faults(call: Call) -> Fault | None:
        if call.kind == "put" and call.key.endswith(round_key(rid)) and plan:
            return plan.pop()
        return None

    with s3_proxy(s3_endpoint, faults=faults) as p:
        via = S3Store(s3_bucket, "gc", endpoint_url=p.endpoint)
        got = recover_dead_rounds(via, "gc-admin reset", lambda: set(),
                                  sleep=lambda _s: None)
        assert p.faulted[fault] == 1
    rec = json.loads(direct.get(round_key(rid)))
    assert (rec["outcome"], rec["recovered_by"]) == ("driver-gone", "gc-admin reset")
    end = direct.head(prefix + END)
    assert [r.round_id for r in got] == [rid] and end is not None, (
        f"the recovery created the round's record ({rec['outcome']}, by "
        f"{rec['recovered_by']!r}); the create was applied and answered with an error, the "
        f"retry 412: the recovery reported {[r.round_id for r in got]} recorded and "
        f"{'wrote' if end else 'did not write'} the journal's END")


# --- finding 5 (LOW): `gc-admin expire` (and its --help, and the README) send the operator
# --- to `gc-admin show` to record a dead round; show no longer records one with a bound


def test_the_command_expire_names_for_a_dead_round_records_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Old code: expire named `gc-admin show`, which no longer records a round with a
    bound. Now it names `gc-admin reset` (and the next round): run what it names (its wait
    replaced: it is the round's 240 s bound, `recover.SLEEP`)."""
    import re

    from click.testing import CliRunner

    from epochgc.impl.cli import main
    from epochgc.impl.gc import recover

    monkeypatch.setattr(recover, "SLEEP", lambda _s: None)
    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    simple_cluster(store, 100)
    rid = "20270115T060000.000Z-deadr0nd"
    _dead(root, rid)
    said = CliRunner().invoke(main, ["gc-admin", "expire", "--store", str(root)]).output
    named = re.search(r"gc-admin (\w+) records", said)  # what it tells the operator to run
    assert named is not None, said
    shown = CliRunner().invoke(main, ["gc-admin", named[1], "--store", str(root)])
    assert store.head(round_key(rid)) is not None, (
        f"`gc-admin expire` said {said.splitlines()[-1]!r}; `gc-admin {named[1]}` (exit "
        f"{shown.exit_code}) recorded nothing: "
        f"{[ln for ln in shown.output.splitlines() if 'dead round' in ln]}")


# --- finding 6: the longest interval the options accept still closes the gate after a
# --- look slower than ~30 s: the watch waits its interval after a look ENDS, the gate's
# --- freshness counts from the last clear HEAD's send, which may be ~30 s before that end


@pytest.mark.parametrize(("brokers", "per_request_s"), [(11, 2.0), (11, 2.1), (2, 5.0), (3, 8.0)])
def test_the_gate_stays_open_between_looks_at_the_longest_interval_after_a_slow_look(
    tmp_path: Path, brokers: int, per_request_s: float,
) -> None:
    """A cluster of `brokers` whose reports changed since the last look (each is read
    again), on an S3 answering in `per_request_s`; `watch_interval_s` at its maximum
    (accepted by `GcOptions`). A task asks while the next look's HEAD of STOP is in flight
    (`_clear_at` moves when it answers): the gate must be open (nothing asked the round to
    stop). The boundary: 48 brokers at 2 s end 20 s after their last HEAD and pass."""
    from epochgc.impl.gc.bounds import LOOK_FRESH_S
    from epochgc.impl.gc.options import MAX_WATCH_INTERVAL_S, GcOptions
    from epochgc.impl.gc.watch import RoundWatch, go_on
    from tests.gc.test_rev38n import _Clock, _SlowReads
    from tests.gc.test_watch_slow_look import _cluster

    GcOptions(watch_interval_s=MAX_WATCH_INTERVAL_S).validate()
    root = tmp_path / "s"
    _cluster(root, brokers)
    clock = _Clock()
    stop = RoundStop()
    watch = RoundWatch(lambda: _SlowReads(root, clock, per_request_s), stop, time.time, 3600.0,
                       MAX_WATCH_INTERVAL_S, lambda _v: None,
                       stop_key=journal_prefix("20270115T060000.000Z-l00k") + STOP,
                       monotonic=clock)
    is_open = go_on(stop, None, watch, LOOK_FRESH_S)
    started = clock.t
    assert watch.poll_once() is None and is_open()
    look_s, since_head = clock.t - started, clock.t - watch._clear_at
    clock.t += MAX_WATCH_INTERVAL_S  # `_run`: `_done.wait(interval_s)` after the look
    clock.t += per_request_s / 2  # the next look's first request, its HEAD of STOP, sent
    assert is_open(), (
        f"a look of {look_s:g} s ({brokers} brokers, {per_request_s:g} s a request) ended "
        f"{since_head:g} s after its last clear HEAD of STOP; {MAX_WATCH_INTERVAL_S:g} s "
        f"later (the longest interval the options accept) the next look HEADs STOP and, "
        f"before its answer, the gate says no: the round stops {stop.reason!r} with no "
        f"STOP written")


# --- finding 7 (LOW): a round recorded from the END its driver wrote during the wait is
# --- announced as "killed" (`reset`, `show`, the next round's notes ignore `from_end`)


def test_a_round_recorded_from_its_own_end_is_not_announced_as_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from click.testing import CliRunner

    from epochgc.impl.cli import main
    from epochgc.impl.gc import recover

    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    simple_cluster(store, 100)
    rid = "20270115T060000.000Z-l1ver0nd"
    _dead(root, rid)
    prefix = journal_prefix(rid)
    s = _drivers(prefix, rid)

    def driver_ends_during_the_wait(_s: float) -> None:  # then killed before its record
        number_round(store, s)
        write_marker(store, prefix, END, record_document(s, {}))

    monkeypatch.setattr(recover, "SLEEP", driver_ends_during_the_wait)
    out = CliRunner().invoke(main, ["gc-admin", "reset", "--store", str(root)]).output
    rec = _record(store, rid)
    said = [ln for ln in out.splitlines() if rid in ln]
    assert rec["outcome"] == "interrupted"
    assert said and "driver-gone" not in " ".join(said), (
        f"the record (from the driver's own END) says {rec['outcome']!r}; gc-admin reset "
        f"said: {said}")
