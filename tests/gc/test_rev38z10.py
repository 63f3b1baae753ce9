"""Review rev38z10 (issue 38, main 10142fb): kills, damaged journals, the lease, parsing.
Each finding is a strict xfail: it fails on the reviewed code and passes once fixed.
Local store only (no Spark, no server): each case takes well under a second."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.journal import journal_prefix, read_journal
from epochgc.impl.gc.lease import LEASE_KEY, Lease
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.gc.probes import left_over
from epochgc.impl.gc.record import round_key, write_record
from epochgc.impl.gc.recordread import read_round_record
from epochgc.impl.gc.recover import recover_dead_rounds
from epochgc.impl.gc.show import last_round
from epochgc.impl.gc.summary import GcSummary
from epochgc.impl.store.base import StoreError
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key
from tests.gc.helpers import NOW, _Delegating, local_spec, simple_cluster

DEAD = "20261130T190000.000000Z-dead"


def _dead_round(store: LocalStore, keys: list[object], sizes: list[object],
                ages: list[object]) -> str:
    """A round killed after one batch whose outcome says every key deleted: START (no wait:
    `stop_within_s` 0 on a local store), one intent and its `done`, no END, no record."""
    prefix = journal_prefix(DEAD)
    store.put(prefix + "START.json", json.dumps({"stop_within_s": 0}).encode())
    store.put(prefix + "p0000-s0-a0-t1/00000000.intent.json",
              json.dumps({"keys": keys, "sizes": sizes, "ages": ages}).encode())
    store.put(prefix + "p0000-s0-a0-t1/00000000.done.json",
              b'{"gone": [], "changed": [], "errors": {}}')
    return prefix


def _damaged(store: LocalStore, damage: str) -> None:
    """A dead round whose journal holds one damaged document: `key`, an intent key that is
    no data key (one bit flip inside a JSON string leaves valid JSON); `start-nan`, a
    START whose options hold NaN (json.loads reads it; `record_document` refuses it);
    `end-nan`, an END (killed between END and record) with a NaN (`_from_end` refuses)."""
    good = format_key(1, 5, "a")
    if damage == "key":
        _dead_round(store, [good, "level_zero/data/0x1/000000000000000005/b"], [10, 10],
                    [1.0, 1.0])
    elif damage == "start-nan":
        prefix = _dead_round(store, [good], [10], [1.0])
        store.put(prefix + "START.json", b'{"stop_within_s": 0, "options": {"grace_s": NaN}}')
    else:
        prefix = _dead_round(store, [good], [10], [1.0])
        store.put(prefix + "END.json", _END.replace(b'"seconds": 1.5', b'"seconds": NaN'))


# An END as a driver writes it (the fields `recordread.shape_problem` checks).
_END = (b'{"outcome": "done", "exit_code": 0, "started_at": "2026-11-30T19:00:00+00:00", '
        b'"counts": {"deleted": 1}, "seconds": 1.5}')
DAMAGES = pytest.mark.parametrize("damage", ["key", "start-nan", "end-nan"])
FINDING_1 = ("rev38z10 finding 1: one damaged document in a dead round's journal (an intent "
             "key outside level_zero/data/: ModelError from stage.max_epoch; a START's "
             "options or an END holding NaN: ValueError from json.dumps) raises out of the "
             "recovery: the dead round is never recorded, and every round, `gc-admin show` "
             "and `gc-admin reset` fail with it")


@DAMAGES
def test_a_damaged_journal_does_not_stop_the_recovery(tmp_path: Path, damage: str) -> None:
    """On 10142fb `recover_dead_rounds` raises `ModelError: parse_key: ...` or
    `ValueError: Out of range float values are not JSON compliant: nan`."""
    store = LocalStore(tmp_path / "s", create=True)
    _damaged(store, damage)
    done = recover_dead_rounds(store, "rev38z10", lambda: set(), sleep=lambda s: None)
    assert [r.round_id for r in done] == [DEAD]
    record = read_round_record(store, round_key(DEAD))
    # the entry naming a key that is no data key is not a count of deleted data keys
    assert record["counts"]["deleted"] <= 1, record["counts"]


class _NoSpark(Exception):
    pass


def _no_spark() -> None:
    raise _NoSpark("Spark is not started by this test: the dead round's record comes first")


@DAMAGES
def test_a_damaged_journal_does_not_fail_every_round(tmp_path: Path, damage: str) -> None:
    """The consequence, through `run_gc` (no Spark: the recovery comes before it).
    `job._recover` catches only StoreError/OSError: on 10142fb both rounds raise (exit 1,
    each recorded `failed`) and the dead round has no record; fixed, the first round
    records the dead one, then stops at the Spark factory this test gives it."""
    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    simple_cluster(store, 100)
    _damaged(store, damage)
    for _ in range(2):
        with pytest.raises(_NoSpark):
            run_gc(_no_spark, local_spec(root), GcOptions(tasks=1), clock=lambda: NOW)
    assert store.head(round_key(DEAD)) is not None


@DAMAGES
def test_a_damaged_journal_does_not_stop_gc_admin_show(tmp_path: Path, damage: str) -> None:
    """On 10142fb `gc-admin show` prints only `epochgc gc-admin show: error: parse_key: key:
    'level_zero/data/0x1/...' is not ...` (or `Out of range float values ...: nan`) and
    exits 1: no lease, no last round, no word of which journal entry is damaged."""
    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    simple_cluster(store, 100)
    _damaged(store, damage)
    r = CliRunner().invoke(main, ["gc-admin", "show", "--store", str(root)])
    assert "last round:" in r.output and "error:" not in r.output, r.output


@pytest.mark.parametrize("size", [-5, "12", True, 1 << 70], ids=["negative", "text", "bool",
                                                                  "huge"])
def test_an_intent_whose_size_is_no_size_is_counted_unreadable(
        tmp_path: Path, size: object) -> None:
    """`Intent.parse` converts with `int()`: -5 stays -5, "12" becomes 12, true becomes 1,
    2**70 passes (no object is that large). None of them is what a task wrote (`delete.py`
    journals the listed object's size, an int >= 0). Expected: the entry is counted
    unreadable (its keys resolved by asking the store), never summed into bytes_deleted."""
    store = LocalStore(tmp_path / "s", create=True)
    key = format_key(1, 5, "a")
    prefix = _dead_round(store, [key], [size], [1.0])
    totals = read_journal(store, prefix)
    assert totals.unreadable == 1, (totals.deleted, totals.unreadable)
    recover_dead_rounds(store, "rev38z10", lambda: set(), sleep=lambda s: None)
    read_round_record(store, round_key(DEAD))  # raises DamagedRecord on 10142fb (negative)


class _UnboundedRefused(_Delegating):
    """Refuses (before reading anything) a GET of a probe object with no upper bound."""

    def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        if "conditional-write-probe-" in key and end is None:
            raise AssertionError(f"{key} read with no bound")
        return self.inner.get(key, start, end)


@pytest.mark.parametrize("body", [b"[" * 100_000, b"[" * 4000, b"[" * 33 + b"]" * 33,
                                  b'{"probe": "epochgc conditional-write probf"}'],
                         ids=["deep-and-large", "deep-within-the-bound", "just-too-deep",
                              "no-mark"])
def test_a_probe_object_nested_deep_is_left_alone_not_raised(tmp_path: Path,
                                                              body: bytes) -> None:
    """rev38z10 finding 3 (fixed by s28e; seen failing on 19fe8d4: `RecursionError:
    maximum recursion depth exceeded while decoding a JSON array`). `probes.left_over`
    was the one parser of a stored document without `check_nesting` (and without a size
    bound: `store.get(info.key)` read it whole). Its caller,
    `S3Store._remove_left_probes`, catches StoreError only, so the RecursionError left
    `require_conditional_writes`, `Lease.acquire` (which also catches StoreError only)
    and the round, until the object was a day old (`STALE_S`). Now it is read bounded,
    parsed by `admin.load_strict`, kept (not proven left over) and said."""
    store = LocalStore(tmp_path / "s", create=True)
    key = "_cluster/gc/conditional-write-probe-x"
    store.put(key, body)
    said: list[str] = []
    assert list(left_over(_UnboundedRefused(store), "_cluster/gc/conditional-write-probe-",
                          time.time(), said.append)) == []
    [line] = said
    assert line.startswith(f"the conditional-write probe object {key} cannot be read ("), line
    assert "kept (not proven left over)" in line, line
    assert store.head(key) is not None
    # a day later it is removed unread, as any probe object that old
    assert [i.key for i, _ in left_over(store, "_cluster/gc/conditional-write-probe-",
                                        time.time() + 25 * 3600)] == [key]


def test_a_huge_error_text_in_an_outcome_leaves_a_readable_record(tmp_path: Path) -> None:
    """`read_journal` keeps `str(errors[key])` as it is (a torn intent's skip reason is cut
    to 200 characters, an outcome's error is not) and `error_samples` puts it in the record
    (`samples.errors`). A record over `recordread.MAX_RECORD` (1 MiB) is `DamagedRecord`
    to `show` and `expire`: the dead round's only record reads as damaged for good."""
    store = LocalStore(tmp_path / "s", create=True)
    key = format_key(1, 5, "a")
    store.put(key, b"x")  # still there: the outcome's error stands
    prefix = _dead_round(store, [key], [1], [1.0])
    store.put(prefix + "p0000-s0-a0-t1/00000000.done.json", json.dumps(
        {"gone": [], "changed": [], "errors": {key: "x" * 2_000_000}}).encode())
    [r] = recover_dead_rounds(store, "rev38z10", lambda: set(), sleep=lambda s: None)
    assert r.round_id == DEAD
    record = read_round_record(store, round_key(DEAD))  # DamagedRecord on 10142fb
    assert record["counts"]["errors"] == 1


class _SeqRefused(_Delegating):
    """The store refuses the sequence's creates once (a 503 past the client's retries, a
    connection reset): every other request goes through."""

    def create_if_absent(self, key: str, data: bytes) -> str | None:
        if key.startswith("_cluster/gc/seq"):
            raise StoreError("503 SlowDown (injected)")
        return self.inner.create_if_absent(key, data)


def test_a_round_whose_number_claim_failed_is_still_the_last_round(tmp_path: Path) -> None:
    """`record.number_round` leaves `seq` None on a StoreError (one transient failure of
    the create under `_cluster/gc/seq/`), and `show.last_rounds` orders every numbered
    record before every unnumbered one (`sequence.newer_unmarked`: "a record with no number
    is never taken for newer"). No clock step is needed: round 2 starts an hour after round
    1 by every clock, finishes after it, and `show` names round 1 as the last round until
    another round is numbered. Fix direction: order an unnumbered record by the store's
    own write time (its LastModified / mtime: the store's clock, not the round's) against
    the numbered ones, or number it later (the next round claims for unnumbered records)."""
    store = LocalStore(tmp_path / "s", create=True)
    first = GcSummary(round_id="20270115T080000.000Z-aaaaaaaa", started_at=NOW)
    write_record(store, first, {})
    second = GcSummary(round_id="20270115T090000.000Z-bbbbbbbb", started_at=NOW + 3600)
    write_record(_SeqRefused(store), second, {})
    assert (first.seq, second.seq) == (1, None)
    last = last_round(store)
    assert last is not None and last.get("key") == round_key(second.round_id), last


def test_a_renewal_after_a_clock_step_does_not_push_the_expiry_out(tmp_path: Path) -> None:
    """rev38z10 finding 6 (fixed by s28e; seen failing on 19fe8d4: "the lease now expires
    1000060 s ahead"). `Lease.firm` latches `stepped` (the round stops), but `keep`'s
    renewals still called `_doc`, which wrote `expires_at = clock() + duration` from the
    stepped clock (its comment, "a step since the last write is never written over", was
    not what it did). The driver is then killed before its release (the OOM killer, a node
    lost: issue 38 item 1); NTP steps the clock back. Every round after that was refused
    (`LeaseBusy`, exit 2 "blocked", retried by a scheduler in vain) for the step's length,
    here 11 days, until an operator ran `gc-admin reset --force`. Now a renewal after a
    step writes times measured on the monotonic clock from the last write before it
    (tests/gc/test_lease_backends.py: on moto and SeaweedFS too, and the next round)."""
    store = LocalStore(tmp_path, create=True)
    offset = [0.0]
    held = Lease(lambda: LocalStore(tmp_path), "20270115T080000.000Z-stepping",
                 duration_s=60, clock=lambda: time.time() + offset[0])
    held.acquire()
    offset[0] = 10**6  # the driver's wall clock steps forward
    assert not held.firm() and held.stepped is not None  # the round is told to stop
    held._renew()  # the renewal thread's next turn, before the round ends
    # killed here: no release
    expires = json.loads(store.get(LEASE_KEY))["expires_at"]
    ahead = expires - time.time()
    assert ahead <= 60 + 5, f"the lease now expires {ahead:.0f} s ahead"


class _BoundedReads(_Delegating):
    """Refuses (before reading anything) a GET of a journal entry with no upper bound: the
    entry may be any size (a damaged or foreign object), and `get` reads it whole."""

    def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        if key.startswith("_cluster/gc/journal/") and end is None:
            raise AssertionError(f"{key} read with no bound")
        return self.inner.get(key, start, end)


def test_the_read_back_reads_no_entry_without_a_bound(tmp_path: Path) -> None:
    """A writer's entry is small (an intent names at most two batches of 1,000 keys, a few
    hundred KB). A damaged one is not: a 1 GiB entry is a 1 GiB read, then `check_nesting`
    over it (~6 s per 16 MiB of `"a",` here), then, torn, `salvage_keys` (~13 s per 16 MiB)
    and one HEAD per salvaged string (4 million for 16 MiB of `"a",`: hours on S3), at
    every look that reads the round back. Expected: entries read with a bound (as START,
    END, records, reports and the lease are) and one past it counted unreadable."""
    store = LocalStore(tmp_path / "s", create=True)
    key = format_key(1, 5, "a")
    prefix = _dead_round(store, [key], [1], [1.0])
    totals = read_journal(_BoundedReads(store), prefix)
    assert totals.deleted.keys() == {key}


@pytest.mark.parametrize("end", [b'{"outcome": 5}', b'{"counts": {"deleted": -1}}',
                                 _END.replace(b'"exit_code": 0', b'"exit_code": "0"')],
                         ids=["outcome-number", "negative-count", "exit-code-text"])
def test_an_end_that_is_no_record_is_not_copied_as_the_record(tmp_path: Path,
                                                              end: bytes) -> None:
    """`recover._stop_dead` takes any JSON object at END for the driver's own account
    (`_read_doc`: a dict) and `_from_end` creates the record from it as it is. Expected:
    an END with a `recordread.shape_problem` is read as no END (as a torn one is): the
    round is read back from its journal, and the damaged END is named."""
    store = LocalStore(tmp_path / "s", create=True)
    prefix = _dead_round(store, [format_key(1, 5, "a")], [10], [1.0])
    store.put(prefix + "END.json", end)
    recover_dead_rounds(store, "rev38z10", lambda: set(), sleep=lambda s: None)
    record = read_round_record(store, round_key(DEAD))  # DamagedRecord on 10142fb
    assert record["counts"]["deleted"] == 1


def test_a_huge_unanswered_ago_does_not_cut_the_wait(tmp_path: Path) -> None:
    """`_parse_done` refuses a negative or non-finite `unanswered_ago_s` but keeps 1e308.
    `read_journal` passes the least over the waiting batches to `before_asking`, and
    `stage._wait_for_sent` waits `applied_s - ago_s` (<= 0: no wait) before HEADing the
    keys; one still there then is an error, "listed again next round", while its request
    may still be applied (`bounds.APPLIED_WITHIN_S`). Reach: an outcome read from the store
    (an attempt that did not return: killed, lost, a speculative loser) whose field is
    damaged. A true value is at most the time since the round's START (the attempt ran
    within the round): expected, a larger one read as unknown (0, the longest wait)."""
    store = LocalStore(tmp_path / "s", create=True)
    key = format_key(1, 5, "a")
    store.put(key, b"x")  # still there right after its unanswered request
    prefix = _dead_round(store, [key], [1], [1.0])
    store.put(prefix + "p0000-s0-a0-t1/00000000.done.json", json.dumps(
        {"gone": [], "changed": [], "errors": {key: "read timeout"}, "unknown": [key],
         "unanswered_ago_s": 1e308}).encode())
    asked: list[float] = []

    def before_asking(batches: int, ago_s: float) -> bool:
        asked.append(ago_s)
        return True

    read_journal(store, prefix, before_asking=before_asking)
    assert asked and asked[0] <= 60, asked
