"""A dead round's journal with damaged documents: the recovery always records the round and
never raises (review rev38z10 finding 1: one damaged document raised ModelError/ValueError
out of every recovery, so every later round, `gc-admin show` and `reset` failed with it).

Each case builds one dead round's journal on a local store (START, two intents, an outcome
alone and one carried in the next intent; an END in half the cases), damages one to three
of its documents (a value anywhere swapped for NaN, Infinity, 1e400, 2**70, an integer of
401 or 5000 digits, -0, -1, a text, a lone surrogate, a list, an object, a key outside the
grammar; a document cut short; a byte flipped) and recovers it. The recovery must not
raise, and the round must have a record that `gc-admin show` reads (`read_round_record`:
strict JSON, a round record's shape, at most `MAX_RECORD`), counting no more keys deleted
than the journal names.

A seeded case puts a 401-digit integer in each number of each document in turn (review
rev38z12 finding 1, which the random cases find only at case 146).

CI: `EPOCHGC_JOURNAL_FUZZ` unset runs 150 journals (about 1 s); `tox -e journalfuzz` runs
3,000 (the reviewer's own run was 1,200)."""

from __future__ import annotations

import copy
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.gc import recover
from epochgc.impl.gc.journal import journal_prefix
from epochgc.impl.gc.record import round_key
from epochgc.impl.gc.recordread import MAX_RECORD, read_round_record
from epochgc.impl.gc.recover import recover_dead_rounds
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key

CASES = int(os.environ.get("EPOCHGC_JOURNAL_FUZZ", "150"))
DEAD = "20261130T190000.000000Z-dead"
KEYS = [format_key(1, 5, f"k{i}") for i in range(4)]
_CLEAN = {"deleted": 2, "gone": [], "changed": [], "errors": {}}
BASE: dict[str, Any] = {
    "START.json": {"round": DEAD, "stop_within_s": 0, "M": 7, "snapshot_revision": 3,
                   "options": {"grace_s": 3600, "tasks": 2}},
    "p0000-s0-a0-t1/00000000.intent.json": {"keys": KEYS[:2], "sizes": [1, 2],
                                            "ages": [1.0, 2.0]},
    "p0000-s0-a0-t1/00000000.done.json": _CLEAN,
    "p0000-s0-a0-t1/00000001.intent.json": {"keys": KEYS[2:], "sizes": [3, 4],
                                            "ages": [1.0, 2.0], "batches": 2,
                                            "done": {"00000000": _CLEAN}},
    "p0000-s0-a0-t1/00000001.done.json": {
        "gone": [], "changed": [], "errors": {KEYS[3]: "read timeout"}, "unknown": [KEYS[3]],
        "unanswered_ago_s": 1.5, "requests": 2},
}
END = {"outcome": "done", "exit_code": 0, "started_at": "2026-11-30T19:00:00+00:00",
       "counts": {"deleted": 3}, "seconds": 1.5, "journal_unreadable": 0}
# Number literals json.dumps does not write (or writes otherwise), written as these texts
# and put in place in `_raw`: json.loads reads 1e400 and 1E+400 as inf, the 401-digit
# integer as an int that float() refuses with OverflowError (review rev38z12 finding 1: it
# raised out of every parser), the 5000-digit one not at all (ValueError: past Python's
# 4300-digit limit), 1e-400 as 0.0, -0 as 0.
LITERALS = {"@int401": "1" + "0" * 400, "@negint401": "-1" + "0" * 400,
            "@int5000": "9" * 5000, "@e400": "1e400", "@E400": "-1E+400",
            "@tiny": "1e-400", "@exp": "1e99999999999", "@neg0": "-0", "@int21": str(10**20)}
# What a damaged value may become (json.dumps writes NaN, Infinity and -Infinity as such).
WEIRD: list[Any] = [None, True, False, -1, 0, 2**70, -(2**70), 1e308, float("nan"),
                    float("inf"), -float("inf"), "", "12", "x" * 5000, "\udc80", "\ud800",
                    [], {}, [1], {"a": 1}, [[[]]], "level_zero/data/0x1/000000000000000005/b",
                    "level_zero/data/001/000000000000000005/", "../x", -0.0, *LITERALS]


def _mutate(doc: Any, rng: random.Random) -> Any:
    """`doc` with one value somewhere in it replaced (or itself, if it holds none)."""
    if isinstance(doc, dict) and doc and rng.random() < 0.7:
        k = rng.choice(sorted(doc))
        doc[k] = _mutate(doc[k], rng)
        return doc
    if isinstance(doc, list) and doc and rng.random() < 0.7:
        i = rng.randrange(len(doc))
        doc[i] = _mutate(doc[i], rng)
        return doc
    return copy.deepcopy(rng.choice(WEIRD))


def _raw(doc: Any, rng: random.Random) -> bytes:
    text = json.dumps(doc)
    for name, literal in LITERALS.items():
        text = text.replace(f'"{name}"', literal)
    raw = text.encode("utf-8", "surrogatepass")
    r = rng.random()
    if r < 0.1:
        return raw[: rng.randrange(len(raw) + 1)]  # a write cut short
    if r < 0.2 and raw:
        i = rng.randrange(len(raw))  # one byte flipped
        return raw[:i] + bytes([raw[i] ^ (1 << rng.randrange(8))]) + raw[i + 1:]
    return raw


def _journal(store: LocalStore, rng: random.Random) -> None:
    docs: dict[str, Any] = copy.deepcopy(BASE)
    if rng.random() < 0.5:
        docs["END.json"] = copy.deepcopy(END)
    for _ in range(rng.randint(1, 3)):
        name = rng.choice(sorted(docs))
        docs[name] = _mutate(docs[name], rng)
    prefix = journal_prefix(DEAD)
    for name, doc in docs.items():
        # Only the damaged ones are cut or flipped: an undamaged document is written whole.
        raw = _raw(doc, rng) if doc != BASE.get(name, END) else json.dumps(doc).encode()
        store.put(prefix + name, raw)


def _recover_and_check(tmp_path: Path, case: str) -> None:
    try:
        done = recover_dead_rounds(LocalStore(tmp_path, create=False), "fuzz", lambda: set(),
                                   sleep=lambda s: None)
    except Exception as e:  # the finding: anything raised here stops GC
        raise AssertionError(f"case {case}: the recovery raised {e!r}") from e
    store = LocalStore(tmp_path, create=False)
    assert [r.round_id for r in done] == [DEAD], f"case {case}: {done}"
    assert len(store.get(round_key(DEAD))) <= MAX_RECORD, f"case {case}"
    record = read_round_record(store, round_key(DEAD))  # DamagedRecord fails the case
    deleted = record["counts"].get("deleted", 0)
    if record.get("recovered_by") is not None:  # read back from the journal
        assert 0 <= deleted <= len(KEYS), f"case {case}: {record['counts']}"


def _number_paths(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(doc, dict):
        return [p for k in sorted(doc) for p in _number_paths(doc[k], (*path, k))]
    if isinstance(doc, list):
        return [p for i, v in enumerate(doc) for p in _number_paths(v, (*path, i))]
    return [path] if type(doc) in (int, float) else []


def test_a_huge_integer_in_any_number_of_the_journal_is_recorded_never_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recover, "POLL_S", 10_000.0)
    prefix = journal_prefix(DEAD)
    full = {**BASE, "END.json": END}
    cases = [(name, path) for name in sorted(full) for path in _number_paths(full[name])]
    assert len(cases) > 15, cases  # every number: ages, sizes, counts, seconds, bounds
    for i, (name, path) in enumerate(cases):
        store = LocalStore(tmp_path / str(i), create=True)
        for k in KEYS:
            store.put(k, b"x")
        for other, doc in full.items():
            if other == name:
                doc = copy.deepcopy(doc)
                *up, last = path
                parent = doc
                for step in up:
                    parent = parent[step]
                parent[last] = "@int401"
                raw = json.dumps(doc).replace('"@int401"', LITERALS["@int401"]).encode()
            else:
                raw = json.dumps(doc).encode()
            store.put(prefix + other, raw)
        _recover_and_check(tmp_path / str(i), f"{name} {path}")


@pytest.mark.parametrize("chunk", range(3))
def test_a_damaged_journal_is_always_recorded_never_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    # A START read as damaged asks for the longest wait (900 s): looked at once, not every
    # 2 s, with the injected sleep (the wait itself is `test_recovery_wait.py`'s).
    monkeypatch.setattr(recover, "POLL_S", 10_000.0)
    for case in range(chunk, CASES, 3):
        rng = random.Random(case)
        store = LocalStore(tmp_path / str(case), create=True)
        for k in KEYS:
            store.put(k, b"x")
        _journal(store, rng)
        _recover_and_check(tmp_path / str(case), str(case))
