"""Issue 38, S3 at the limit: a batch's outcome rides in the next batch's intent when that
batch is ready (one PUT, and one GET on a read-back from the store, less per batch), and is
written alone when none is (the listing behind, the task's end).

What must hold whatever is killed when: every key sent is named by an intent written
before its request; the journal read back (the new reader, and the previous version's,
which ignores carried outcomes and asks the store) never counts a key that did not leave
the store, and counts every key that did: as `deleted` only where an answer to one of its
requests says so, else (found absent, no answer recorded) as `gone_unattributed`."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.gc.delete import INTENT_BATCHES, PIPELINE, delete_keys, group_sizes
from epochgc.impl.gc.journal import (
    STOP,
    Attempt,
    JournalTarget,
    JournalWriter,
    journal_prefix,
    read_journal,
    write_marker,
)
from epochgc.impl.store.base import DeleteResult
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key
from tests.gc.helpers import _Delegating, all_keys, left_per_journal, put_local

PREFIX = journal_prefix("20270115T100000.000Z-c4rr1ed0")
BATCH = 10
CONCURRENCY = 2


def _keys(root: Path, n: int) -> list[str]:
    keys = [format_key(i % 100, 5, f"k{i:05d}") for i in range(n)]
    for k in keys:
        put_local(root, k, 0.0)  # no fsync: the set-up is not what is tested
    return keys


class Killed(BaseException):
    """The task's process is gone (kill -9): nothing it does from now on reaches the store."""


class _Recording(_Delegating):
    """Checks at every DeleteObjects that each key sent is named by an intent already in
    the store; the first request waits until the next batch is ready (so at least one
    outcome rides in an intent, deterministically); with `kill_at` the n-th write or
    request (counted together) raises Killed and so does everything after it."""

    def __init__(self, inner: LocalStore, kill_at: int | None = None) -> None:
        super().__init__(inner)
        self.kill_at, self.ops, self.dead = kill_at, 0, False
        self.writer: JournalWriter | None = None
        self.sent: set[str] = set()
        self.answered: set[str] = set()  # keys of requests whose answer reached the task

    def _step(self) -> None:
        if self.dead:
            raise Killed
        self.ops += 1
        if self.ops == self.kill_at:
            self.dead = True
            raise Killed

    def put(self, key: str, data: bytes) -> None:
        self._step()
        self.inner.put(key, data)

    def delete_if_unchanged(self, items: list[tuple[str, str]]) -> DeleteResult:
        self._step()
        named = set()
        for o in self.inner.list_all(PREFIX):
            if o.key.endswith(".intent.json"):
                named |= set(json.loads(self.inner.get(o.key))["keys"])
        assert {k for k, _ in items} <= named, "a key sent before its intent was durable"
        if not self.sent and self.writer is not None:
            deadline = time.monotonic() + 60
            while (self.writer._coming == 0 and not self.dead
                   and time.monotonic() < deadline):
                time.sleep(0.001)
        self.sent |= {k for k, _ in items}
        result = self.inner.delete_if_unchanged(items)
        self.answered |= {k for k, _ in items}
        return result


def _groups(batches: int) -> list[int]:
    """The batches of each intent of a task of `batches` batches (default groups)."""
    out: list[int] = []
    for size in group_sizes(None):
        if sum(out) >= batches:
            return out
        out.append(min(size, batches - sum(out)))
    raise AssertionError("unreachable")


def _run(tmp_path: Path, kill_at: int | None) -> tuple[LocalStore, _Recording, list[str]]:
    inner = LocalStore(tmp_path / "s", create=True)
    keys = _keys(tmp_path / "s", 200)
    store = _Recording(inner, kill_at)
    writer = JournalWriter(store, JournalTarget(PREFIX), Attempt(0, 0, 0, 1))
    store.writer = writer
    try:
        delete_keys(store, ((k, 1, 0.0, "") for k in keys), batch_size=BATCH,
                    concurrency=CONCURRENCY, pool=None, journal=writer)
    except Killed:
        assert kill_at is not None
    return inner, store, keys


def test_outcomes_ride_in_intents_and_the_journal_reads_exact(tmp_path: Path) -> None:
    inner, _, keys = _run(tmp_path, None)
    entries = [o.key for o in inner.list_all(PREFIX)]
    intents = [k for k in entries if k.endswith(".intent.json")]
    alone = [k for k in entries if k.endswith(".done.json")]
    carried = [seq for k in intents
               for seq in json.loads(inner.get(k)).get("done", {})]
    # 20 batches in the default groups (`group_sizes`): 1, 3, 4, 4, 4, 4
    groups = _groups(20)
    assert groups == [1, 3, 4, 4, 4, 4]
    assert len(intents) == len(groups) and all_keys(inner).isdisjoint(keys)
    # As a multiset: the groups' workers write their intents in parallel (the pipeline), so
    # a later group may take the lower sequence number (a fixed order failed under load).
    assert sorted(json.loads(inner.get(k)).get("batches", 1) for k in intents) == sorted(groups)
    # every intent's outcome is in the journal exactly once: alone or carried
    assert sorted(carried + [k.rsplit("/", 1)[1][:8] for k in alone]) == [
        f"{n:08d}" for n in range(len(groups))]
    assert carried, "no outcome rode in an intent"
    totals = read_journal(inner, PREFIX)
    assert set(totals.deleted) == set(keys) and totals.unfinished == 0
    assert totals.batches == 20 and not totals.errors  # requests, as the outcomes say


# Every point with EPOCHGC_KILL9_ALL=1 (`tox -e kill9`); by default a spread of them
# (the first writes and requests, and points in the steady state where outcomes ride).
KILL_POINTS = (range(1, 34) if os.environ.get("EPOCHGC_KILL9_ALL")
               else (1, 2, 3, 9, 10, 11, 17, 18, 25, 29, 32))


@pytest.mark.parametrize("kill_at", KILL_POINTS)
def test_killed_at_every_write_and_request_the_journal_reads_what_left(
    tmp_path: Path, kill_at: int
) -> None:
    """20 batches: 6 intents (groups of 1, 3, 4, 4, 4, 4 batches), 20 requests and up to 6
    outcomes (and an answer so far for none: every key is deleted); killed at the n-th of
    them (past the last: not killed). The read-back (the recovery's) counts exactly what
    left the store; the previous version's reader (carried outcomes ignored, so those
    batches asked of the store) the same; unresolved batches at most the ones in flight or
    waiting for an intent."""
    inner, store, keys = _run(tmp_path, kill_at)
    left = set(keys) - all_keys(inner)
    assert left <= store.sent
    totals = read_journal(inner, PREFIX)
    assert left_per_journal(totals) == left, (len(totals.deleted), len(left))
    assert set(totals.deleted) <= store.answered, sorted(set(totals.deleted) - store.answered)
    assert totals.unfinished <= CONCURRENCY * PIPELINE + 1
    # The previous version's reader: no "done" inside intents. Same keys as gone.
    old = LocalStore(tmp_path / "old", create=True)
    for o in inner.list_all(PREFIX):
        doc: dict[str, Any] = json.loads(inner.get(o.key))
        doc.pop("done", None)
        put_local(tmp_path / "old", o.key, 0.0, data=json.dumps(doc).encode())
    for k in all_keys(inner):
        put_local(tmp_path / "old", k, 0.0)
    old_totals = read_journal(old, PREFIX)
    assert left_per_journal(old_totals) == left
    assert set(old_totals.deleted) <= set(totals.deleted)


def test_an_outcome_waiting_for_a_batch_that_stops_is_written_alone(tmp_path: Path) -> None:
    """The batch the outcome waited for stopped before its intent (STOP, "no"): the outcome
    goes alone then, not never; with other batches still coming it keeps waiting for them;
    the task's end writes whatever still waits."""
    inner = LocalStore(tmp_path / "s", create=True)
    w = JournalWriter(inner, JournalTarget(PREFIX), Attempt(0, 0, 0, 1))
    base = f"{PREFIX}p0000-s0-a0-t1/"
    first = w.intent([("level_zero/data/001/000000000000000005/a", 1, 0.0, "")])
    w.coming()
    w.done(first, DeleteResult(1))
    assert inner.head(f"{base}00000000.done.json") is None  # waits for the coming intent
    w.not_coming()
    assert inner.head(f"{base}00000000.done.json") is not None
    second = w.intent([("level_zero/data/001/000000000000000005/b", 1, 0.0, "")])
    w.coming()
    w.coming()
    w.done(second, DeleteResult(1))
    w.not_coming()  # one of two stopped: the other may still carry it
    assert inner.head(f"{base}00000001.done.json") is None
    w.not_coming(flush=False)
    assert inner.head(f"{base}00000001.done.json") is None
    w.flush()  # the task's end
    assert inner.head(f"{base}00000001.done.json") is not None
    assert read_journal(inner, PREFIX).unfinished == 0


def test_a_pooled_task_stopped_mid_way_journals_every_outcome(tmp_path: Path) -> None:
    inner = LocalStore(tmp_path / "s", create=True)
    keys = _keys(tmp_path / "s", 200)

    class _StopAfter(_Recording):
        def delete_if_unchanged(self, items: list[tuple[str, str]]) -> DeleteResult:
            result = super().delete_if_unchanged(items)
            # `>=`, once: two requests in flight may both pass 5 batches before either
            # looks (with `==` neither saw exactly 50 and no STOP was written, at times)
            with lock:
                if len(self.sent) >= 5 * BATCH and not written:
                    written.append(True)
                    write_marker(self.inner, PREFIX, STOP, {"reason": "SIGTERM"})
            return result

    lock, written = threading.Lock(), list[bool]()

    store = _StopAfter(inner)
    writer = JournalWriter(store, JournalTarget(PREFIX), Attempt(0, 0, 0, 1))
    store.writer = writer
    stats = delete_keys(store, ((k, 1, 0.0, "") for k in keys), batch_size=BATCH,
                        concurrency=CONCURRENCY, journal=writer)
    left = set(keys) - all_keys(inner)
    totals = read_journal(inner, PREFIX)
    assert stats.stopped == 1 and left == store.sent and len(left) < len(keys)
    assert set(totals.deleted) == left and totals.unfinished == 0
    assert not totals.gone_unattributed


@pytest.mark.parametrize("asked", ["store", "gate"])
def test_a_group_told_no_between_its_requests_sends_nothing_more_and_records_it_unsent(
    tmp_path: Path, asked: str
) -> None:
    """An intent names two batches (`group=2`); the round says stop
    while the first
    request runs (the STOP marker, or the driver's gate turning to "no"). The second request
    is not sent; the outcome names its keys `UNSENT`: the read-back counts exactly the first
    batch deleted and no error, and a reader that does not know the word (any `errors`
    entry is an error) still never counts those keys deleted."""
    from epochgc.impl.gc.gate import Gate
    from epochgc.impl.gc.journal import UNSENT

    inner = LocalStore(tmp_path / "s", create=True)
    keys = _keys(tmp_path / "s", 2 * BATCH)
    stopped = threading.Event()

    class _StopDuringFirst(_Delegating):
        requests = 0

        def delete_if_unchanged(self, items: list[tuple[str, str]]) -> DeleteResult:
            self.requests += 1
            stopped.set()
            write_marker(inner, PREFIX, STOP, {"reason": "SIGTERM"})
            return self.inner.delete_if_unchanged(items)

    store = _StopDuringFirst(inner)
    with Gate("127.0.0.1", lambda: not stopped.is_set()) as gate:
        target = JournalTarget(PREFIX, gate=gate.target if asked == "gate" else None)
        writer = JournalWriter(store, target, Attempt(0, 0, 0, 1))
        stats = delete_keys(store, ((k, 1, 0.0, "") for k in keys), batch_size=BATCH,
                            concurrency=1, journal=writer, group=2)
    assert store.requests == 1 and stats.delete_requests == 1
    assert (stats.stopped, stats.deleted, stats.errors) == (1, BATCH, 0)
    left = set(keys) - all_keys(inner)
    assert left == set(keys[:BATCH])
    [done] = [o.key for o in inner.list_all(PREFIX) if o.key.endswith(".done.json")]
    doc = json.loads(inner.get(done))
    assert doc["errors"] == dict.fromkeys(keys[BATCH:], UNSENT)
    assert doc.get("requests", 1) == 1  # sent (absent: one)
    totals = read_journal(inner, PREFIX)
    assert set(totals.deleted) == left and not totals.errors and totals.batches == 1
    # A reader without UNSENT: every key of `errors` is an error, none of them deleted.
    assert not set(doc["errors"]) & left


class _KilledAfterSecondRequest(_Delegating):
    """Counts the journal's PUTs; the second DeleteObjects is applied and then the task is
    killed (nothing after it reaches the store: its group's outcome is never written)."""

    def __init__(self, inner: LocalStore) -> None:
        super().__init__(inner)
        self.puts: list[str] = []
        self.requests = 0

    def put(self, key: str, data: bytes) -> None:
        if self.requests >= 2:
            raise Killed
        self.puts.append(key.rsplit("/", 1)[1])
        self.inner.put(key, data)

    def delete_if_unchanged(self, items: list[tuple[str, str]]) -> DeleteResult:
        if self.requests >= 2:
            raise Killed
        self.requests += 1
        return self.inner.delete_if_unchanged(items)


@pytest.mark.parametrize("first_found", [True, False])
def test_a_groups_first_answer_is_durable_before_its_second_request_only_when_it_must_be(
    tmp_path: Path, first_found: bool
) -> None:
    """Review rev38s finding 3: a group of two batches whose task is killed once its second
    request was applied. When the first request found a key already gone and one rewritten
    (`first_found`), its answer was written (alone, one PUT) before the second request was
    sent, so the read-back says so instead of asking the store, which would count the gone
    key as deleted by the round. When the first request deleted every key, nothing more is
    written (the requests per key stay i38q's: one intent per two batches), and the HEADs
    of the read-back say the same as that answer would. Not killed, the group's outcome
    replaces its answer so far (one `done` record, the whole group's)."""
    inner = LocalStore(tmp_path / "s", create=True)
    keys = _keys(tmp_path / "s", 2 * BATCH)
    items = [(k, 1, 0.0, inner.head(k).version) for k in keys]  # type: ignore[union-attr]
    if first_found:
        (tmp_path / "s" / keys[0]).unlink()  # another writer removed it after the listing
        put_local(tmp_path / "s", keys[1], 0.0, data=b"rewritten")
    store = _KilledAfterSecondRequest(inner)
    writer = JournalWriter(store, JournalTarget(PREFIX), Attempt(0, 0, 0, 1))
    with pytest.raises(Killed):  # one group of two (a task's default first group is one)
        delete_keys(store, items, batch_size=BATCH, concurrency=1, journal=writer, group=2)
    totals = read_journal(inner, PREFIX)
    if first_found:
        assert (keys[0] not in totals.deleted and keys[1] not in totals.errors), (
            f"killed after the group's second request: {keys[0]} (removed by another "
            f"writer) counted deleted: {keys[0] in totals.deleted}; {keys[1]} (rewritten): "
            f"{totals.errors.get(keys[1])}")
        assert (totals.already_gone, totals.changed) == ({keys[0]}, {keys[1]}), totals
        # The first request's answer (so far) is the round's; the second's never reached
        # the journal: its keys left the store, by whom no answer says.
        assert set(totals.deleted) == set(keys[2:BATCH]) and not totals.errors, totals
        assert set(totals.gone_unattributed) == set(keys[BATCH:]), totals
    else:
        assert not totals.deleted and not totals.errors, totals
        assert set(totals.gone_unattributed) == set(keys), totals
    assert store.puts == (["00000000.intent.json", "00000000.done.json"] if first_found
                          else ["00000000.intent.json"])


def test_a_groups_outcome_replaces_its_answer_so_far(tmp_path: Path) -> None:
    inner = LocalStore(tmp_path / "s", create=True)
    keys = _keys(tmp_path / "s", 2 * BATCH)
    items = [(k, 1, 0.0, inner.head(k).version) for k in keys]  # type: ignore[union-attr]
    (tmp_path / "s" / keys[0]).unlink()
    writer = JournalWriter(inner, JournalTarget(PREFIX), Attempt(0, 0, 0, 1))
    stats = delete_keys(inner, items, batch_size=BATCH, concurrency=1, journal=writer,
                        group=2)  # one group of two batches
    assert (stats.deleted, stats.already_gone, stats.delete_requests) == (2 * BATCH - 1, 1, 2)
    [done] = [o.key for o in inner.list_all(PREFIX) if o.key.endswith(".done.json")]
    doc = json.loads(inner.get(done))
    assert (doc["gone"], doc["errors"], doc.get("unknown"), doc["requests"]) == (
        [keys[0]], {}, None, 2)
    totals = read_journal(inner, PREFIX)
    assert totals.already_gone == {keys[0]} and set(totals.deleted) == set(keys[1:])
    assert totals.unfinished == 0 and totals.batches == 2


def test_a_carried_outcome_supersedes_the_answer_so_far_whichever_is_read_first(
    tmp_path: Path,
) -> None:
    """The group's answer so far is written alone (`so_far`); its outcome, which found a key
    gone, is then written alone at once over it even while an intent is coming (review
    rev38v finding 5: it no longer waits to ride). A journal whose outcome rode in the
    next intent (written before that change) is still read right: the reader keeps the
    outcome, and the second batch's key that was already gone counts gone (the answer so
    far would have it asked of the store: absent, "deleted")."""
    from epochgc.impl.gc.journal import NOT_ANSWERED, _outcome

    inner = LocalStore(tmp_path / "s", create=True)
    a, b, c = (format_key(1, 5, n) for n in ("a", "b", "c"))  # a: 1st batch; b, c: 2nd
    w = JournalWriter(inner, JournalTarget(PREFIX), Attempt(0, 0, 0, 1))
    seq = w.intent([(k, 1, 0.0, "") for k in (a, b, c)], 2)
    w.done(seq, DeleteResult(3, {b: NOT_ANSWERED, c: NOT_ANSWERED}, gone={a},
                             unknown={b, c}), 2, so_far=True)
    base = f"{PREFIX}p0000-s0-a0-t1/"
    assert json.loads(inner.get(f"{base}00000000.done.json"))["so_far"] is True
    w.coming()
    outcome = DeleteResult(3, gone={a, b})
    w.done(seq, outcome, 2)  # found keys gone: written at once, not carried
    assert "so_far" not in json.loads(inner.get(f"{base}00000000.done.json"))
    d = format_key(1, 5, "d")
    w.intent([(d, 1, 0.0, "")])
    intent_key = f"{base}00000001.intent.json"
    assert "done" not in json.loads(inner.get(intent_key))
    totals = read_journal(inner, PREFIX)
    # d: an intent without outcome, asked of the store (absent here: gone unattributed)
    assert totals.already_gone == {a, b} and set(totals.deleted) == {c}, totals
    assert set(totals.gone_unattributed) == {d}, totals
    assert not totals.unknown and not totals.errors
    # The older journal: the answer so far alone, the outcome carried in the next intent.
    inner.put(f"{base}00000000.done.json", json.dumps(_outcome(
        DeleteResult(3, {b: NOT_ANSWERED, c: NOT_ANSWERED}, gone={a}, unknown={b, c}), 2,
        so_far=True)).encode())
    doc = json.loads(inner.get(intent_key))
    inner.put(intent_key, json.dumps({**doc, "done": {"00000000": _outcome(outcome, 2)}})
              .encode())
    totals = read_journal(inner, PREFIX)
    assert totals.already_gone == {a, b} and set(totals.deleted) == {c}, totals
    assert set(totals.gone_unattributed) == {d}, totals
    assert not totals.unknown and not totals.errors


class _KilledAfterRequest(_Delegating):
    """Applies the first `n` DeleteObjects; then the task is killed (nothing after it,
    journal write or request, reaches the store). Records the journal's PUTs by name."""

    def __init__(self, inner: LocalStore, n: int) -> None:
        super().__init__(inner)
        self.n, self.requests, self.puts = n, 0, list[str]()

    def put(self, key: str, data: bytes) -> None:
        if self.requests >= self.n:
            raise Killed
        self.puts.append(key.rsplit("/", 1)[1])
        self.inner.put(key, data)

    def delete_if_unchanged(self, items: list[tuple[str, str]]) -> DeleteResult:
        if self.requests >= self.n:
            raise Killed
        self.requests += 1
        return self.inner.delete_if_unchanged(items)


@pytest.mark.parametrize("found", [True, False])
def test_in_a_largest_group_an_answer_that_found_keys_not_deleted_is_durable_before_the_next(
    tmp_path: Path, found: bool
) -> None:
    """Issue 38 (growing groups) with review rev38s finding 3's rule per request: the
    batches are groups of 1, 3, 4 and one of `INTENT_BATCHES`; in that last group the
    second request finds a key already gone (`found`), and the task is killed once the
    third has been applied. The second request's answer was written (`so_far`) before the
    third was sent, so the read-back counts that key gone, not deleted by the round; the
    group's clean requests (and a clean group, `found` False) write nothing until the
    group's end: one intent and one outcome per group."""
    inner = LocalStore(tmp_path / "s", create=True)
    n = 8 + INTENT_BATCHES
    keys = _keys(tmp_path / "s", n * BATCH)
    items = [(k, 1, 0.0, inner.head(k).version) for k in keys]  # type: ignore[union-attr]
    assert _groups(n) == [1, 3, 4, INTENT_BATCHES]
    gone = keys[9 * BATCH]  # batch 9: the last group's second
    if found:
        (tmp_path / "s" / gone).unlink()  # another writer removed it after the listing
    store = _KilledAfterRequest(inner, 11)
    writer = JournalWriter(store, JournalTarget(PREFIX), Attempt(0, 0, 0, 1))
    with pytest.raises(Killed):
        delete_keys(store, items, batch_size=BATCH, concurrency=1, journal=writer)
    totals = read_journal(inner, PREFIX)
    applied = set(keys[:11 * BATCH]) - ({gone} if found else set())
    assert left_per_journal(totals) == applied
    assert gone not in totals.deleted, (
        f"killed after the last group's third request: {gone} (removed by another writer "
        f"before the round's request) counted deleted: {gone in totals.deleted}")
    # Deleted: what recorded answers say: the whole groups, and with `found` the last
    # group's first two requests (their answer so far); the rest gone unattributed.
    recorded = 10 if found else 8
    assert set(totals.deleted) == set(keys[:recorded * BATCH]) - {gone}, len(totals.deleted)
    assert set(totals.gone_unattributed) == set(keys[recorded * BATCH:11 * BATCH])
    if found:
        assert totals.already_gone == {gone}, totals.already_gone
    assert set(totals.errors) == set(keys[11 * BATCH:])  # not sent: listed again
    whole = [f"{n:08d}.{kind}.json" for n in range(3) for kind in ("intent", "done")]
    assert store.puts == [*whole, "00000003.intent.json",
                          *(["00000003.done.json"] if found else [])]
