"""Issue 38: a round whose deleted count is a lower bound says so in `gc --json` and in its
metrics, not only in its record (`counts.unknown`, `journal_unreadable`) and on stderr
("at least N deleted"): keys the store could not tell about even at the read-back
(review rev38q findings 1 and 5), and journal entries the read-back could not read."""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from epochgc.impl.gc.cli import _after
from epochgc.impl.gc.journal import Attempt, JournalTarget, JournalWriter, read_journal
from epochgc.impl.gc.metrics import export_metrics
from epochgc.impl.gc.stage import _count
from epochgc.impl.gc.summary import GcSummary
from epochgc.impl.store.base import DeleteResult
from tests.gc.helpers import JOURNAL, put_local
from tests.gc.test_journal_unknown import _HeadFails, _keys


def _round_with_an_unknown_key(root: Path) -> GcSummary:
    """Four keys in one batch: its DeleteObjects was applied to k0 and k1 and answered 500
    (whether they were deleted is unknown); at the read-back k0 is gone (by the round's
    request or another writer's: no answer says which), k2 still there, and the store
    still cannot say about k1 (its HEAD fails); k3 was deleted."""
    store = _HeadFails(root, create=True)
    keys = _keys(4)
    for k in keys:
        put_local(root, k, 7200.0)
    w = JournalWriter(store, JournalTarget(JOURNAL), Attempt(0, 0, 0, 1))
    seq = w.intent([(k, 1, 7200.0, "") for k in keys])
    store.delete_batch(keys[:2])
    why = "RequestFailedMaybeApplied: 500; whether it was deleted is unknown"
    w.done(seq, DeleteResult(4, errors=dict.fromkeys(keys[:3], why), unknown=set(keys[:3])))
    store.failing = frozenset({keys[1]})
    s = GcSummary(journal=JOURNAL, M=7)
    _count(s, read_journal(store, JOURNAL))
    assert (s.deleted, s.gone_unattributed, s.unknown, s.errors) == (1, 1, 1, 1)
    assert _after(s).startswith("at least 1 key(s) were deleted")  # stderr's words
    return s


def _samples(path: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(m.name, tuple(sorted(m.labels.items()))): m.value
            for f in text_string_to_metric_families(path.read_text()) for m in f.samples}


def test_json_says_how_many_keys_are_unknown(tmp_path: Path) -> None:
    """Old code: `KeyError: 'unknown'` (the JSON said deleted 2, errors 1, outcome
    incomplete, and nothing said the 2 was a lower bound)."""
    s = _round_with_an_unknown_key(tmp_path / "s")
    got = json.loads(s.to_json())
    assert (got["deleted"], got["errors"], got["outcome"]) == (1, 1, "incomplete")
    assert (got["unknown"], got["journal_unreadable"], got["gone_unattributed"]) == (1, 0, 1), got


def test_json_says_how_many_journal_entries_were_unreadable() -> None:
    s = GcSummary(journal=JOURNAL, M=7, deleted=5, unreadable_entries=2)
    got = json.loads(s.to_json())
    assert (got["unknown"], got["journal_unreadable"], got["outcome"]) == (0, 2, "incomplete")


def test_the_metrics_file_counts_unknown_keys_and_unreadable_entries(tmp_path: Path) -> None:
    """Old code: `KeyError: ('epochgc_gc_objects', (('outcome', 'unknown'),))`."""
    s = _round_with_an_unknown_key(tmp_path / "s")
    s.unreadable_entries = 3
    path = tmp_path / "gc.prom"
    export_metrics(s, str(path))
    got = _samples(path)
    assert got[("epochgc_gc_objects", (("outcome", "unknown"),))] == 1
    assert got[("epochgc_gc_objects", (("outcome", "deleted"),))] == 1
    # k0: gone, its request answered 500: its own series, not in deleted (rev38v finding 3)
    assert got[("epochgc_gc_objects", (("outcome", "gone_unattributed"),))] == 1
    assert got[("epochgc_gc_bytes_deleted", ())] == 1
    assert got[("epochgc_gc_bytes_gone_unattributed", ())] == 1
    assert got[("epochgc_gc_journal_unreadable", ())] == 3


def test_a_round_that_knows_its_deletions_exports_zero(tmp_path: Path) -> None:
    """The boundary: a complete count says 0 for both (and the JSON of a round that could
    not even start has them too)."""
    s = GcSummary(journal=JOURNAL, M=7, deleted=4)
    path = tmp_path / "gc.prom"
    export_metrics(s, str(path))
    got = _samples(path)
    assert got[("epochgc_gc_objects", (("outcome", "unknown"),))] == 0
    assert got[("epochgc_gc_objects", (("outcome", "gone_unattributed"),))] == 0
    assert got[("epochgc_gc_bytes_gone_unattributed", ())] == 0
    assert got[("epochgc_gc_journal_unreadable", ())] == 0
    assert json.loads(GcSummary(error="boom").to_json())["unknown"] == 0


def test_keys_gone_unattributed_are_said_apart_from_deleted_in_every_ending() -> None:
    """Review rev38v finding 3: keys found absent in batches whose answer was never
    recorded have a line of their own after the first (an interrupted round's first line is
    its only one otherwise), are not a reason for `incomplete`, and the next round's note on
    a dead round names them after its deleted count."""
    from epochgc.impl.gc.recover import Recovered

    for s in (GcSummary(journal=JOURNAL, M=7, deleted=3, gone_unattributed=2),
              GcSummary(journal=JOURNAL, M=7, deleted=3, gone_unattributed=2,
                        interrupted="SIGTERM", listing_complete=False)):
        lines = s.lines()
        assert "delet" in lines[0] and "3" in lines[0], lines
        assert lines[1] == (
            "gc: 2 key(s) left the store in delete batches with no answer saying the round "
            "deleted them (the answer was lost with a killed task attempt, was ambiguous: "
            "a 5xx or a timeout, or said the key was not there, on S3, where the round's own "
            "request may have been sent twice): by this round's requests or another "
            f"writer's, not known which; not counted in deleted (journal {JOURNAL})"), lines
        assert json.loads(s.to_json())["gone_unattributed"] == 2
    assert GcSummary(journal=JOURNAL, M=7, deleted=3, gone_unattributed=2).outcome == "done"
    assert not any("left the store" in line
                   for line in GcSummary(journal=JOURNAL, M=7, deleted=3).lines())
    dead = Recovered("r", "k", 3, 0, False, gone_unattributed=2)
    assert dead.gone_text() == (", 2 more left the store in batches with no answer saying "
                                "the round deleted them (its requests' or another writer's)")
    assert Recovered("r", "k", 3, 0, False).gone_text() == ""
