"""The parsers of a round's stored documents (task s28d, review rev38z10 findings 1, 2, 4, 7,
8 and 9): each entry read with a bound, each field checked before it reaches a sum, a
record or a wait. Local store only; each case well under a second."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from epochgc.impl.gc import delete, journal
from epochgc.impl.gc.drivertree import tasks_gone
from epochgc.impl.gc.journal import (
    MAX_INTENT_KEYS,
    Attempt,
    JournalTarget,
    JournalWriter,
    journal_prefix,
    read_journal,
    salvage_keys,
)
from epochgc.impl.gc.record import round_key
from epochgc.impl.gc.recordread import read_round_record
from epochgc.impl.gc.recover import OWN_END, recover_dead_rounds
from epochgc.impl.gc.rounddocs import MAX_OPTIONS, parse_start
from epochgc.impl.gc.text import MAX_TEXT
from epochgc.impl.store.base import MAX_DELETE_BATCH, DeleteResult
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key
from tests.gc.helpers import _Delegating

DEAD = "20261130T190000.000000Z-dead"
KEY = format_key(1, 5, "a")


def _dead_round(store: LocalStore, intent: bytes, start: bytes = b'{"stop_within_s": 0}',
                done: bytes | None = b'{"gone": [], "changed": [], "errors": {}}') -> str:
    prefix = journal_prefix(DEAD)
    store.put(prefix + "START.json", start)
    store.put(prefix + "p0000-s0-a0-t1/00000000.intent.json", intent)
    if done is not None:
        store.put(prefix + "p0000-s0-a0-t1/00000000.done.json", done)
    return prefix


def _recover(store: LocalStore) -> dict[str, object]:
    [r] = recover_dead_rounds(store, "s28d", lambda: set(), sleep=lambda s: None)
    assert r.round_id == DEAD
    return read_round_record(store, round_key(DEAD))


def _intent(keys: list[object], sizes: list[object] | None = None) -> bytes:
    return json.dumps({"keys": keys, "sizes": sizes or [1] * len(keys),
                       "ages": [1.0] * len(keys)}).encode()


def test_one_intent_names_at_most_what_the_deleter_puts_in_one() -> None:
    assert delete.INTENT_BATCHES * MAX_DELETE_BATCH <= MAX_INTENT_KEYS


class _Heads(_Delegating):
    def __init__(self, inner: LocalStore) -> None:
        super().__init__(inner)
        self.heads: list[str] = []

    def head(self, key: str):  # type: ignore[no-untyped-def]
        self.heads.append(key)
        return self.inner.head(key)


def test_an_entry_past_the_bound_is_unreadable_and_names_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding 7: one byte past `MAX_ENTRY` is read (so it is known to be larger), nothing
    of it is salvaged or asked about."""
    store = LocalStore(tmp_path, create=True)
    torn = _intent([format_key(1, 5, f"k{i}") for i in range(40)])[:-30]  # cut short
    prefix = _dead_round(store, torn, done=None)
    heads = _Heads(store)
    assert read_journal(heads, prefix).unreadable == 1 and heads.heads  # torn: salvaged
    monkeypatch.setattr(journal, "MAX_ENTRY", len(torn) - 1)
    heads = _Heads(store)
    totals = read_journal(heads, prefix)
    assert totals.unreadable == 1 and heads.heads == [], heads.heads
    assert "larger than" in totals.unreadable_samples[0]


def test_a_torn_intent_yields_no_more_keys_than_an_intent_names() -> None:
    raw = b'{"keys": [' + b", ".join(b'"%s"' % format_key(1, 5, f"k{i}").encode()
                                     for i in range(50)) + b", "
    assert len(salvage_keys(raw)) == 50
    assert len(salvage_keys(raw, limit=7)) == 7


def test_an_intent_whose_keys_are_not_all_data_keys_resolves_the_rest_by_asking(
        tmp_path: Path) -> None:
    """Finding 1: the entry is unreadable; its data keys are asked about (gone: counted
    `gone_unattributed`, never `deleted`); its other strings are not (no HEAD of "../x")."""
    store = LocalStore(tmp_path, create=True)
    there = format_key(1, 5, "there")
    store.put(there, b"x")
    prefix = _dead_round(store, _intent([KEY, there, "../x", 7]))
    heads = _Heads(store)
    totals = read_journal(heads, prefix)
    assert totals.unreadable == 1 and not totals.deleted
    assert set(totals.gone_unattributed) == {KEY} and sorted(heads.heads) == [KEY, there]
    assert "not a data key" in totals.unreadable_samples[0]


@pytest.mark.parametrize("ages", [[float("nan")], [1e400], ["1.0"], [True], [10**400]],
                         ids=["nan", "inf", "text", "bool", "huge-int"])
def test_an_intent_whose_age_is_no_number_is_unreadable(tmp_path: Path,
                                                        ages: list[object]) -> None:
    store = LocalStore(tmp_path, create=True)
    raw = json.dumps({"keys": [KEY], "sizes": [1], "ages": ages}).encode()
    prefix = _dead_round(store, raw.replace(b"Infinity", b"1e400"))
    totals = read_journal(store, prefix)
    assert totals.unreadable == 1 and not totals.deleted


def test_an_error_text_is_cut_when_written(tmp_path: Path) -> None:
    """Finding 4, at the source: an outcome's error text is cut to `MAX_TEXT` characters
    (it is copied into the record; and an entry stays within `MAX_ENTRY`)."""
    store = LocalStore(tmp_path, create=True)
    w = JournalWriter(store, JournalTarget(journal_prefix(DEAD)), Attempt(0, 0, 0, 1))
    seq = w.intent([(KEY, 1, 1.0, "")])
    w.done(seq, DeleteResult(1, {KEY: "y" * 100_000}))
    [done] = [o.key for o in store.list_all(journal_prefix(DEAD)) if o.key.endswith("done.json")]
    why = json.loads(store.get(done))["errors"][KEY]
    assert why.startswith("y" * MAX_TEXT) and len(why) < MAX_TEXT + 50 and "cut" in why


def test_a_huge_key_in_a_salvaged_intent_leaves_a_readable_record(tmp_path: Path) -> None:
    """Finding 4's other path (samples name keys): a key outside the grammar is never asked
    about nor sampled, and an unreadable entry's sample is cut."""
    store = LocalStore(tmp_path, create=True)
    _dead_round(store, _intent([KEY, "k" * 2_000_000]))
    record = _recover(store)
    assert record["journal_unreadable"] == 1
    assert max(map(len, record["samples"]["errors"])) < 1000  # type: ignore[index]


def test_a_start_whose_options_are_damaged_is_counted_and_its_bound_still_holds(
        tmp_path: Path) -> None:
    """Finding 1 (START): its options are not copied, START counts unreadable and is named;
    its other fields serve (its bound 0: no wait; its M)."""
    store = LocalStore(tmp_path, create=True)
    store.put(KEY, b"x")
    _dead_round(store, _intent([KEY]),
                start=b'{"stop_within_s": 0, "M": 9, "options": {"grace_s": NaN}}')
    record = _recover(store)
    assert record["options"] == {} and record["M"] == 9
    assert record["journal_unreadable"] == 1 and record["counts"]["deleted"] == 1  # type: ignore[index]
    assert any("START.json: field options is damaged" in s
               for s in record["samples"]["errors"])  # type: ignore[index]


@pytest.mark.parametrize("field, value", [("M", "true"), ("M", "-1"),
                                          ("snapshot_revision", '"3"')])
def test_a_start_field_that_is_no_count_is_not_copied(field: str, value: str) -> None:
    start = parse_start(f'{{"stop_within_s": 0, "{field}": {value}}}'.encode(), "START.json")
    assert (start.m, start.revision) == (None, None) and field in str(start.problem)
    assert start.doc is not None and start.doc["stop_within_s"] == 0


def test_a_start_whose_options_are_larger_than_a_record_allows_is_not_copied() -> None:
    big = json.dumps({"stop_within_s": 0, "options": {"x": "y" * MAX_OPTIONS}}).encode()
    start = parse_start(big, "START.json")
    assert start.options_or_none() == {} and "options" in str(start.problem)


def test_a_damaged_end_under_own_end_leaves_the_recovered_record(tmp_path: Path) -> None:
    """Finding 8 where a driver's END replaced a recovery's (`OWN_END`): one that is no
    round record is no account; the recovered record stays, the marker goes."""
    store = LocalStore(tmp_path, create=True)
    store.put(KEY, b"x")
    prefix = _dead_round(store, _intent([KEY]))
    before = _recover(store)
    store.put(prefix + OWN_END, b"{}")
    store.put(prefix + "END.json", b'{"outcome": 5}')
    assert recover_dead_rounds(store, "s28d", lambda: set(), sleep=lambda s: None) == []
    assert read_round_record(store, round_key(DEAD)) == before
    assert store.head(prefix + OWN_END) is None


@pytest.mark.parametrize("tree", [
    {"driver": {}, "uid": 0, "mark": "\ud800"},
    {"driver": {"boot_id": "b", "pid_namespace": "n", "pid": 1, "start_ticks": "\u00b2"},
     "uid": 0, "mark": "m"},
], ids=["surrogate-mark", "superscript-ticks"])
def test_a_damaged_driver_tree_in_start_is_not_known_gone(tree: dict[str, object]) -> None:
    """`tasks_gone` reads a START's `driver_tree`: a mark that cannot be encoded or ticks
    `int` refuses ("²" passes `isdigit`) say nothing, never raise (finding 1's class)."""
    assert tasks_gone({"driver_tree": tree}) is False
