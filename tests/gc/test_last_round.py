"""Issue 38 item 6: `gc-admin show` named the wrong last round after the clock stepped back:
it took the record whose name (the round's start time on its own clock) sorts last. Rounds
are now ordered by a sequence number the store hands out (`impl/gc/sequence.py`: each record
claims the next number with a create-only-if-absent), whatever their clocks said."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.gc.sequence import SEQ_PREFIX, SequenceError, claim, latest
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import AHEAD, NOW, simple_cluster


def _invoke(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.output


def test_show_names_the_last_round_after_a_clock_step_back(tmp_path: Path) -> None:
    """Old code: `last round: ...20270115T080000.000Z-...: paused` (the earlier round, whose
    name sorts after the later one's)."""
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100)
    assert _invoke("gc-admin", "pause", "--store", str(root))[0] == 0
    code, out = _invoke("gc", "--store", str(root), "--now", str(NOW), *AHEAD, "-q")
    assert code == 3, out  # paused: a record, no Spark
    assert _invoke("gc-admin", "start", "--store", str(root))[0] == 0
    # The clock stepped back an hour: the reports look an hour ahead, the round is blocked.
    code, out = _invoke("gc", "--store", str(root), "--now", str(NOW - 3600), *AHEAD, "-q")
    assert code == 2, out
    store = LocalStore(root)
    names = sorted(o.key for o in store.list_all(ROUNDS_PREFIX))
    assert len(names) == 2 and json.loads(store.get(names[-1]))["outcome"] == "paused"
    code, out = _invoke("gc-admin", "show", "--store", str(root), "--json")
    # show exits 2: the fixture's reports are dated ahead of this host's clock
    assert code == 2, out
    last = json.loads(out)["last_round"]
    assert last["outcome"] == "blocked" and last["key"] == names[0], last
    assert last["seq"] == 2


def test_claim_hands_out_each_number_once(tmp_path: Path) -> None:
    store = LocalStore(tmp_path, create=True)
    assert latest(store) is None
    assert claim(store, "r1", f"{ROUNDS_PREFIX}r1.json") == 1
    # Another writer took 2 between this writer's listing and its create: it moves on.
    store.put_if_absent(f"{SEQ_PREFIX}{2:020d}", b'{"round": "other"}')
    assert claim(store, "r3", f"{ROUNDS_PREFIX}r3.json") == 3
    got = latest(store)
    assert got is not None and got.seq == 3 and got.round_id == "r3"


@pytest.mark.parametrize("marker", ["99999999999999999999", "100000000000000000000", "123",
                                    "0000000000000000000x"])
def test_a_sequence_it_cannot_extend_or_order_is_refused_naming_the_key(
        tmp_path: Path, marker: str) -> None:
    """newuser3 N8: after a marker `_cluster/gc/seq/99999999999999999999` the next round
    took the number 100000000000000000000 (21 digits), which the readers skipped: `show`
    named the older round as the last, and `expire --keep-last 1` planned to remove the
    round just run. A key there that is not 20 digits, or a sequence at its end, is refused
    by the round (before it writes anything), by `show` and by `expire`, naming the key."""
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100)
    assert _invoke("gc-admin", "pause", "--store", str(root))[0] == 0
    code, out = _invoke("gc", "--store", str(root), "--now", str(NOW), *AHEAD, "-q")
    assert code == 3, out  # paused: a record (#1), no Spark
    store = LocalStore(root)
    store.put(f"{SEQ_PREFIX}{marker}", b"")
    before = sorted(o.key for o in store.list_all("_cluster/gc/"))
    key = f"{SEQ_PREFIX}{marker}"
    code, out = _invoke("gc", "--store", str(root), "--now", str(NOW + 60), *AHEAD, "-q")
    assert code == 1 and key in out, out
    assert sorted(o.key for o in store.list_all("_cluster/gc/")) == before  # nothing written
    code, out = _invoke("gc-admin", "show", "--store", str(root), "--json")
    last = json.loads(out)["last_round"]
    assert set(last) == {"error"} and key in last["error"], last
    code, out = _invoke("gc-admin", "expire", "--store", str(root), "--older-than", "0s",
                        "--keep-last", "1")
    assert code == 1 and key in out and "nothing removed" in out, out
    with pytest.raises(SequenceError, match=marker):
        claim(store, "r9", f"{ROUNDS_PREFIX}r9.json")
    assert sorted(o.key for o in store.list_all("_cluster/gc/")) == before
