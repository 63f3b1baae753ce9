"""Records for rounds whose driver died (issue 38 item 1).

A driver killed mid-round (`kill -9`, the OOM killer, a lost node, a scheduler's hard
timeout) leaves its journal with a START and no END, and no record: its deletions appeared
in no record. Whoever next may safely look (the next real round once it holds the lease,
`gc-admin show`, `gc-admin reset`) finds every such journal, asks any task of it still
running to stop (its STOP marker), reads it back against the store (`journal.read_journal`:
an intent without its `done` is resolved by asking the store which keys are gone), and
writes the dead round's record, outcome `killed` (exit code 137, as a shell reports a
process killed by SIGKILL), and its END. A journal whose END was written but whose record
was not (killed between the two) gets its record from its END.

Never a round that may still be running: the caller names the rounds to leave alone
(`running`), from the lease (`rounds_that_may_run`). A record that exists is never
overwritten. If the dead round's driver was in fact alive (its lease expired while it was
cut off from the store, or its wall clock was behind the reader's, or an operator's
`gc-admin reset --force`), its own END and record, written later, replace these.

Between the STOP and the read-back the recovery waits the round's own bound, from its
START (`stop_within_s`, `bounds.py`: 240 s with the default lease): a driver that is in
fact alive sees STOP within a look and its tasks send nothing after that bound, so the
read-back holds every deletion of the round (review rev38m finding 1: with the tasks
asking their driver instead of HEADing STOP, a live round recovered by mistake went on
deleting behind a `killed` record that said fewer). A START without it was written by a
version whose tasks HEAD STOP before each batch: no wait (that version's bound). A START
that cannot be read: the bound of this version's round with the default lease (240 s).
Every STOP is written first, then one wait, then the read-backs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from epochgc.impl.gc.admin import LeaseState, read_lease
from epochgc.impl.gc.bounds import MAX_STOP_WITHIN_S, stop_within_s
from epochgc.impl.gc.errors import ReportError
from epochgc.impl.gc.journal import END, JOURNAL_PREFIX, START, STOP, read_journal, write_marker
from epochgc.impl.gc.lease import DEFAULT_LEASE_S
from epochgc.impl.gc.record import (
    ROUNDS_PREFIX,
    number_round,
    record_document,
    round_key,
)
from epochgc.impl.gc.reports import check_nesting
from epochgc.impl.gc.summary import GcSummary
from epochgc.impl.store.base import ObjectStore, StoreError

_MAX_DOC = 1 << 20  # bytes of a START or END read back
# The wait between the STOP markers and the read-backs (looked up at each call: a test
# that recovers a round killed for real replaces it rather than wait minutes).
SLEEP: Callable[[float], None] = time.sleep


@dataclass(frozen=True)
class Recovered:
    """One dead round given its record."""

    round_id: str
    record: str
    deleted: int
    unreadable: int  # journal entries that could not be read (deleted is a lower bound)
    from_end: bool  # the record was copied from the round's own END


def unfinished(store: ObjectStore) -> dict[str, bool]:
    """Round id -> whether its END exists, for every journal with a START (one listing of
    the journals; `gc-admin expire` keeps it short)."""
    started: set[str] = set()
    ended: set[str] = set()
    for obj in store.list_all(JOURNAL_PREFIX):
        round_id, _, name = obj.key[len(JOURNAL_PREFIX):].partition("/")
        if name == START:
            started.add(round_id)
        elif name == END:
            ended.add(round_id)
    return {r: r in ended for r in sorted(started)}


def _read_doc(store: ObjectStore, key: str) -> dict[str, Any] | None:
    try:
        raw = store.get(key, 0, _MAX_DOC)
        check_nesting(raw, key)  # json would raise RecursionError past ~1000 deep
        doc = json.loads(raw)
    except (StoreError, ReportError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _started_at(round_id: str) -> float:
    """The start time a round id begins with (`record.new_round_id`); 0 if it has none."""
    try:
        stamp = round_id.split("-", 1)[0]
        return datetime.strptime(stamp, "%Y%m%dT%H%M%S.%fZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return 0.0


def live_rounds(store: ObjectStore, now: float) -> set[str] | None:
    """The round that may be running, from the lease: its holder while the lease is live;
    none once it expired (released, or not renewed for the lease's whole duration); None
    when the lease cannot be read (then no journal may be taken for dead)."""
    lease = read_lease(store, now)
    if lease.state in (LeaseState.ABSENT, LeaseState.EXPIRED):
        return set()
    holder = (lease.holder or {}).get("round") if lease.state is LeaseState.LIVE else None
    return {holder} if isinstance(holder, str) else None


def recover_dead_rounds(
    store: ObjectStore,
    by: str,
    running: Callable[[], set[str] | None],
    data: ObjectStore | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] | None = None,
    waiting: Callable[[float], None] | None = None,
) -> list[Recovered]:
    """Write the record of every round with a journal and no record that is not running.
    `running()` names the rounds that may still run (None: cannot tell, nothing is done);
    it is asked AFTER the journals are listed, so a round that started meanwhile (it took
    the lease before its START) is left alone. `by` says who recovered it (in the record);
    `data`: the store the keys are in (default `store`). After writing the STOP markers,
    `sleep`s (default `SLEEP`) the longest of the rounds' stop bounds (`waiting(seconds)`
    is told first).
    Raises StoreError if the journals cannot be listed or a record cannot be written."""
    out: list[Recovered] = []
    candidates = unfinished(store)
    if not candidates:
        return out
    skip = running()
    if skip is None:
        return out
    recorded = {o.key for o in store.list_all(ROUNDS_PREFIX)}
    dead: list[_Dead] = []
    for round_id, has_end in candidates.items():
        if round_id in skip or round_key(round_id) in recorded:
            continue  # running, or it has its record (finished, or recovered before)
        prefix = f"{JOURNAL_PREFIX}{round_id}/"
        end = _read_doc(store, prefix + END) if has_end else None
        if end is not None:
            out.append(_from_end(store, round_id, end))
            continue
        took = _journal_span(store, prefix)  # before our STOP joins it
        start = _read_doc(store, prefix + START)
        # Any task of the dead round still running stops: its driver, if alive, sees STOP
        # within a look and answers no "go on?" after it (`gate.py`, `watch.py`); a task
        # without that channel checks STOP before each batch; one on the driver's host
        # also sees it gone (`journal.Driver`).
        write_marker(store, prefix, STOP, {"reason": "killed", "by": by})
        dead.append(_Dead(round_id, prefix, start or {}, took, _stop_within(start)))
    wait_s = max((d.wait_s for d in dead), default=0.0)
    if wait_s > 0:
        if waiting is not None:
            waiting(wait_s)
        # no task of theirs sends a request after this (`bounds.py`)
        (sleep if sleep is not None else SLEEP)(wait_s)
    for d in dead:
        out.append(_from_journal(store, data, d, by, clock))
    return out


@dataclass(frozen=True)
class _Dead:
    """A round being recovered, between its STOP and its read-back."""

    round_id: str
    prefix: str
    start: dict[str, Any]
    took: float  # how long its journal ran
    wait_s: float  # its bound from STOP to no request in flight


def _stop_within(start: dict[str, Any] | None) -> float:
    """The bound a round's START gives (`stop_within_s`), at most `MAX_STOP_WITHIN_S`; 0 if
    the START has none (its tasks HEAD STOP before each batch). A START that cannot be
    read, or whose bound is not a number, may be this version's with the default lease:
    that round's bound (240 s)."""
    default = stop_within_s(DEFAULT_LEASE_S)
    if start is None:
        return default
    given = start.get("stop_within_s")
    if given is None:
        return 0.0
    if isinstance(given, bool) or not isinstance(given, int | float) or not given >= 0:
        return default  # damaged (NaN fails `>= 0`)
    return min(float(given), MAX_STOP_WITHIN_S)


def _from_end(store: ObjectStore, round_id: str, end: dict[str, Any]) -> Recovered:
    """Killed after its END, before its record: the END is the record's document."""
    key = round_key(round_id)
    store.put(key, json.dumps(end, allow_nan=False, indent=1).encode())
    given = end.get("counts")
    counts: dict[str, Any] = given if isinstance(given, dict) else {}
    deleted = counts.get("deleted", 0)
    unreadable = end.get("journal_unreadable", 0)
    return Recovered(round_id, key, deleted if isinstance(deleted, int) else 0,
                     unreadable if isinstance(unreadable, int) else 0, True)


def _journal_span(store: ObjectStore, prefix: str) -> float:
    """How long a dead round ran, as far as its journal shows: from its first entry's
    write (START) to its last (issue 41 item 12: such records said `took 0.0s`)."""
    try:
        times = [o.mtime for o in store.list_all(prefix)]
    except StoreError:
        return 0.0
    return max(times) - min(times) if times else 0.0


def _from_journal(
    store: ObjectStore, data: ObjectStore | None, dead: _Dead, by: str,
    clock: Callable[[], float],
) -> Recovered:
    round_id, prefix, start, took = dead.round_id, dead.prefix, dead.start, dead.took
    m, rev = start.get("M"), start.get("snapshot_revision")
    s = GcSummary(
        M=m if isinstance(m, int) else None,
        revision=rev if isinstance(rev, int) else None,
        started_at=_started_at(round_id),
        round_id=round_id,
        journal=prefix,
        recovered_by=by,
        recovered_at=clock(),
        seconds=took,
    )
    try:
        totals = read_journal(store, prefix, data)
    except StoreError as e:
        s.journal_read = False
        s.error = f"its journal cannot be read back: {e}"
    else:
        s.deleted = len(totals.deleted)
        s.already_gone = len(totals.already_gone)
        s.changed = len(totals.changed)
        s.errors = len(totals.errors)
        s.bytes_deleted = totals.bytes_deleted
        s.delete_requests = totals.batches
        s.unreadable_entries = totals.unreadable
        s.error_samples = totals.error_samples()
        from epochgc.impl.gc.stage import max_epoch, partial_listing

        s.max_deleted_epoch = max_epoch(totals.deleted)
        partial_listing(s, totals)  # its tasks' listing counts died with its driver
    given = start.get("options")
    options: dict[str, Any] = given if isinstance(given, dict) else {}
    number_round(store, s)
    doc = record_document(s, options)
    write_marker(store, prefix, END, record_document(s, {}))
    key = round_key(round_id)
    store.put(key, json.dumps(doc, allow_nan=False, indent=1).encode())
    return Recovered(round_id, key, s.deleted, s.unreadable_entries, False)
