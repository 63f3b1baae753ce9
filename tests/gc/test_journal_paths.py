"""`read_journal` reads a batch whose `done` has no gone/changed/errors in one update (issue
29's fast path) and every other batch key by key: both must give the same totals for any
journal, including duplicated keys across batches and attempts and sizes that are not ints.

The check is differential on the real reader: the same journal is read as written, and again
with every `done` made to take the key-by-key path (a `gone` entry for a key of no batch,
which that path ignores)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from epochgc.impl.gc.journal import JournalTotals, read_journal
from epochgc.impl.store.local import LocalStore

from tests.gc.helpers import JOURNAL

_OUTSIDER = "zz/in-no-batch"  # in a `gone` list only: forces the key-by-key path


def _write(store: LocalStore, batches: list[tuple[str, list[list[Any]], dict[str, Any] | None]],
           slow: bool) -> None:
    for name, items, done in batches:
        store.put(f"{JOURNAL}{name}.intent.json", json.dumps({"keys": items}).encode())
        if done is not None:
            if slow:
                done = dict(done, gone=[*done["gone"], _OUTSIDER])
            store.put(f"{JOURNAL}{name}.done.json", json.dumps(done).encode())


def _read(root: Path, batches: list[tuple[str, list[list[Any]], dict[str, Any] | None]],
          slow: bool) -> JournalTotals:
    store = LocalStore(root, create=True)
    _write(store, batches, slow)
    totals = read_journal(store, JOURNAL)
    totals.already_gone.discard(_OUTSIDER)
    return totals


def _random_journal(rng: random.Random) -> list[tuple[str, list[list[Any]], dict[str, Any] | None]]:
    keys = [f"k/{i}" for i in range(12)]  # few keys: many land in several batches
    out: list[tuple[str, list[list[Any]], dict[str, Any] | None]] = []
    for a in range(rng.randint(1, 3)):
        for seq in range(rng.randint(1, 4)):
            items: list[list[Any]] = []
            for key in rng.sample(keys, rng.randint(1, 5)):
                size = rng.choice([rng.randint(0, 99), rng.randint(0, 99) + 0.5,
                                   str(rng.randint(0, 99))])
                items.append([key, size, rng.choice([0, 1.5, "2.5"])])
            if rng.random() < 0.3:
                items.append(list(items[0]))  # a key twice in one batch
            done: dict[str, Any] | None = {"gone": [], "changed": [], "errors": {}}
            for item in items:
                what = rng.choice(["deleted"] * 4 + ["gone", "changed", "errors"])
                if what == "errors":
                    assert done is not None
                    done["errors"][item[0]] = "503"
                elif what != "deleted":
                    assert done is not None
                    done[what].append(item[0])
            if rng.random() < 0.5:  # the common batch: every key deleted
                done = {"gone": [], "changed": [], "errors": {}}
            if rng.random() < 0.1:
                done = None  # killed mid-request: resolved by asking the store
            out.append((f"p{a:04d}-s0-a{a}-t{a}/{seq:08d}", items, done))
    return out


def _as_tuple(t: JournalTotals) -> tuple[object, ...]:
    return (t.deleted, t.already_gone, t.changed, t.errors, t.attempts, t.batches,
            t.unfinished, t.bytes_deleted)


@pytest.mark.parametrize("seed", range(40))
def test_all_deleted_batches_read_in_one_update_give_the_key_by_key_totals(
    tmp_path: Path, seed: int
) -> None:
    journal = _random_journal(random.Random(seed))
    fast = _read(tmp_path / "fast", journal, slow=False)
    slow = _read(tmp_path / "slow", journal, slow=True)
    assert _as_tuple(fast) == _as_tuple(slow)
    assert all(type(size) is int and type(age) is float
               for size, age in fast.deleted.values())


def test_the_later_batch_of_a_key_deleted_twice_gives_its_size(tmp_path: Path) -> None:
    # Two attempts deleted the same key (S3 cannot tell "already gone"): one count, the
    # size of the later batch in journal order, whichever path read each batch.
    ok = {"gone": [], "changed": [], "errors": {}}
    journal: list[tuple[str, list[list[Any]], dict[str, Any] | None]] = [
        ("p0000-s0-a0-t1/00000000", [["k/a", 5, 1.0], ["k/b", 1, 1.0]], ok),
        ("p0000-s0-a1-t2/00000000", [["k/a", "7", 2], ["k/c", 1, 1.0]],
         {"gone": [], "changed": [], "errors": {"k/c": "503"}}),
        ("p0000-s0-a2-t3/00000000", [["k/c", 3.9, 0]], ok),
    ]
    for slow in (False, True):
        t = _read(tmp_path / str(slow), journal, slow)
        assert t.deleted == {"k/a": (7, 2.0), "k/b": (1, 1.0), "k/c": (3, 0.0)}
        assert not t.errors and t.bytes_deleted == 11


@pytest.mark.parametrize("bad", [
    {"keys": [["k/a", "five", 1.0]]},
    {"keys": [["k/a", None, 1.0]]},
    {"keys": [["k/a", 1]]},
])
def test_an_unreadable_intent_is_an_error_on_either_path(
    tmp_path: Path, bad: dict[str, Any]
) -> None:
    for slow in (False, True):
        store = LocalStore(tmp_path / str(slow), create=True)
        store.put(f"{JOURNAL}p0000-s0-a0-t1/00000000.intent.json", json.dumps(bad).encode())
        done = {"gone": [_OUTSIDER] if slow else [], "changed": [], "errors": {}}
        store.put(f"{JOURNAL}p0000-s0-a0-t1/00000000.done.json", json.dumps(done).encode())
        with pytest.raises((ValueError, TypeError)):
            read_journal(store, JOURNAL)


def test_a_done_without_its_fields_is_an_error(tmp_path: Path) -> None:
    store = LocalStore(tmp_path, create=True)
    store.put(f"{JOURNAL}p0000-s0-a0-t1/00000000.intent.json",
              json.dumps({"keys": [["k/a", 1, 1.0]]}).encode())
    store.put(f"{JOURNAL}p0000-s0-a0-t1/00000000.done.json",
              json.dumps({"gone": [], "changed": []}).encode())
    with pytest.raises(KeyError):
        read_journal(store, JOURNAL)
