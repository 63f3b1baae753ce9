"""A round-sequence marker far above the rounds' own numbers (issue 41, newuser4 F4): a
marker `...998` was accepted, the next round took `...999`, the tool then said to remove
"the marker at the end" by hand, and after that `gc-admin show` named an older round as the
last and `expire --keep-last 1` planned to remove the newest. Now such a marker is refused
(nobody holds it and it is far above the next), the advice at the end names every key to
remove, and `show`/`expire` order a round whose marker was removed by its record's own
number, when its start time agrees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.gc.sequence import (
    LAST,
    MAX_JUMP,
    SequenceError,
    claim,
    marker_key,
    round_seq_key,
)
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import AHEAD, NOW, simple_cluster


def _invoke(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.output


def _paused_round(root: Path, at: float) -> str:
    """A real round's record, number and markers (paused: no Spark), then its record made
    one of a round that ran (`show`'s last round and `expire --keep-last` skip refusals,
    issue 41 F5; the order of rounds is what these tests are about); its record's key."""
    store = LocalStore(root)
    before = {o.key for o in store.list_all(ROUNDS_PREFIX)}
    code, out = _invoke("gc", "--store", str(root), "--now", str(at), *AHEAD, "-q")
    assert code == 3, out
    [key] = {o.key for o in store.list_all(ROUNDS_PREFIX)} - before
    doc = json.loads(store.get(key))
    store.put(key, json.dumps({**doc, "refusal": None, "outcome": "done"}).encode())
    return key


def _store(tmp_path: Path) -> Path:
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100)
    assert _invoke("gc-admin", "pause", "--store", str(root))[0] == 0
    return root


@pytest.mark.parametrize("seq", [LAST - 1, 2 + MAX_JUMP])
def test_a_marker_far_above_the_rounds_numbers_is_refused_naming_it(
    tmp_path: Path, seq: int
) -> None:
    root = _store(tmp_path)
    _paused_round(root, NOW)  # #1
    store = LocalStore(root)
    key = marker_key(seq)
    store.put(key, b"")  # `touch`: nobody's
    before = sorted(o.key for o in store.list_all("_cluster/gc/"))
    code, out = _invoke("gc", "--store", str(root), "--now", str(NOW + 60), *AHEAD, "-q")
    assert code == 1 and key in out, (
        f"a marker {key} far above the rounds' numbers (1) was accepted: gc exit {code}")
    assert sorted(o.key for o in store.list_all("_cluster/gc/")) == before
    _code, out = _invoke("gc-admin", "show", "--store", str(root), "--json")
    last = json.loads(out)["last_round"]
    assert set(last) == {"error"} and key in last["error"], last
    code, out = _invoke("gc-admin", "expire", "--store", str(root), "--older-than", "0s",
                        "--keep-last", "1")
    assert code == 1 and key in out, out
    with pytest.raises(SequenceError, match=key):
        claim(store, "r9", f"{ROUNDS_PREFIX}r9.json")


def test_a_marker_at_the_widest_gap_rounds_leave_is_taken(tmp_path: Path) -> None:
    """Boundary: MAX_JUMP above the next (lost claims, an expiry): still a sequence."""
    store = LocalStore(tmp_path, create=True)
    assert claim(store, "r1", f"{ROUNDS_PREFIX}r1.json") == 1
    store.put(marker_key(1 + MAX_JUMP), b"")
    assert claim(store, "r2", f"{ROUNDS_PREFIX}r2.json") == 2 + MAX_JUMP


def test_a_lone_marker_a_round_holds_is_a_sequence_however_high(tmp_path: Path) -> None:
    """`expire` leaves the highest marker and its round's: far above 0, held, accepted."""
    store = LocalStore(tmp_path, create=True)
    store.put(marker_key(5000), json.dumps({"round": "r1", "record": "x"}).encode())
    store.put(round_seq_key("r1"), json.dumps({"round": "r1", "seq": 5000}).encode())
    assert claim(store, "r2", f"{ROUNDS_PREFIX}r2.json") == 5001


def _damaged(tmp_path: Path) -> tuple[Path, str, str, str]:
    """The store the old code left: #1, a touched `...998`, the next round numbered
    `...999` (its record, its marker and its per-round marker say so)."""
    root = _store(tmp_path)
    first = _paused_round(root, NOW)
    second = _paused_round(root, NOW + 60)
    store = LocalStore(root)
    rid = second[len(ROUNDS_PREFIX):].removesuffix(".json")
    doc = json.loads(store.get(second))
    assert doc["seq"] == 2
    store.put(second, json.dumps({**doc, "seq": LAST}).encode())
    store.put(marker_key(LAST), json.dumps({"round": rid, "record": second}).encode())
    store.put(round_seq_key(rid), json.dumps({"round": rid, "seq": LAST}).encode())
    (root / marker_key(2)).unlink()
    store.put(marker_key(LAST - 1), b"")
    return root, first, second, rid


def test_the_advice_at_the_sequences_end_names_every_key_to_remove(tmp_path: Path) -> None:
    root, _first, _second, rid = _damaged(tmp_path)
    _code, out = _invoke("gc-admin", "show", "--store", str(root), "--json")
    advice = json.loads(out)["last_round"]["error"]
    for key in (marker_key(LAST), marker_key(LAST - 1), round_seq_key(rid)):
        assert key in advice, f"the advice does not name {key}: {advice}"


def test_after_the_advice_show_and_expire_order_the_rounds_right(tmp_path: Path) -> None:
    root, first, second, rid = _damaged(tmp_path)
    for key in (marker_key(LAST), marker_key(LAST - 1), round_seq_key(rid)):
        (root / key).unlink()  # as the advice says

    _code, out = _invoke("gc-admin", "show", "--store", str(root), "--json")
    last = json.loads(out)["last_round"]
    assert last.get("key") == second, (
        f"after the advice, show's last round is {last.get('key')}; the newest is {second}")
    _code, out = _invoke("gc-admin", "expire", "--store", str(root), "--older-than", "0s",
                         "--keep-last", "1", "--json")
    plan = json.loads(out)
    first_id = first[len(ROUNDS_PREFIX):].removesuffix(".json")
    assert plan["rounds"] == [first_id], (
        f"expire --keep-last 1 would remove {plan['rounds']}; the newest is {rid}")

    # The next round takes #2: later by its marker and its start, it is the last one (the
    # unmarked round's own number is higher, but it started earlier: the markers stand).
    third = _paused_round(root, NOW + 120)
    _code, out = _invoke("gc-admin", "show", "--store", str(root), "--json")
    assert json.loads(out)["last_round"].get("key") == third
