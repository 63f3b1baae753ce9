"""Review rev38x: issue 38, branch i38x (review rev38v finding 3: keys found absent without a
recorded answer are `gone_unattributed`, not `deleted`), attacked for records that are still
false or inconsistent.

Each failing test is `xfail(strict=True, reason="rev38x finding N: ...")`; `--runxfail`
shows the failure. The report is /work/notes/review38x.md."""

from __future__ import annotations

import json
import random

import pytest

from epochgc.impl.gc.delete import delete_keys
from epochgc.impl.gc.journal import (
    Attempt,
    JournalTarget,
    JournalTotals,
    JournalWriter,
    journal_prefix,
    read_journal,
)
from epochgc.impl.store.retry import Backoff, Retrier
from epochgc.impl.store.s3 import S3Store
from tests.store.s3proxy import Call, Fault, FaultPlan, s3_proxy

D = "level_zero/data/001/000000000000000005/"  # journaled keys are data keys (R20)

PREFIX = journal_prefix("20270115T100000.000Z-rev38x00")


def _s3(bucket: str, endpoint: str) -> S3Store:
    # Two attempts per request and per key, no backoff: each retry meets the same fault.
    return S3Store(bucket, "c", endpoint_url=endpoint, max_attempts=2,
                   key_retry=Retrier(Backoff(attempts=2, base_s=0.0, cap_s=0.0),
                                     random.Random(1), lambda s: None))


def _run(s3_endpoint: str, s3_bucket: str, plan: FaultPlan, removed_before: bool
         ) -> tuple[list[str], set[str], JournalTotals]:
    """Four keys; `removed_before`: another writer removes k0 after the round listed it and
    before its delete request. The round's one DeleteObjects goes through `plan`. Returns
    the keys, those gone now, and the read-back's totals."""
    keys = [f"{D}k{i}" for i in range(4)]
    direct = _s3(s3_bucket, s3_endpoint)
    for k in keys:
        direct.put(k, b"x")
    if removed_before:
        assert not direct.delete_batch([keys[0]]).errors  # the other writer
    with s3_proxy(s3_endpoint, faults=plan, quiet=True) as p:
        store = _s3(s3_bucket, p.endpoint)
        writer = JournalWriter(store, JournalTarget(PREFIX), Attempt(0, 0, 0, 1))
        delete_keys(store, [(k, 1, 7200.0, "") for k in keys], batch_size=4, concurrency=1,
                    journal=writer)
        store.close()
    try:
        gone = {k for k in keys if direct.head(k) is None}
        totals = read_journal(direct, PREFIX)
    finally:
        direct.close()
    return keys, gone, totals


@pytest.mark.s3
def test_a_key_another_writer_removed_while_the_rounds_request_failed_is_not_counted_deleted(
    s3_endpoint: str, s3_bucket: str
) -> None:
    """The round's DeleteObjects is answered 500 InternalError and never reaches the server
    (S3: "might not have processed"); k0 had been removed by another writer. The store's
    `_resolve` HEADs the keys of the ambiguous answer right away and takes k0's absence as
    "deleted by this batch's request": its `done` says deleted, so the record counts it
    deleted though no request of the round removed anything. That is finding 3's false
    attribution (absence inferred, no answer saying the round removed it) one layer down:
    had the HEAD failed, the read-back would have counted the same k0 gone_unattributed
    (`test_rev38q::test_a_batch_whose_outcome_is_unknown_is_resolved_by_the_read_back`)."""

    def plan(c: Call) -> Fault | None:
        return Fault.NOT_APPLIED_500 if c.kind == "delete" else None

    keys, gone, totals = _run(s3_endpoint, s3_bucket, plan, removed_before=True)
    assert gone == {keys[0]}, gone  # nothing of the round's reached the server
    assert keys[0] not in totals.deleted, (
        f"k0, removed by another writer while the round's only request was answered 500 "
        f"and never applied, is counted deleted by the round: deleted "
        f"{sorted(totals.deleted)}, gone unattributed "
        f"{sorted(totals.gone_unattributed)}")


@pytest.mark.s3
def test_an_ambiguous_answer_is_attributed_the_same_whoever_asks_the_store(
    s3_endpoint: str, s3_bucket: str
) -> None:
    """Applied then answered 500 (the server did delete): with HEADs answering, the task's
    own look counts the four keys deleted; rev38q's test (HEADs failing then, the read-back
    asking later) counts the very same four gone_unattributed. One rule, two answers."""

    def plan(c: Call) -> Fault | None:
        return Fault.APPLIED_THEN_500 if c.kind == "delete" else None

    keys, gone, totals = _run(s3_endpoint, s3_bucket, plan, removed_before=False)
    assert gone == set(keys), gone
    assert not totals.deleted and set(totals.gone_unattributed) == gone, (
        f"answered 500 (\"might not have processed\") and found absent by the task's own "
        f"HEAD: deleted {len(totals.deleted)}, gone unattributed "
        f"{len(totals.gone_unattributed)}; the read-back's look at the same keys counts "
        f"them gone unattributed")


def test_a_record_recorded_meanwhile_says_its_keys_gone_unattributed(tmp_path: object) -> None:
    """`recorded_as` (gc-admin reset --json `ended[]`) and `_recorded_how` ("recorded
    meanwhile by X: killed, N key(s) deleted") read only `deleted`."""
    from pathlib import Path

    from epochgc.impl.gc.record import round_key
    from epochgc.impl.gc.recover import _recorded_how, recorded_as
    from epochgc.impl.store.local import LocalStore

    assert isinstance(tmp_path, Path)
    store = LocalStore(tmp_path / "s", create=True)
    rid = "20270115T100000.000Z-rev38x01"
    store.put(round_key(rid), json.dumps({
        "outcome": "killed", "recovered_by": "gc-admin show",
        "counts": {"deleted": 3, "gone_unattributed": 5}}).encode())
    got = recorded_as(store, rid)
    how = _recorded_how(store, rid)
    assert got.get("gone_unattributed") == 5 and "5" in how, (got, how)


def test_the_words_for_gone_unattributed_fit_a_round_where_nothing_was_killed(
    tmp_path: object
) -> None:
    """i38x also counts gone_unattributed a key whose delete was answered 500 ("maybe
    applied", journaled `unknown`) and found absent at the read-back, in a round no signal
    or kill touched (test_summary_unknown's own fixture). The summary's line and the help
    of `epochgc_gc_bytes_gone_unattributed` explain every such key as a batch "whose answer
    was never recorded (a task attempt killed mid-request)": here the answer is journaled
    and no attempt was killed."""
    from pathlib import Path

    from epochgc.impl.gc.metrics import export_metrics
    from tests.gc.test_summary_unknown import _round_with_an_unknown_key

    assert isinstance(tmp_path, Path)
    s = _round_with_an_unknown_key(tmp_path / "s")  # one batch, answered 500; no kill
    assert s.gone_unattributed == 1 and s.interrupted is None
    path = tmp_path / "gc.prom"
    export_metrics(s, str(path))
    said = [line for line in [*s.lines(), *path.read_text().splitlines()]
            if "killed mid-request" in line or "never recorded" in line]
    assert not said, said


def test_a_blocked_round_with_keys_gone_unattributed_does_not_say_nothing_was_deleted() -> None:
    """A round one task of which found M gone at its re-read (blocked) while another was
    killed mid-request (executor lost): no answer says deleted, 2 keys of the unanswered
    batch are gone. `lines()` says "round blocked, nothing deleted", then "2 key(s) left
    the store ... by this round's requests or another writer's": the first claim is the
    one the journal cannot prove (i38x's rule: unknown who removed them)."""
    from epochgc.impl.gc.summary import GcSummary

    s = GcSummary(journal="_cluster/gc/journal/r/", M=7, blocked="no report from node 2",
                  gone_unattributed=2)
    lines = s.lines()
    assert any("left the store" in line for line in lines), lines
    assert not any("nothing deleted" in line for line in lines), lines


def test_an_answers_already_gone_yields_to_another_attempts_unanswered_request(
    tmp_path: object
) -> None:
    """i38x's `_settle` ranks gone_unattributed above an answer's "already gone": a
    speculative copy's request (killed before its `done`) may be what removed the key its
    twin then found absent. No test of the branch pinned that rank (rev38x: the seed
    "already gone wins" survived tests/gc/test_rev38*, journal*, recover*,
    carried_outcomes, summary_unknown, admin_operator, own_end); this one does."""
    from pathlib import Path

    from epochgc.impl.store.local import LocalStore
    from tests.gc.helpers import JOURNAL
    from tests.gc.test_journal import _put_journal

    assert isinstance(tmp_path, Path)
    store = LocalStore(tmp_path, create=True)
    none: dict[str, object] = {"gone": [], "changed": [], "errors": {}}
    # Copy a1 unlinked k/1 and was killed before its `done`; copy a0 then found it absent.
    _put_journal(store, "p0-s0-a1-t2", 0, [f"{D}k1"], None)
    _put_journal(store, "p0-s0-a0-t1", 0, [f"{D}k1"], {**none, "gone": [f"{D}k1"]})
    t = read_journal(store, JOURNAL)
    assert (set(t.gone_unattributed), t.already_gone, set(t.deleted)) == (
        {f"{D}k1"}, set(), set()), t


def test_a_round_recorded_from_its_own_end_reports_its_keys_gone_unattributed(
    tmp_path: object
) -> None:
    """A driver killed between its END and its record: the recovery copies the END (its
    counts keep `gone_unattributed`) and reports the round (`Recovered`, said by `reset`,
    `show` and the next round's note). No test of the branch checked that report (rev38x:
    the seed `gone = 0` in `_recovered_from_end` survived tests/gc/test_rev38*, journal*,
    recover*, carried_outcomes, summary_unknown, admin_operator, own_end)."""
    from pathlib import Path

    from click.testing import CliRunner

    from epochgc.impl.cli import main
    from epochgc.impl.gc.journal import END, START, write_marker
    from epochgc.impl.store.local import LocalStore
    from tests.gc.helpers import simple_cluster

    assert isinstance(tmp_path, Path)
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100)
    store = LocalStore(root)
    rid = "20270115T100000.000Z-rev38x02"
    prefix = journal_prefix(rid)
    write_marker(store, prefix, START, {"round": rid})
    write_marker(store, prefix, END, {"outcome": "killed", "exit_code": 137, "counts": {
        "deleted": 5, "gone_unattributed": 3, "bytes_gone_unattributed": 3},
        "started_at": "2027-01-15T10:00:00+00:00"})  # a round record's shape (rev38z10 F8)
    r = CliRunner().invoke(main, ["gc-admin", "reset", "--store", str(root), "--force",
                                  "--json"])
    doc = json.loads(r.output)
    [rec] = doc["recovered"]
    assert (rec["deleted"], rec["gone_unattributed"], rec["from_end"]) == (5, 3, True), doc


def test_a_batchs_keys_absent_after_an_ambiguous_answer_are_journaled_gone_unattributed(
    tmp_path: object
) -> None:
    """rev38x finding 1, the journal's side: a store's result that says keys left the store
    after an ambiguous answer (`DeleteResult.gone_unattributed`) is written in the batch's
    `done` and read back as `gone_unattributed`, never deleted, beside a key of the same
    batch the answer said deleted and one already gone."""
    from pathlib import Path

    from epochgc.impl.store.base import DeleteResult
    from epochgc.impl.store.local import LocalStore

    assert isinstance(tmp_path, Path)
    store = LocalStore(tmp_path, create=True)
    writer = JournalWriter(store, JournalTarget(PREFIX), Attempt(0, 0, 0, 1))
    seq = writer.intent([(f"{D}a", 1, 1.0, ""), (f"{D}b", 2, 2.0, ""), (f"{D}c", 4, 3.0, "")])
    writer.done(seq, DeleteResult(3, gone={f"{D}c"}, gone_unattributed={f"{D}b"}))
    t = read_journal(store, PREFIX)
    assert (set(t.deleted), dict(t.gone_unattributed), t.already_gone) == (
        {f"{D}a"}, {f"{D}b": (2, 2.0)}, {f"{D}c"}), t


def test_the_next_rounds_note_about_a_dead_round_says_its_keys_gone_unattributed(
    tmp_path: object
) -> None:
    """rev38x finding 5: the next round's note about a dead round it recorded
    (`job._recover`, run by every round before its own deletes) left `gone_text()` out
    with no test failing (seed E survived). `_recover` takes the store opener and a note
    sink, so it is called here without a Spark round: a round killed between its END and
    its record, whose END says 5 deleted and 3 gone unattributed."""
    from pathlib import Path

    from epochgc.impl.gc.job import _recover
    from epochgc.impl.gc.journal import END, START, write_marker
    from epochgc.impl.gc.stop import RoundStop
    from epochgc.impl.store.local import LocalStore
    from tests.gc.helpers import simple_cluster

    assert isinstance(tmp_path, Path)
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100)
    store = LocalStore(root)
    dead = "20270115T100000.000Z-rev38x03"
    prefix = journal_prefix(dead)
    write_marker(store, prefix, START, {"round": dead})
    write_marker(store, prefix, END, {"outcome": "killed", "exit_code": 137, "counts": {
        "deleted": 5, "gone_unattributed": 3, "bytes_gone_unattributed": 3},
        "started_at": "2027-01-15T10:00:00+00:00"})  # a round record's shape (rev38z10 F8)
    notes: list[str] = []
    got = _recover(lambda: LocalStore(root), "20270115T110000.000Z-rev38x04", notes.append,
                   RoundStop())
    assert got == [dead], (got, notes)
    [line] = [n for n in notes if dead in n]
    assert "5 key(s) deleted, 3 more left the store in batches with no answer saying " \
           "the round deleted them" in line, line


def test_keys_only_an_attempt_that_did_not_return_named_count_as_listed_and_eligible(
    tmp_path: object
) -> None:
    """rev38x's "not verified" 1, the read-back and the record's arithmetic: a task Spark
    retried lists its partition again without the keys its killed attempt removed, so the
    returned attempts' listing counts miss them. The journal names them (the killed
    attempt's intent): `listed_elsewhere` holds those that no returned attempt named, and
    `stage.listed_elsewhere` adds them to eligible (8 = 6 listed by the retry + 2)."""
    from pathlib import Path

    from epochgc.impl.gc.stage import listed_elsewhere
    from epochgc.impl.gc.summary import GcSummary
    from epochgc.impl.store.base import DeleteResult
    from epochgc.impl.store.local import LocalStore

    assert isinstance(tmp_path, Path)
    store = LocalStore(tmp_path, create=True)
    killed, retry = Attempt(1, 0, 0, 1), Attempt(1, 1, 0, 2)
    w = JournalWriter(store, JournalTarget(PREFIX), killed)
    w.done(w.intent([(f"{D}k0", 1, 1.0, ""), (f"{D}k1", 2, 1.0, "")]), DeleteResult(2))
    w.intent([(f"{D}k2", 4, 1.0, "")])  # killed mid-request: k2 left, no answer
    w = JournalWriter(store, JournalTarget(PREFIX), retry)  # lists k2 (still there) .. k7
    keys = [f"{D}k{i}" for i in range(2, 8)]
    w.done(w.intent([(k, 8, 1.0, "") for k in keys]), DeleteResult(6, gone={f"{D}k2"}))
    t = read_journal(store, PREFIX, returned={retry.name()})
    assert t.listed_elsewhere == {f"{D}k0": 1, f"{D}k1": 2}, t.listed_elsewhere
    s = GcSummary(journal=PREFIX, M=7, listed=6, fetched=6, eligible=6, eligible_bytes=48)
    s.deleted, s.gone_unattributed = len(t.deleted), len(t.gone_unattributed)
    listed_elsewhere(s, t)
    assert (s.eligible, s.eligible_bytes, s.listed, s.deleted) == (8, 51, 8, 7), s
    assert read_journal(store, PREFIX).listed_elsewhere == {}  # not asked: none
