"""Records for rounds whose driver died (issue 38 item 1).

A driver killed mid-round (`kill -9`, the OOM killer, a lost node, a scheduler's hard
timeout) leaves its journal with a START and no END, and no record: its deletions appeared
in no record. Whoever next may safely look (the next real round once it holds the lease,
`gc-admin show`, `gc-admin reset`) finds every such journal, asks any task of it still
running to stop (its STOP marker), reads it back against the store (`journal.read_journal`:
an intent without its `done` is resolved by asking the store which keys are gone), and
writes the dead round's record, outcome `driver-gone`, exit code unknown (null), and its
END. Nothing tells how its driver ended (newuser13 Q3: a driver that exited 1 on a store
gone, unable to write its record, was recorded `killed` with SIGKILL's 137); the record's
`seconds` is its journal's span, START to the last entry (a lower bound). A journal whose
END was written but whose record was not (killed between the two) gets its record from its
END.

Never a round that may still be running: the caller names the rounds to leave alone
(`running`), from the lease (`rounds_that_may_run`). A record that exists is never
overwritten: the recovered record is created only if none exists (`create_if_absent`: a
hard link on a local store, `PutObject` with `If-None-Match: *` on S3), and only then its
END (also only if absent). If the dead round's driver was in fact alive (its lease expired
while it was cut off from the store, or its wall clock was behind the reader's, or an
operator's `gc-admin reset --force`), it sees STOP, stops and writes its own END and
record: the recovery, looking again after its wait, finds them and leaves them (review
rev38n finding 1: it wrote `killed` over them); a driver's record written after the
recovered one replaces it (a plain write); both claim the same round number
(`sequence.claim`: the number fixed for the round by its per-round marker). A driver that
finds a recovery's END already there (`write_own_end`) leaves `OWN_END` in the journal
before its own END replaces that one, and removes it once its record is written: a look
that finds it (the driver's record PUT failed, or it died before it) replaces the
recovered record with that END (review rev38o finding 3: the record said `killed` for
good beside the driver's END `interrupted`). The marker is in the journals' listing every
look makes already: no request is added to a round that was not recovered by mistake.

Between the STOP and the read-back the recovery waits the round's own bound, from its
START (`stop_within_s`, `bounds.py`: 300 s with the default lease): a driver that is in
fact alive sees STOP within a look and its tasks send nothing after that bound, so the
read-back holds every deletion of the round (review rev38m finding 1: with the tasks
asking their driver instead of HEADing STOP, a live round recovered by mistake went on
deleting behind a `killed` record that said fewer). The bound counts from the round's
FIRST STOP, as the store dated it (`ObjectStore.stamp`: the store's clock at both ends,
so this host's skew cannot shorten it): STOP is created only if absent, so a later look
(`gc-admin show`, a recovery a signal ended) does not restart it (newuser4 F1: each
`show` rewrote STOP, and a monitor running `show` every few minutes kept a dead round
from ever being recorded); only what is left of it is waited. A START without it was
written by a version whose tasks HEAD STOP before each batch: no wait (that version's
bound). A START that cannot be read: the longest wait (`MAX_STOP_WITHIN_S`). Every STOP
is written first, then one wait, then the read-backs. The wait ends early when the
caller's round is asked to stop (SIGINT, SIGTERM, `--deadline`: review rev38n finding 6):
nothing is read back or recorded then, the STOP markers stay, and the next look recovers
those rounds. It also ends once every round waited for has its record or END. A round
whose tasks all ran below its driver on this host and are all gone (`drivertree.py`;
newuser4 F3) sends nothing more, but what it sent may still be applied: on a local
directory nothing (a delete is a system call of the task's own process,
`stage.sent_applied_s`), so no wait; on a store behind a server a request a task wrote
before it was killed may be applied up to `APPLIED_WITHIN_S` (70 s) later (`bounds.py`),
so the wait is that long from when they were seen gone, unless less of the bound is left
(review rev38z5 finding 2: it waited 0 s on S3, read the key back still there, recorded
an error, and then the request deleted it).

`gc-admin show` does not wait (review rev38n finding 4: the status command held the
operator for the bound): `stop_dead_rounds` records what needs no wait (a round with its
END, a START without a bound), writes STOP for the rest and says when they may be
recorded (by the next round or `gc-admin reset`, which wait).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from epochgc.impl.gc.admin import LeaseState, read_lease
from epochgc.impl.gc.bounds import APPLIED_WITHIN_S, MAX_STOP_WITHIN_S, stop_within_s
from epochgc.impl.gc.drivertree import tasks_gone
from epochgc.impl.gc.errors import ReportError
from epochgc.impl.gc.journal import END, JOURNAL_PREFIX, START, STOP, read_journal
from epochgc.impl.gc.lease import DEFAULT_LEASE_S
from epochgc.impl.gc.record import (
    ROUNDS_PREFIX,
    number_round,
    record_document,
    round_key,
)
from epochgc.impl.gc.recordread import DamagedRecord, listed_records
from epochgc.impl.gc.reports import load_bounded
from epochgc.impl.gc.rounddocs import MAX_DOC, DamagedEnd, End, Start, read_end, read_start
from epochgc.impl.gc.stop import RoundStop
from epochgc.impl.gc.summary import OUTCOME_DRIVER_GONE, GcSummary
from epochgc.impl.gc.text import GONE_WHERE_SHORT, cut, printable
from epochgc.impl.store.base import (
    ConditionalConflict,
    NoConditionalWrites,
    ObjectStore,
    Stamp,
    StoreError,
)
from epochgc.impl.store.hooked import HookedStore
from epochgc.impl.store.local import LocalStore

# The wait between the STOP markers and the read-backs (looked up at each call: a test
# that recovers a round killed for real replaces it rather than wait minutes).
SLEEP: Callable[[float], None] = time.sleep
# The wait goes in steps this long: after each the operator is told what is left and the
# rounds are looked at again (one that got its record or END needs no more).
WAIT_STEP_S = 30.0
# How often the wait looks whether the rounds it waits for have ended (their record or END,
# their driver's tree gone): a round that records itself 5 s in ended the wait only at the
# next 30 s step (newuser8 N1: `reset --force --even-if-running` took 31.8 s).
POLL_S = 2.0
# In a round's journal: its driver wrote its own END over a recovery's; its record must be
# made from that END (`write_own_end`, `_own_end`).
OWN_END = "OWN_END"
# Unreadable journal entries a recovered record names at most (each "key: why", cut).
_MAX_UNREADABLE_SAMPLES = 20


@dataclass(frozen=True)
class Recovered:
    """One dead round given its record."""

    round_id: str
    record: str
    deleted: int
    unreadable: int  # journal entries that could not be read (deleted is a lower bound)
    from_end: bool  # the record was copied from the round's own END
    outcome: str = OUTCOME_DRIVER_GONE  # what the record says (from an END: the driver's own)
    unknown: int = 0  # keys whose fate the store could not tell (deleted is a lower bound)
    # Keys found absent in batches with no answer saying the round deleted them (review
    # rev38v finding 3; none recorded, or ambiguous: rev38x finding 1): left the store, by
    # the round's requests or another writer's; not in `deleted`.
    gone_unattributed: int = 0

    @property
    def lower_bound(self) -> bool:
        """`deleted` is a lower bound (entries unreadable, or keys of unknown fate)."""
        return bool(self.unreadable or self.unknown)

    def gone_text(self) -> str:
        """`gone_unattributed` as a clause after "N key(s) deleted" (empty when 0)."""
        if not self.gone_unattributed:
            return ""
        return (f", {self.gone_unattributed:,} more left the store {GONE_WHERE_SHORT} "
                "(its requests' or another writer's)")

    def gone_before(self) -> str:
        """What its driver did not write: its END (recorded `driver-gone` from the journal), or
        only its record (recorded from its END, with the END's outcome: review rev38o
        finding 7, such a round was announced as `killed`)."""
        return "its record (recorded from its own END)" if self.from_end else "its end"


def unfinished(store: ObjectStore) -> dict[str, bool]:
    """Round id -> whether its END exists, for every journal with a START (one listing of
    the journals; `gc-admin expire` keeps it short)."""
    return {r: END in names for r, names in _journals(store).items()}


def _journals(store: ObjectStore) -> dict[str, set[str]]:
    """Round id -> which of END and OWN_END its journal holds, for every journal with a
    START (one listing of the journals)."""
    found: dict[str, set[str]] = {}
    for obj in store.list_all(JOURNAL_PREFIX):
        round_id, _, name = obj.key[len(JOURNAL_PREFIX):].partition("/")
        if name in (START, END, OWN_END):
            found.setdefault(round_id, set()).add(name)
    return {r: names - {START} for r, names in sorted(found.items()) if START in names}


def write_own_end(store: ObjectStore, prefix: str, doc: dict[str, Any]) -> bool:
    """The driver's END, created if absent. If one is there, a recovery took the round for
    dead and recorded it (its driver's lease looked expired, `gc-admin reset --force`):
    `OWN_END` is written first, then END replaced with the driver's; True then, and the
    driver's record must replace the recovered one (`drop_own_end` after it)."""
    key = prefix + END
    data = json.dumps(doc, allow_nan=False, indent=1).encode()
    try:
        if store.create_if_absent(key, data) is not None:
            return False
    except NoConditionalWrites:
        if store.head(key) is None:
            store.put(key, data)
            return False
    except ConditionalConflict:
        pass  # another END written at the same moment: a recovery's
    # (A create applied but answered with an error, retried and refused, comes here too:
    # END is then already ours, and the marker costs a request and a later delete.)
    store.put(prefix + OWN_END, b"{}")  # before END: a crash after it leaves it
    store.put(key, data)
    return True


def drop_own_end(store: ObjectStore, prefix: str) -> None:
    """The driver's record is written: its `OWN_END` is no longer needed (if this fails,
    the next look finds the record is the driver's and removes it)."""
    store.delete_batch([prefix + OWN_END])


def _read_doc(store: ObjectStore, key: str) -> dict[str, Any] | None:
    """A record read leniently, for what a look says of it (`recorded_as`, `_own_end`);
    never copied into another record (START and END: `rounddocs.py`)."""
    try:
        raw = store.get(key, 0, MAX_DOC)
    except StoreError:
        return None
    return _parsed(raw, key)


def _parsed(raw: bytes, key: str) -> dict[str, Any] | None:
    try:
        doc = load_bounded(raw, key)  # nesting and numbers bounded (reports.load_bounded)
    except (ReportError, ValueError):
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


@dataclass(frozen=True)
class Stopping:
    """A dead round whose STOP was written and whose record waits for its bound."""

    round_id: str
    wait_s: float  # its bound from STOP to no request in flight
    # the first STOP's time plus the bound, on the store's clock (the same on every look);
    # this host's clock plus the bound when the STOP's time is unknown
    record_after: float


@dataclass(frozen=True)
class _Found:
    recorded: list[Recovered]  # recorded at once (from their END)
    stopped: list[_Dead]  # STOP written, to be read back after their bound
    # Its record's key holds what is no object (a directory, a FIFO, a symbolic link on a
    # local store): left alone, named (i41y leftover: taken for unrecorded, it got a STOP,
    # the wait and the read-back, then nothing, in silence, on every look).
    damaged: list[DamagedRecord] = field(default_factory=list)


def recover_dead_rounds(
    store: ObjectStore,
    by: str,
    running: Callable[[], set[str] | None],
    data: ObjectStore | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] | None = None,
    waiting: Callable[[float, list[str]], None] | None = None,
    stop: RoundStop | None = None,
    left: Callable[[float, list[str]], None] | None = None,
    meanwhile: Callable[[str, str], None] | None = None,
    damaged: Callable[[DamagedRecord], None] | None = None,
) -> list[Recovered]:
    """Write the record of every round with a journal and no record that is not running.
    `running()` names the rounds that may still run (None: cannot tell, nothing is done);
    it is asked AFTER the journals are listed, so a round that started meanwhile (it took
    the lease before its START) is left alone. `by` says who recovered it (in the record);
    `data`: the store the keys are in (default `store`). After writing the STOP markers,
    waits the longest of the rounds' stop bounds (`waiting(seconds, rounds)` is told
    first, then `left(seconds, rounds)` every `WAIT_STEP_S` of it): `sleep` (default
    `SLEEP`), one step at a time; the wait ends early once every round waited for has its
    record or END (its driver was alive and ended: nothing to read back). With `stop`, the
    wait ends once it is requested and nothing more is done (the STOPs stay: the next look
    records those rounds). `meanwhile(round, how)` is told of each round recorded by
    someone else during the wait (newuser5 G2: the wait then ended without a word).
    `damaged(e)` is told of each round whose record's key holds what is no object: it is
    left as it is, nothing written over it or into the round's journal.
    Raises StoreError if the journals cannot be listed or a record cannot be written."""
    applied_s = _applied_after_send_s(data or store)
    found = _stop_dead(store, by, running, applied_s)
    _tell(found, damaged)
    out = list(found.recorded)
    if _wait(store, found.stopped, sleep if sleep is not None else SLEEP, waiting, left, stop,
             applied_s):
        return out
    for d in found.stopped:
        r = _record_stopped(store, data, d, by, clock)
        if r is not None:
            out.append(r)
        elif meanwhile is not None:
            meanwhile(d.round_id, _recorded_how(store, d.round_id))
    return out


def recorded_as(store: ObjectStore, round_id: str) -> dict[str, Any]:
    """How a round's record says it ended: {"round", "outcome", "deleted",
    "gone_unattributed", "recorded_by"} (`recorded_by` None: its own driver; a count None
    when the record does not say; `gone_unattributed`: review rev38x finding 4)."""
    rec = _read_doc(store, round_key(round_id)) or {}
    who = rec.get("recovered_by")
    counts = rec.get("counts")
    counts = counts if isinstance(counts, dict) else {}
    deleted, gone = counts.get("deleted"), counts.get("gone_unattributed")
    return {"round": round_id, "outcome": str(rec.get("outcome", "unknown")),
            "deleted": deleted if type(deleted) is int else None,
            "gone_unattributed": gone if type(gone) is int else None,
            "recorded_by": str(who) if who else None}


def _recorded_how(store: ObjectStore, round_id: str) -> str:
    """Who recorded a round and what its record says, in a few words."""
    r = recorded_as(store, round_id)
    who = r["recorded_by"]
    return (f"by {printable(who) if who else 'its own driver'}: {printable(r['outcome'])}"
            + (f", {r['deleted']:,} key(s) deleted" if r["deleted"] is not None else "")
            + (f", {r['gone_unattributed']:,} more left the store {GONE_WHERE_SHORT}"
               if r["gone_unattributed"] else ""))


def stop_dead_rounds(
    store: ObjectStore,
    by: str,
    running: Callable[[], set[str] | None],
    data: ObjectStore | None = None,
    clock: Callable[[], float] = time.time,
    damaged: Callable[[DamagedRecord], None] | None = None,
) -> tuple[list[Recovered], list[Stopping]]:
    """`recover_dead_rounds` without the wait (`gc-admin show`): the rounds that need none
    recorded (with their END, or a START without a bound), STOP written for the others,
    which are returned as stopping (recorded by the next look that waits); `damaged` as
    there."""
    found = _stop_dead(store, by, running, _applied_after_send_s(data or store))
    _tell(found, damaged)
    out = list(found.recorded)
    stopping: list[Stopping] = []
    for d in found.stopped:
        if d.left_s() > 0:
            stopping.append(Stopping(d.round_id, d.wait_s, d.record_after(clock)))
            continue
        r = _record_stopped(store, data, d, by, clock)
        if r is not None:
            out.append(r)
    return out, stopping


def _tell(found: _Found, damaged: Callable[[DamagedRecord], None] | None) -> None:
    for e in found.damaged:
        if damaged is not None:
            damaged(e)


def journal_started(store: ObjectStore, round_id: str) -> bool:
    """Whether round `round_id` wrote anything into its deletion journal. Its START comes
    before its first task (`journal.py`), so a round with nothing there deleted nothing;
    every record of a dead round is written from its journal (above), so such a round
    has none to get (newuser14 R7: one killed in Spark's start-up left only its lease)."""
    return next(iter(store.list_all(f"{JOURNAL_PREFIX}{round_id}/")), None) is not None


def recorded(store: ObjectStore, round_id: str) -> bool:
    """Whether round `round_id` has its record."""
    return store.head(round_key(round_id)) is not None


# Said where a dead round's lease is shown or removed and the round started no journal
# (newuser14 R7: `show` promised that `reset --force` "records the round"; reset removed the
# lease and said nothing of it). The record model has nothing to record it from.
NO_JOURNAL = ("before its deletion journal started: nothing was deleted, and there is no "
              "record to write (a dead round is recorded from its journal)")


def unrecordable_line(e: DamagedRecord) -> str:
    """What a look says of a dead round whose record's key holds what is no object."""
    round_id = e.key.rpartition("/")[2].removesuffix(".json")
    return (f"dead round {printable(round_id)} not recorded: {e}; nothing is written over "
            "it (move it away, and the next round or `gc-admin reset` records the round)")


def waiting_line(wait_s: float, rounds: list[str]) -> str:
    """What the operator is told when a recovery starts its wait."""
    many = len(rounds) > 1
    # newuser5 G3: "(no task of its sends a delete after that)" read as if the deletes
    # stopped at once; a live round's tasks may go on until its watch sees the STOP.
    return (f"waiting up to {wait_s:.0f} s for round{'s' if many else ''} "
            f"{', '.join(rounds)} to see {'their' if many else 'its'} STOP (a live "
            f"round's tasks may delete until then; none after) before reading "
            f"{'their journals' if many else 'its journal'} back")


def _wait(store: ObjectStore, stopped: list[_Dead], sleep: Callable[[float], None],
          waiting: Callable[[float, list[str]], None] | None,
          left: Callable[[float, list[str]], None] | None, stop: RoundStop | None,
          applied_s: float) -> bool:
    """Wait until no task of the stopped rounds sends a request (`bounds.py`), in steps of
    `WAIT_STEP_S`, saying how long is left after each (newuser4 F3: 4 minutes of silence
    after one line looked like a hang); it ends once every round waited for has its record
    or END (newuser4 F3: a round stopped by its STOP wrote its own record 25 s in, and
    `reset` waited on for the whole 240 s), looked at every `POLL_S`. True if `stop` was
    requested meanwhile. A round whose tasks are seen gone is waited for `applied_s` more
    at most (`_applied_after_send_s`: a request they sent may still be applied)."""
    until = {d.round_id: float(d.left_s()) for d in stopped}  # in seconds waited
    pending = [d for d in stopped if until[d.round_id] > 0]
    waited = said = 0.0  # seconds waited; when what is left was last said
    while pending:
        rest = max(until[d.round_id] for d in pending) - waited
        if rest <= 0:
            return False
        names = [d.round_id for d in pending]
        if waited == 0:
            if waiting is not None:
                waiting(rest, names)
        elif waited - said >= WAIT_STEP_S:
            said = waited
            if left is not None:
                left(rest, names)
        step = min(POLL_S, rest)
        if _interrupted(step, sleep, stop):
            return True
        waited += step
        # A round is no longer waited for once its record or END exists, nor more than
        # `applied_s` once its driver's tree on this host has gone meanwhile (newuser5 G2:
        # a driver killed during the wait, as `gc-admin show` then saw, was waited for to
        # the end; review rev38z5 finding 2: what it sent may still land on a server).
        for d in pending:
            if d.start.doc is not None and tasks_gone(d.start.doc):
                until[d.round_id] = min(until[d.round_id], waited + applied_s)
        pending = [d for d in pending if until[d.round_id] > waited
                   and not _ended(store, d)]
    return False


def _ended(store: ObjectStore, dead: _Dead) -> bool:
    """Its record or END exists: written by its driver (alive after all) or another look."""
    return (store.head(round_key(dead.round_id)) is not None
            or isinstance(read_end(store, dead.prefix + END), End))  # damaged: not an END


def left_line(seconds: float, rounds: list[str]) -> str:
    """What the operator is told during the wait, every `WAIT_STEP_S`."""
    return (f"{seconds:.0f} s left of the wait for {', '.join(rounds)} (Ctrl-C stops it: "
            "the next round or `gc-admin reset` records "
            f"{'them' if len(rounds) > 1 else 'it'})")


def _interrupted(wait_s: float, sleep: Callable[[float], None], stop: RoundStop | None
                 ) -> bool:
    """Wait `wait_s`; True if `stop` was requested meanwhile. The real wait (`time.sleep`)
    is the stop's own event, so a signal or the deadline ends it at once (a handler only
    records the request: `time.sleep` resumes after it, PEP 475); an injected `sleep`
    (tests) is called as it is and the stop looked at after it."""
    if stop is None:
        sleep(wait_s)
        return False
    if sleep is time.sleep:
        stop.wait(wait_s)
    else:
        sleep(wait_s)
    return stop.requested


def _stop_dead(store: ObjectStore, by: str, running: Callable[[], set[str] | None],
               applied_s: float) -> _Found:
    """The unfinished rounds that are not running and have no record: those with an END
    recorded from it, STOP written to the others; `applied_s`: how long a request a task
    sent may still be applied after the task is gone (`_applied_after_send_s`)."""
    found = _Found([], [])
    candidates = _journals(store)
    if not candidates:
        return found
    skip = running()
    if skip is None:
        return found
    recorded, refused = listed_records(store, ROUNDS_PREFIX)
    for round_id, names in candidates.items():
        if round_id in skip:
            continue
        prefix = f"{JOURNAL_PREFIX}{round_id}/"
        if round_key(round_id) in refused:
            # Never written over or through (a link would put the record elsewhere), nor
            # waited for: no record can be made there until an operator moves it away.
            key = round_key(round_id)
            found.damaged.append(DamagedRecord(key, refused[key]))
            continue
        if OWN_END in names:  # its driver's END replaced a recovery's: its record follows
            r = _own_end(store, round_id, prefix)
            if r is not None:
                found.recorded.append(r)
            continue
        if round_key(round_id) in recorded:
            continue  # it has its record (finished, or recovered before)
        end = read_end(store, prefix + END) if END in names else None
        if isinstance(end, End):
            r = _from_end(store, round_id, end)
            if r is not None:
                found.recorded.append(r)
            continue
        # No END, or a damaged one (review rev38z10 finding 8: one that is no round record
        # was copied as the record): read back from the journal, the END named there.
        took = _journal_span(store, prefix)
        start = read_start(store, prefix + START)
        # Any task of the dead round still running stops: its driver, if alive, sees STOP
        # within a look and answers no "go on?" after it (`gate.py`, `watch.py`); a task
        # without that channel checks STOP before each batch; one on the driver's host
        # also sees it gone (`journal.Driver`).
        stamp = _stop_once(store, prefix, by)
        # At least `applied_s` after its STOP even when its START names no bound (a round
        # whose tasks HEAD STOP before each batch, a START written before the field or
        # damaged): a request sent just before STOP may still be applied by the server
        # that long after (review rev38z6 finding 2).
        dead = _Dead(round_id, prefix, start, took,
                     max(_stop_within(start.doc, applied_s), applied_s), stamp)
        # A round whose every task ran below its driver on this host, all gone: nothing of
        # it can send a request any more (newuser4 F3), but what it sent may still be
        # applied (review rev38z5 finding 2).
        if start.doc is not None and tasks_gone(start.doc):
            dead = dead.tasks_gone(applied_s)
        found.stopped.append(dead)
    return found


def _applied_after_send_s(store: ObjectStore) -> float:
    """How long after its sender is gone a delete request may still be applied: 0 on a
    local directory, whose deletes are system calls of the task's own process (a process
    killed during one exits only once it has returned: signal(7); `stage.sent_applied_s`);
    `APPLIED_WITHIN_S` on any other store (a server may apply a request it got after its
    client died: `bounds.py`). A wrapper (`HookedStore`) is what it wraps."""
    while isinstance(store, HookedStore):
        store = store.inner
    return 0.0 if isinstance(store, LocalStore) else APPLIED_WITHIN_S


def _stop_once(store: ObjectStore, prefix: str, by: str) -> Stamp | None:
    """Write the round's STOP only if it has none, and say when the first one was written,
    on the store's clock (None: cannot tell). Its tasks' bound counts from the FIRST STOP
    (newuser4 F1: each `gc-admin show` rewrote it, and the wait restarted each time: a
    monitor running `show` every few minutes kept a dead round from ever being recorded).
    Conditional as the record and END are (`create_if_absent`); a store without
    conditional writes gets it only if a HEAD finds none."""
    key = prefix + STOP
    doc = json.dumps({"reason": "killed", "by": by}, allow_nan=False, indent=1).encode()
    try:
        store.create_if_absent(key, doc)
    except NoConditionalWrites:
        if store.head(key) is None:
            store.put(key, doc)
    return store.stamp(key)


def _record_stopped(store: ObjectStore, data: ObjectStore | None, dead: _Dead, by: str,
                    clock: Callable[[], float]) -> Recovered | None:
    """After the wait: the round's record, unless it got one meanwhile (its driver was
    alive and wrote its own, or another recovery did: None); from its END if that appeared
    (the driver's own account), else read back from its journal."""
    if store.head(round_key(dead.round_id)) is not None:
        return None
    end = read_end(store, dead.prefix + END)
    if isinstance(end, End):
        return _from_end(store, dead.round_id, end)
    return _from_journal(store, data, dead, by, clock,
                         [f"{end.key}: {end.why}"] if isinstance(end, DamagedEnd) else [])


@dataclass(frozen=True)
class _Dead:
    """A round being recovered, between its STOP and its read-back."""

    round_id: str
    prefix: str
    start: Start
    took: float  # how long its journal ran
    wait_s: float  # its bound from STOP to no request in flight
    stop_stamp: Stamp | None  # when its first STOP was written (store's clock), if known

    def left_s(self) -> float:
        """What is left of its bound: the bound less the first STOP's age on the store's
        clock (whole seconds, rounded up); the whole bound if that age is unknown."""
        if self.wait_s <= 0:
            return 0.0
        age = self.stop_stamp.age() if self.stop_stamp is not None else 0.0
        return float(max(0, math.ceil(self.wait_s - age)))

    def tasks_gone(self, applied_s: float) -> _Dead:
        """Its tasks are gone (none can send any more): what is left of its bound, but at
        most `applied_s` from now (a request one sent before it died may be applied that
        long after: `_applied_after_send_s`); counted from now, so no STOP time."""
        return replace(self, wait_s=min(float(self.left_s()), applied_s), stop_stamp=None)

    def record_after(self, clock: Callable[[], float]) -> float:
        """When its bound ends: the first STOP's time plus the bound (the store's clock:
        the same on every look); unknown, `clock()` plus the bound."""
        if self.stop_stamp is None:
            return clock() + self.wait_s
        return self.stop_stamp.written_by + self.wait_s


def _stop_within(start: dict[str, Any] | None, applied_s: float) -> float:
    """The bound a round's START gives (`stop_within_s`), at most `MAX_STOP_WITHIN_S`; the
    most if it cannot be read (it may be a round with the go-on channel). A START with none
    (written before the field, 7364caf, or damaged yet parseable): its tasks HEAD STOP
    before each batch, then write the intent, then send: on a local directory (`applied_s`
    0) each a system call of a process that is gone, so 0; on a store behind a server that
    chain had no send deadline, so the most (review rev38z7 finding 2).

    On a store behind a server, never less than today's `bounds.stop_within_s` for the
    round's lease (review rev38z11 finding 2): its tasks had the same timeouts and gate, and
    the bound's argument has been corrected since some STARTs were written (240 s before
    91975e8 for the default lease, 300 s now). A START names its lease (`lease_s`) from
    task s28j on; one without it was written by a driver whose only lease outside tests
    was the default (`lease.DEFAULT_LEASE_S`: no option sets another). A local directory
    keeps its START's bound: the corrections were for requests in flight to a server (a
    copy an intermediary sends, the request's own writes), which a system call is not."""
    if start is None:
        return MAX_STOP_WITHIN_S
    if start.get("stop_within_s") is None:
        return MAX_STOP_WITHIN_S if applied_s > 0 else 0.0
    given = _seconds(start.get("stop_within_s"))
    if given is None:
        return MAX_STOP_WITHIN_S  # damaged: the longest
    if applied_s > 0:
        lease = _seconds(start.get("lease_s", DEFAULT_LEASE_S))
        if lease is None or lease == 0:
            return MAX_STOP_WITHIN_S  # a damaged lease: the longest
        given = max(given, stop_within_s(min(lease, _LONGEST_LEASE_S)))
    return min(given, MAX_STOP_WITHIN_S)


def _previous_version(start: dict[str, Any] | None) -> bool:
    """Whether a round's journal may be a previous version's, whose outcomes wrote a whole
    request's 4xx as a plain error, not `unknown` (before s28c; review rev38z11 finding 2):
    its START names no lease (`lease_s`, written from task s28j on), or cannot be read. Its
    plain errors are then asked of the store after the wait (`read_journal`'s `ask_errors`):
    a key still there is an error as before, one gone is counted gone unattributed, never
    "not deleted". Rounds of s28c's version are asked too (their START has no lease
    either): for them a HEAD per plain error, after the same wait, with the same count when
    the key is there."""
    return start is None or "lease_s" not in start


# Past this lease `stop_within_s` is past `MAX_STOP_WITHIN_S` anyway.
_LONGEST_LEASE_S = 4 * MAX_STOP_WITHIN_S


def _seconds(value: Any) -> float | None:
    """A document's duration as a float: None unless a finite number >= 0 (a bool, a
    string, NaN are not). An integer past float's range is refused where the document is
    loaded (review rev38z12 finding 1)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    seconds = float(value)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _from_end(store: ObjectStore, round_id: str, end: End) -> Recovered | None:
    """Killed after its END, before its record: the END is the record's document (created
    only if no record exists: None if one does, e.g. its driver's own, written meanwhile)."""
    key = round_key(round_id)
    if _created(store, key, end.data) is None:
        return None
    return _recovered_from_end(round_id, key, end.doc)


def _own_end(store: ObjectStore, round_id: str, prefix: str) -> Recovered | None:
    """A round whose driver wrote its own END over a recovery's (`OWN_END`): a recovered
    record (`recovered_by`) is replaced by that END, if it is still the one read; no record
    gets it from the END. Then the marker goes (not while END cannot be read: the next
    look tries again)."""
    end = read_end(store, prefix + END)
    if end is None:
        return None
    out: Recovered | None = None
    key = round_key(round_id)
    # A damaged END (no round record, review rev38z10 finding 8) is no account: the
    # recovered record stands, and the marker goes.
    if isinstance(end, End) and end.doc.get("recovered_by") is None:  # the driver's own
        there = store.get_versioned(key, MAX_DOC)
        if there is None:
            out = _from_end(store, round_id, end)
        elif ((_parsed(there.data, key) or {}).get("recovered_by") is not None
              and store.replace_if_match(key, end.data, there.version) is not None):
            out = _recovered_from_end(round_id, key, end.doc)
    drop_own_end(store, prefix)
    return out


def _recovered_from_end(round_id: str, key: str, end: dict[str, Any]) -> Recovered:
    given = end.get("counts")
    counts: dict[str, Any] = given if isinstance(given, dict) else {}
    deleted = counts.get("deleted", 0)
    unreadable = end.get("journal_unreadable", 0)
    unknown = counts.get("unknown", 0)
    gone = counts.get("gone_unattributed", 0)  # absent from an END before the field: 0
    outcome = end.get("outcome")
    return Recovered(round_id, key, deleted if isinstance(deleted, int) else 0,
                     unreadable if isinstance(unreadable, int) else 0, True,
                     outcome if isinstance(outcome, str) else "unknown",
                     unknown if isinstance(unknown, int) else 0,
                     gone if isinstance(gone, int) else 0)


def _created(store: ObjectStore, key: str, data: bytes) -> str | None:
    """Create `key` only if absent; its version if it is ours, else None. A create that was
    applied but answered with an error (S3 500, a reset connection) is retried by the
    client and answered 412: the object there is then compared with what we wrote (our
    record names who recovered it and when, so no other writer's is the same; review
    rev38o finding 4)."""
    version = store.create_if_absent(key, data)
    if version is not None:
        return version
    try:
        there = store.get_versioned(key, len(data) + 1)
    except StoreError:
        return None  # unreadable: not known to be ours (the record exists either way)
    return there.version if there is not None and there.data == data else None


def _journal_span(store: ObjectStore, prefix: str) -> float:
    """How long a dead round ran, as far as its journal shows: from its first entry's
    write (START) to its last intent or outcome (issue 41 item 12: such records said
    `took 0.0s`). STOP and END are left out: a STOP may have been written by an earlier
    look (`gc-admin show`, a recovery a signal ended) hours after the round died, and the
    span ran up to it (review rev38o finding 1)."""
    try:
        times = [o.mtime for o in store.list_all(prefix)
                 if o.key[len(prefix):] not in (STOP, END)]
    except StoreError:
        return 0.0
    return max(times) - min(times) if times else 0.0


def _from_journal(
    store: ObjectStore, data: ObjectStore | None, dead: _Dead, by: str,
    clock: Callable[[], float], damaged: list[str] | None = None,
) -> Recovered | None:
    """The dead round's record read back from its journal. `damaged`: its other entries
    that could not be read ("key: why": a damaged END), counted with the journal's
    unreadable entries and named in the record's samples, as its START is when damaged."""
    round_id, prefix, start, took = dead.round_id, dead.prefix, dead.start, dead.took
    damaged = list(damaged or [])
    if start.problem is not None:
        damaged.insert(0, f"{prefix}{START}: {start.problem}")
    s = GcSummary(
        M=start.m,
        revision=start.revision,
        started_at=_started_at(round_id),
        round_id=round_id,
        journal=prefix,
        recovered_by=by,
        recovered_at=clock(),
        seconds=took,
    )
    try:
        totals = read_journal(store, prefix, data, ask_errors=_previous_version(start.doc))
    except StoreError as e:
        s.journal_read = False
        s.error = f"its journal cannot be read back: {cut(str(e))}"
        s.unreadable_entries = len(damaged)
        s.error_samples = [f"unreadable: {d}" for d in damaged[:_MAX_UNREADABLE_SAMPLES]]
    else:
        s.deleted = len(totals.deleted)
        s.already_gone = len(totals.already_gone)
        s.changed = len(totals.changed)
        s.errors = len(totals.errors)
        s.unknown = len(totals.unknown)
        s.bytes_deleted = totals.bytes_deleted
        s.gone_unattributed = len(totals.gone_unattributed)
        s.bytes_gone_unattributed = totals.bytes_gone_unattributed
        s.delete_requests = totals.batches
        # Issue 38 item 2: how many entries could not be read, and which (review rev38z10
        # finding 1: a damaged START, END or intent is counted, never raised).
        s.unreadable_entries = totals.unreadable + len(damaged)
        s.error_samples = (totals.error_samples() + totals.unknown_samples()
                           + [f"unreadable: {d}" for d in
                              (damaged + totals.unreadable_samples)[:_MAX_UNREADABLE_SAMPLES]])
        from epochgc.impl.gc.stage import max_epoch, partial_listing

        s.max_deleted_epoch = max_epoch(totals.deleted)
        partial_listing(s, totals)  # its tasks' listing counts died with its driver
    options = start.options_or_none()
    # The number first (the record carries it): `claim` hands a round the number fixed
    # for it, so a driver or another recovery that records it too shares it.
    number_round(store, s)
    doc = record_document(s, options)
    key = round_key(round_id)
    # Only if no record exists (review rev38n finding 1): the driver's own, written during
    # the read-back, or another recovery's, wins; then neither END nor record is ours.
    version = _created(store, key, json.dumps(doc, allow_nan=False, indent=1).encode())
    if version is None:
        return None
    # The journal's last word, unless its driver wrote its own meanwhile.
    if _created(store, prefix + END, json.dumps(record_document(s, {}), allow_nan=False,
                                                indent=1).encode()) is not None:
        return Recovered(round_id, key, s.deleted, s.unreadable_entries, False,
                         unknown=s.unknown, gone_unattributed=s.gone_unattributed)
    # Its driver was alive and wrote its END after our look (review rev38o finding 3):
    # its END is the round's own account, and our record gives way to it unless its
    # driver's own record replaced ours already (then that one stands).
    end = read_end(store, prefix + END)
    if not isinstance(end, End):  # none readable, or no round record: ours stands
        return Recovered(round_id, key, s.deleted, s.unreadable_entries, False,
                         unknown=s.unknown, gone_unattributed=s.gone_unattributed)
    if store.replace_if_match(key, end.data, version) is None:
        return None
    return _recovered_from_end(round_id, key, end.doc)
