"""Journal entries, END/START markers and sequence markers are bytes from the store: one
nested deeper than Python's recursion limit (a damaged or hostile object) made `json.loads`
raise RecursionError, which none of their readers caught, so one such object stopped every
`gc-admin show` and every round's recovery of dead rounds. Each is now refused by the linear
nesting check (`reports.check_nesting`) and handled like any other unreadable entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.gc import recover as recover_mod
from epochgc.impl.gc.bounds import MAX_STOP_WITHIN_S
from epochgc.impl.gc.journal import END, JOURNAL_PREFIX, START, read_journal
from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.gc.sequence import claim, latest, marker_key, markers
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key
from tests.gc.helpers import HOUR, JOURNAL, put_local, simple_cluster

DEEP = b"[" * 3000  # past the recursion limit (1000), under every size limit


def test_a_deeply_nested_intent_is_unreadable_not_a_crash(tmp_path: Path) -> None:
    """Old code: RecursionError out of read_journal."""
    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    a = [format_key(1, 5, f"a{i}") for i in range(3)]
    for k in a:
        put_local(root, k, age=13 * HOUR)
    base = f"{JOURNAL}p0000-s0-a0-t1/"
    store.put(base + "00000000.intent.json", json.dumps(
        {"keys": a, "sizes": [1] * 3, "ages": [1.0] * 3}).encode())
    store.delete_batch(a)
    store.put(base + "00000000.done.json", b'{"gone": [], "changed": [], "errors": {}}')
    store.put(base + "00000001.intent.json", DEEP)
    store.put(base + "00000001.done.json", DEEP)
    t = read_journal(store, JOURNAL)
    assert set(t.deleted) == set(a)
    assert t.unreadable == 2


def test_a_deeply_nested_end_is_recovered_from_the_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Old code: `gc-admin show` exit 1, `Error: RecursionError: maximum recursion depth
    exceeded while decoding a JSON array`; the dead round never got its record. `show`
    writes its STOP (an unreadable START: the longest bound) and does not wait (review
    rev38n finding 4); `reset` waits (here: not at all) and records it."""
    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    simple_cluster(store, 10)
    rid = "20260101T000000.000000Z-dead"
    store.put(f"{JOURNAL_PREFIX}{rid}/{START}", DEEP)
    store.put(f"{JOURNAL_PREFIX}{rid}/{END}", DEEP)
    r = CliRunner().invoke(main, ["gc-admin", "show", "--store", str(root)])
    assert r.exit_code in (0, 2), r.output  # 2: M blocked (no health reports)
    assert "RecursionError" not in r.output
    assert f"dead round being recovered: {rid}" in r.output, r.output
    waits: list[float] = []
    monkeypatch.setattr(recover_mod, "SLEEP", waits.append)
    r = CliRunner().invoke(main, ["gc-admin", "reset", "--store", str(root)])
    assert r.exit_code == 0 and "RecursionError" not in r.output, r.output
    assert sum(waits) == MAX_STOP_WITHIN_S  # in steps (newuser4 F3); its END is unreadable
    doc = json.loads(store.get(f"{ROUNDS_PREFIX}{rid}.json"))
    assert doc["outcome"] == "driver-gone", doc


def test_a_deeply_nested_sequence_marker_is_skipped(tmp_path: Path) -> None:
    """Old code: RecursionError out of `latest` and `markers` (show, expire, numbering)."""
    store = LocalStore(tmp_path / "s", create=True)
    claim(store, "r1", f"{ROUNDS_PREFIX}r1.json")
    store.put(marker_key(2), DEEP)
    got = latest(store)
    assert got is not None and got.round_id == "r1"
    assert [m.round_id for m in markers(store)] == ["r1"]
