"""Review rev38q findings 1 and 5: a key whose fate the store could not tell (its delete
may have been applied; asking failed) is journaled as such and asked about again at the
read-back; if the store still cannot say, the round's record counts it as `unknown`, never
as an error "listed again next round", and never loses the rest of the count."""

from __future__ import annotations

import json
from pathlib import Path

from epochgc.impl.gc.cli import _after
from epochgc.impl.gc.journal import Attempt, JournalTarget, JournalWriter, read_journal
from epochgc.impl.gc.stage import _count
from epochgc.impl.gc.summary import GcSummary
from epochgc.impl.store.base import DeleteResult, ObjectInfo, StoreError
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key
from tests.gc.helpers import JOURNAL, put_local


class _HeadFails(LocalStore):
    """A store whose HEAD of some keys fails (EACCES, a 503 storm): it cannot say."""

    failing: frozenset[str] = frozenset()

    def head(self, key: str) -> ObjectInfo | None:
        if key in self.failing:
            raise StoreError(f"head {key!r}: 503 SlowDown")
        return super().head(key)


def _keys(n: int) -> list[str]:
    return [format_key(1, 5, f"k{i:04d}") for i in range(n)]


def test_a_key_of_unknown_fate_is_asked_again_and_stays_unknown_if_the_store_cannot_say(
    tmp_path: Path
) -> None:
    root = tmp_path / "s"
    store = _HeadFails(root, create=True)
    keys = _keys(4)
    for k in keys:
        put_local(root, k, 7200.0)
    w = JournalWriter(store, JournalTarget(JOURNAL), Attempt(0, 0, 0, 1))
    seq = w.intent([(k, 1, 7200.0, "") for k in keys])
    store.delete_batch(keys[:2])  # k0, k1 left the store (the request was applied)
    why = "RequestFailedMaybeApplied: 500; whether it was deleted is unknown"
    w.done(seq, DeleteResult(4, errors=dict.fromkeys(keys[:3], why),
                             unknown=set(keys[:3])))
    store.failing = frozenset({keys[1]})  # the store still cannot say about k1
    totals = read_journal(store, JOURNAL)
    # k3 deleted (answered); k0 asked: gone, but its request was answered 500 ("maybe
    # applied"): gone unattributed (review rev38v finding 3), not deleted.
    assert set(totals.deleted) == {keys[3]}
    assert set(totals.gone_unattributed) == {keys[0]}
    assert set(totals.unknown) == {keys[1]}
    assert set(totals.errors) == {keys[2]}, totals.errors  # asked: still there
    s = GcSummary(journal=JOURNAL)
    _count(s, totals)
    assert (s.deleted, s.gone_unattributed, s.unknown, s.errors) == (1, 1, 1, 1)
    assert s.outcome == "incomplete"
    assert any("whose deletion is unknown" in line for line in s.lines())
    assert any("1 key(s) left the store in delete batches with no answer saying the round"
               in line for line in s.lines()), s.lines()
    assert _after(s).startswith("at least 1 key(s) were deleted"), _after(s)
    assert "1 more left the store" in _after(s), _after(s)


def test_a_done_record_without_unknown_still_reads(tmp_path: Path) -> None:
    """A journal written before `unknown` existed: its errors stay errors."""
    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    keys = _keys(2)
    for k in keys:
        put_local(root, k, 7200.0)
    base = f"{JOURNAL}p0000-s0-a0-t1/00000000"
    store.put(f"{base}.intent.json", json.dumps(
        {"keys": keys, "sizes": [1, 1], "ages": [1.0, 1.0]}).encode())
    store.delete_batch(keys[:1])
    store.put(f"{base}.done.json", json.dumps(
        {"gone": [], "changed": [], "errors": {keys[1]: "AccessDenied"}}).encode())
    totals = read_journal(store, JOURNAL)
    assert set(totals.deleted) == {keys[0]} and set(totals.errors) == {keys[1]}
    assert not totals.unknown


def test_one_head_failing_for_an_unfinished_intent_leaves_that_key_unknown(
    tmp_path: Path
) -> None:
    """Finding 5 at the reader: the rest of the batch is still counted."""
    root = tmp_path / "s"
    store = _HeadFails(root, create=True)
    keys = _keys(3)
    for k in keys:
        put_local(root, k, 7200.0)
    w = JournalWriter(store, JournalTarget(JOURNAL), Attempt(0, 0, 0, 1))
    w.intent([(k, 1, 7200.0, "") for k in keys])
    store.delete_batch(keys[:2])  # killed after its request: no outcome
    store.failing = frozenset({keys[0]})
    totals = read_journal(store, JOURNAL)
    assert not totals.deleted and set(totals.gone_unattributed) == {keys[1]}
    assert set(totals.unknown) == {keys[0]}
    assert set(totals.errors) == {keys[2]}


def test_a_key_one_attempt_failed_and_another_left_unknown_counts_once_as_unknown(
    tmp_path: Path
) -> None:
    """Finding 4's precedence with `unknown`: attempt A's delete of k failed (not applied:
    still there, an error), attempt B's may have been applied and the store cannot say.
    "Listed again next round" is not known: k counts once, as unknown."""
    root = tmp_path / "s"
    store = _HeadFails(root, create=True)
    [key] = _keys(1)
    put_local(root, key, 7200.0)
    a = JournalWriter(store, JournalTarget(JOURNAL), Attempt(0, 0, 0, 1))
    a.done(a.intent([(key, 1, 7200.0, "")]), DeleteResult(1, errors={key: "AccessDenied"}))
    b = JournalWriter(store, JournalTarget(JOURNAL), Attempt(0, 1, 0, 2))
    b.done(b.intent([(key, 1, 7200.0, "")]),
           DeleteResult(1, errors={key: "InternalError; unknown"}, unknown={key}))
    store.failing = frozenset({key})
    totals = read_journal(store, JOURNAL)
    assert set(totals.unknown) == {key} and not totals.errors and not totals.deleted


def test_a_dead_rounds_record_counts_a_key_the_store_cannot_tell_as_unknown(
    tmp_path: Path
) -> None:
    """Finding 5 through the recovery: one HEAD that still fails leaves that key unknown in
    the recovered record (`counts.unknown`), the rest counted; `show` says so."""
    from epochgc.impl.gc.journal import START, journal_prefix, write_marker
    from epochgc.impl.gc.recover import recover_dead_rounds
    from epochgc.impl.gc.show import _last_round_lines

    round_id = "20270115T100000.000Z-i38r0005"
    prefix = journal_prefix(round_id)
    root = tmp_path / "s"
    store = _HeadFails(root, create=True)
    keys = _keys(3)
    for k in keys:
        put_local(root, k, 7200.0)
    write_marker(store, prefix, START, {"round": round_id, "M": 9, "stop_within_s": 1.0})
    w = JournalWriter(store, JournalTarget(prefix), Attempt(0, 0, 0, 1))
    w.intent([(k, 1, 7200.0, "") for k in keys])
    store.delete_batch(keys[:2])  # killed after its request: no outcome
    store.failing = frozenset({keys[0]})
    [got] = recover_dead_rounds(store, "gc-admin reset", lambda: set(), sleep=lambda s: None)
    # k1 found gone, its request's answer never journaled: gone unattributed, not deleted.
    assert (got.deleted, got.gone_unattributed, got.unknown, got.lower_bound) == (0, 1, 1, True)
    record = json.loads(store.get(f"_cluster/gc/rounds/{round_id}.json"))
    assert record["journal_read"] is True
    assert (record["counts"]["deleted"], record["counts"]["gone_unattributed"],
            record["counts"]["bytes_gone_unattributed"], record["counts"]["unknown"],
            record["counts"]["errors"]) == (0, 1, 1, 1, 1)
    lines = _last_round_lines({**record, "key": f"{round_id}.json"}, 0.0)
    assert any("keys of unknown fate: 1" in line for line in lines), lines
    assert any("left the store, not attributed: 1 key(s) (1 bytes)" in line
               for line in lines), lines


def test_a_returned_attempts_key_of_unknown_fate_is_asked_only_after_the_wait(
    tmp_path: Path
) -> None:
    """Review rev38z finding 6, the read-back's side: an attempt that returned journaled a
    key `unknown` (its request went unanswered and the key was there right after it), so
    that request may still be carried out (`bounds.py` allows a server `READ_TIMEOUT_S`).
    The read-back asks the store about it only after the live driver's wait
    (`before_asking`); a wait cut short leaves a key still there `unknown`, never an error
    "listed again next round". (Before: a returned attempt's batch was never waited for,
    and the key was an error at once.)"""
    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    keys = _keys(2)
    for k in keys:
        put_local(root, k, 7200.0)
    attempt = Attempt(0, 0, 0, 1)
    w = JournalWriter(store, JournalTarget(JOURNAL), attempt)
    seq = w.intent([(k, 1, 7200.0, "") for k in keys])
    store.delete_batch(keys[1:])  # k1: answered, deleted
    why = ("RequestFailedMaybeApplied: connection closed; whether it was deleted is unknown: "
           "still there right after an unanswered request (asked the store)")
    w.done(seq, DeleteResult(2, errors={keys[0]: why}, unknown={keys[0]}))
    asked: list[int] = []

    def cut_short(batches: int, ago: float) -> bool:
        asked.append(batches)
        return False  # a signal ended the wait: the request may still land

    totals = read_journal(store, JOURNAL, known=w.written(), before_asking=cut_short,
                          returned={attempt.name()})
    assert asked == [1], f"the read-back did not wait for the unanswered request: {asked}"
    assert set(totals.deleted) == {keys[1]}
    assert set(totals.unknown) == {keys[0]} and not totals.errors, (totals.unknown,
                                                                   totals.errors)
    asked.clear()
    totals = read_journal(store, JOURNAL, known=w.written(), before_asking=lambda n, ago: True,
                          returned={attempt.name()})
    assert set(totals.errors) == {keys[0]}, totals  # waited out, still there: not deleted
