"""A recovery and the round's own driver (alive after all) both record one round (review
rev38n finding 1): the driver's END and record win, and the round has one number."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from epochgc.impl.gc.journal import END, START, journal_prefix, write_marker
from epochgc.impl.gc.record import record_document, round_key, write_record
from epochgc.impl.gc.recover import recover_dead_rounds
from epochgc.impl.gc.sequence import SEQ_PREFIX, claim
from epochgc.impl.gc.summary import GcSummary
from epochgc.impl.store.local import LocalStore

ROUND = "20270115T060000.000Z-l1ver0nd"


def _started(store: LocalStore) -> str:
    prefix = journal_prefix(ROUND)
    write_marker(store, prefix, START, {"round": ROUND, "M": 100, "snapshot_revision": 7,
                                        "options": {}, "stop_within_s": 240.0})
    return prefix


def _drivers_summary(prefix: str) -> GcSummary:
    """What the live driver records once it saw STOP: interrupted by the marker."""
    return GcSummary(M=100, revision=7, round_id=ROUND, journal=prefix,
                     interrupted="stop-marker")


def _get(store: LocalStore, key: str) -> dict[str, Any]:
    doc = json.loads(store.get(key))
    assert isinstance(doc, dict)
    return doc


def test_a_driver_recording_after_the_recovery_keeps_the_rounds_number(
    tmp_path: Path,
) -> None:
    """The recovery recorded the round (`killed`, number 1); its driver, alive after all,
    writes its own record later (a plain write: it replaces the recovered one). It claims
    no second number: the old code gave the round numbers 1 and 2 (`AssertionError:
    ['..01', '..02']`), so `gc-admin show` counted one round twice."""
    store = LocalStore(tmp_path / "s", create=True)
    prefix = _started(store)
    [done] = recover_dead_rounds(store, "gc-admin reset", lambda: set(), sleep=lambda _s: None)
    assert _get(store, done.record)["outcome"] == "driver-gone"
    s = _drivers_summary(prefix)
    write_record(store, s, {})
    seqs = [o.key[len(SEQ_PREFIX):] for o in store.list_all(SEQ_PREFIX)]
    record = _get(store, round_key(ROUND))
    assert len(seqs) == 1, seqs
    assert (record["outcome"], record["seq"], s.seq) == ("interrupted", 1, 1), record


def test_an_end_written_during_the_wait_is_the_record(tmp_path: Path) -> None:
    """The driver wrote its END during the recovery's wait and was killed before its
    record: the recovery copies that END (the driver's account) and leaves it as it is.
    The old code read the journal back and wrote `killed` over the END (`AssertionError:
    ('killed', 'killed')`)."""
    store = LocalStore(tmp_path / "s", create=True)
    prefix = _started(store)
    s = _drivers_summary(prefix)
    s.seq = 1

    def driver_ends(_s: float) -> None:
        write_marker(store, prefix, END, record_document(s, {}))

    [done] = recover_dead_rounds(store, "round next", lambda: set(), sleep=driver_ends)
    got = (_get(store, done.record)["outcome"], _get(store, prefix + END)["outcome"])
    assert got == ("interrupted", "interrupted"), got
    assert done.from_end


class _ListedBefore(LocalStore):
    """A claimer that listed the sequence before the other claimer's marker was created
    (the two ran at once): its listing of the markers is empty."""

    def list_page(self, prefix: str, *args: Any, **kwargs: Any) -> Any:
        page = super().list_page(prefix, *args, **kwargs)
        if prefix == SEQ_PREFIX:
            return type(page)([], False)
        return page


def test_two_claims_of_one_round_at_once_share_its_number(tmp_path: Path) -> None:
    """A recovery and the driver (or two recoveries) claim at once: both list the same
    highest and try the same number; the one that loses the create reads the marker that
    won and finds its own round there. The old code moved on and took the next number
    (`AssertionError: (1, 2)`)."""
    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    first = claim(store, ROUND, round_key(ROUND))
    second = claim(_ListedBefore(root), ROUND, round_key(ROUND))
    assert (first, second) == (1, 1)
    assert claim(_ListedBefore(root), "another-round", round_key("another-round")) == 2
