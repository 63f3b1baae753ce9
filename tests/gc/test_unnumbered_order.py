"""Review rev38z10 finding 5 (s28e): a round whose number claim failed once (a 503 past the
client's retries on the create under `_cluster/gc/seq/`) was placed below every numbered
round: `gc-admin show` named the round before it as the last, and `gc-admin expire` took
it for the oldest. Now an unnumbered record is placed in the store's order by what is
known of it (`sequence.round_order`): the highest number handed out when its claim failed
(`seq_after`, written since), else its write time on the store's clock against the
markers'; rounds whose order nothing tells are named by `show`, kept whole by `expire`.
Local store, no Spark: each case well under a second."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from epochgc.impl.gc.expire import expire_rounds
from epochgc.impl.gc.record import round_key, write_record
from epochgc.impl.gc.sequence import SEQ_PREFIX
from epochgc.impl.gc.show import last_rounds
from epochgc.impl.gc.summary import GcSummary, Refusal
from epochgc.impl.store.base import StoreError
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import NOW, _Delegating

DAY = 86400.0


class _SeqRefused(_Delegating):
    """The store refuses the sequence's creates (a 503 past the client's retries)."""

    def create_if_absent(self, key: str, data: bytes) -> str | None:
        if key.startswith("_cluster/gc/seq"):
            raise StoreError("503 SlowDown (injected)")
        return self.inner.create_if_absent(key, data)


def _round(store: LocalStore, hour: int, letter: str, numbered: bool = True,
           refused: bool = False) -> GcSummary:
    s = GcSummary(round_id=f"20270115T{hour:02d}0000.000Z-{letter * 8}",
                  started_at=NOW + hour * 3600)
    if refused:
        s.paused, s.refusal = "paused by test", Refusal.PAUSED
    write_record(store if numbered else _SeqRefused(store), s, {})
    return s


def _last(store: LocalStore) -> tuple[object, object]:
    last, refusal = last_rounds(store)
    return ((last or {}).get("key") or (last or {}).get("error"),
            (refusal or {}).get("key"))


def _kept(store: LocalStore, keep_last: int) -> set[str]:
    """The rounds `expire --keep-last` keeps (every record is past the retention)."""
    plan = expire_rounds(store, max(time.time(), NOW) + 60 * DAY, 30 * DAY,
                         keep_last=keep_last)
    return {r.removesuffix(".json") for r in _all(store)} - set(plan.rounds)


def _all(store: LocalStore) -> set[str]:
    return {o.key.rsplit("/", 1)[-1] for o in store.list_all("_cluster/gc/rounds/")}


def test_an_unnumbered_round_is_placed_after_the_round_before_it(tmp_path: Path) -> None:
    """Rounds a (#1), b (claim failed: after #1), c (#2): the last is c, then b, then a.
    On main b was below a: after c, `show` named c (right) but expire --keep-last 2 kept
    c and a, removing b, the newer."""
    store = LocalStore(tmp_path, create=True)
    a, b = _round(store, 8, "a"), _round(store, 9, "b", numbered=False)
    assert (a.seq, b.seq, b.seq_after) == (1, None, 1)
    assert json.loads(store.get(round_key(b.round_id)))["seq_after"] == 1
    assert _last(store) == (round_key(b.round_id), None)
    assert _kept(store, 1) == {b.round_id}
    c = _round(store, 10, "c")
    assert c.seq == 2
    assert _last(store) == (round_key(c.round_id), None)
    assert _kept(store, 2) == {b.round_id, c.round_id}


def test_an_unnumbered_refusal_after_the_last_round_is_the_last_refusal(
        tmp_path: Path) -> None:
    """A refusal (paused) whose claim failed, after the last round that ran: on main it
    sorted below the round and `show` said no refusal came after it."""
    store = LocalStore(tmp_path, create=True)
    a = _round(store, 8, "a")
    r = _round(store, 9, "r", numbered=False, refused=True)
    assert _last(store) == (round_key(a.round_id), round_key(r.round_id))


def test_two_unnumbered_rounds_whose_order_is_not_known_are_named_not_one_taken(
        tmp_path: Path) -> None:
    """Two rounds in a row whose claims failed, both after #1: nothing in the store orders
    them (their names are their own clocks'). `show` names both rather than one as the
    last; `expire --keep-last 1` keeps both."""
    store = LocalStore(tmp_path, create=True)
    _round(store, 8, "a")
    b, c = _round(store, 9, "b", numbered=False), _round(store, 10, "c", numbered=False)
    last, _refusal = _last(store)
    assert isinstance(last, str) and last.startswith("the last round cannot be told among ")
    assert round_key(b.round_id) in last and round_key(c.round_id) in last, last
    assert _kept(store, 1) == {b.round_id, c.round_id}
    d = _round(store, 11, "d")  # numbered: after both
    assert _last(store) == (round_key(d.round_id), None)


def test_a_record_written_before_seq_after_is_placed_by_the_stores_write_times(
        tmp_path: Path) -> None:
    """A record of a round whose claim failed, written before records carried `seq_after`
    (`"seq": null` only): placed by its write time on the store's clock (a local store's
    mtime here; S3's LastModified) against the markers' write times."""
    store = LocalStore(tmp_path, create=True)
    a, b = _round(store, 8, "a"), _round(store, 9, "b", numbered=False)
    c = _round(store, 10, "c")
    doc = json.loads(store.get(round_key(b.round_id)))
    doc.pop("seq_after", None)
    store.put(round_key(b.round_id), json.dumps(doc).encode())

    def written(key: str, t: float) -> None:
        os.utime(store.root / key, (t, t))

    written(f"{SEQ_PREFIX}{1:020d}", NOW)
    written(f"{SEQ_PREFIX}{2:020d}", NOW + 20)
    for when, last in ((NOW + 10, c), (NOW + 30, b)):
        written(round_key(b.round_id), when)
        assert _last(store) == (round_key(last.round_id), None), when
    written(round_key(b.round_id), NOW + 20.5)  # the same second as #2's marker
    last, _refusal = _last(store)
    assert isinstance(last, str) and last.startswith("the last round cannot be told"), last
    written(round_key(b.round_id), NOW - 5)  # before #1's: the oldest
    assert _kept(store, 2) == {a.round_id, c.round_id}


def test_a_seq_after_naming_a_marker_written_after_the_record_is_not_trusted(
        tmp_path: Path) -> None:
    """Review rev38z12 finding 4's other half (s28i): a record's `seq_after` is the highest
    number handed out when its claim failed, so its marker was written no later than the
    record (one store clock). One naming a later marker is damage: the record is not
    placed (with the unplaceable, below every placed round), never taken for the last."""
    store = LocalStore(tmp_path, create=True)
    _round(store, 8, "a")
    b = _round(store, 9, "b", numbered=False)
    _round(store, 10, "c")
    d = _round(store, 11, "d")
    key = round_key(b.round_id)
    raw = store.get(key)
    assert raw.count(b'"seq_after": 1') == 1
    store.put(key, raw.replace(b'"seq_after": 1', b'"seq_after": 3'))  # 3 exists: d's
    for n, t in ((1, NOW), (2, NOW + 20), (3, NOW + 30)):
        os.utime(store.root / f"{SEQ_PREFIX}{n:020d}", (t, t))
    os.utime(store.root / key, (NOW + 10, NOW + 10))  # before #3's marker was written
    assert _last(store) == (round_key(d.round_id), None)
    assert d.round_id in _kept(store, 1)
    os.utime(store.root / key, (NOW + 31, NOW + 31))  # after it: b's seq_after may hold
    assert _last(store) == (round_key(b.round_id), None)
