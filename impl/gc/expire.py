"""`gc-admin expire`: old GC rounds' records, journals and sequence markers removed (issue 41
item 8: 2.2 MB after 20k deletes, growing every round, and nothing removed them).

A round is its record (`_cluster/gc/rounds/<id>.json`), its deletion journal
(`_cluster/gc/journal/<id>/`) and its sequence markers (`_cluster/gc/seq/<n>`, and
`_cluster/gc/seq-round/<id>` which fixes its number). One expires
when its record was written longer ago than the retention, by the store's own time of the
record (mtime, S3 LastModified: not the round's clock, which may have been wrong), unless
it is among the last `keep_last` rounds that ran (by sequence number; records from before
numbering by name). A refusal's record (paused, lease held: the round never began) is not
a round that ran: it expires by age alone (issue 41 F5). Compare Delta Lake's log
retention (`delta.logRetentionDuration`, 30 days by default) and Iceberg's
`expire_snapshots` (older than 5 days, retaining the last one).

Never removed: a round whose record cannot be read (not UTF-8, not one strict JSON
object: `recordread.py`): each record is read before its round is removed, and one that
cannot be is named and kept with its journal and marker (nothing is removed unread; the
command then exits 1). The last `keep_last` rounds' records are read too, so that damage is
said even where nothing would be removed. The journal of a round with START and no record
(running, or its driver died, before or after END: `recover.py` records it: the next
round or `gc-admin reset`), the highest sequence marker (the next round numbers from it), and
anything outside `_cluster/gc/{rounds,journal,seq,seq-round}/`.

Order, so that an expire stopped at any point leaves nothing misread: a round's journal
entries first, then its STOP and START, then END (a journal with START and no END would be
taken for a dead round's), then the record, then the marker. A journal with no record and no
START (a round that could not write START deleted nothing) expires by the age of its newest
object.

Orphaned sequence markers (newuser5 G6): an expire stopped between a round's record and its
markers left `seq/<n>` and `seq-round/<id>` naming a round with no record and no journal,
which no later expire saw (it looked at rounds by their records and journals). Such markers
are removed once older than the retention (the highest marker never). A round claims its
number just before its record's PUT (`record.write_record`), after its START if it has a
journal, so markers with neither are an expired round's remains or the moment between a
record-only round's claim (a refusal, a blocked round) and its PUT: the record, START and
END are looked for again just before the markers are removed, and any of them keeps them.
Past that check a stalled claimer's record would keep its number without a marker, as a
marker removed by hand (`sequence.newer_unmarked`); the highest marker is kept, so no
number is handed out twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from epochgc.impl.gc.duration import format_duration
from epochgc.impl.gc.journal import END, JOURNAL_PREFIX, START, STOP
from epochgc.impl.gc.record import ROUNDS_PREFIX, round_key
from epochgc.impl.gc.recordread import (
    DamagedRecord,
    is_refusal,
    listed_records,
    read_round_record,
)
from epochgc.impl.gc.sequence import (
    ROUND_SEQ_PREFIX,
    SEQ_PREFIX,
    check_room,
    markers,
    round_order,
    round_seq_key,
)
from epochgc.impl.shortlist import short_lines
from epochgc.impl.store.base import MAX_DELETE_BATCH, ObjectInfo, ObjectStore, StoreError

# Delta Lake's table property `delta.logRetentionDuration`: "interval 30 days" by default
# (https://docs.delta.io/latest/table-properties.html). Iceberg's Spark procedure
# `expire_snapshots`: `older_than` 5 days ago, `retain_last` 1 by default
# (https://iceberg.apache.org/docs/1.7.0/spark-procedures/#expire_snapshots). A GC record
# is an audit trail, not table state a reader needs: the log's 30 days, and 10 rounds kept.
DEFAULT_RETENTION_S = 30 * 86400.0
DEFAULT_KEEP_LAST = 10


@dataclass
class ExpirePlan:
    applied: bool
    older_than_s: float
    keep_last: int
    rounds: list[str] = field(default_factory=list)  # round ids expired (or that would be)
    objects: int = 0
    bytes: int = 0
    kept_recent: int = 0
    unfinished: list[str] = field(default_factory=list)  # never touched
    removed: int = 0  # objects actually removed (applied)
    orphans: list[str] = field(default_factory=list)  # rounds with markers only (G6)
    unreadable: list[Unreadable] = field(default_factory=list)  # kept: never removed unread

    def as_dict(self) -> dict[str, Any]:
        return {"dry_run": not self.applied, "older_than_s": self.older_than_s,
                "keep_last": self.keep_last, "rounds": self.rounds, "objects": self.objects,
                "bytes": self.bytes, "kept_recent": self.kept_recent,
                "unfinished": self.unfinished, "removed": self.removed,
                "orphaned_markers": self.orphans,
                "unreadable": [{"key": u.key, "why": u.why} for u in self.unreadable]}

    def lines(self) -> list[str]:
        age = format_duration(self.older_than_s)
        if self.applied:
            out = [f"gc-admin: expire: removed {len(self.rounds)} round(s) older than {age} "
                   f"({self.removed:,} object(s), {self.bytes:,} bytes)"]
        else:
            out = [f"gc-admin: expire (dry run, nothing removed): would remove "
                   f"{len(self.rounds)} round(s) older than {age} ({self.objects:,} object(s), "
                   f"{self.bytes:,} bytes); run again with --apply to remove them"]
        out.extend(short_lines(self.rounds))
        if self.orphans:
            out.append(f"gc-admin: expire: {'removed' if self.applied else 'would remove'} "
                       f"the sequence markers of {len(self.orphans)} round(s) with no record "
                       "and no journal (left by an interrupted expire):")
            out.extend(short_lines(self.orphans))
        out.append(f"gc-admin: kept the last {self.kept_recent} round(s) that ran"
                   + (f" and {len(self.unfinished)} unfinished journal(s) (never expired; "
                      "the next round or gc-admin reset records a dead round's)"
                      if self.unfinished else ""))
        if self.unreadable:
            out.append(f"gc-admin: expire: cannot read {len(self.unreadable)} round "
                       "record(s): kept, with their journals (never removed unread; repair "
                       "or remove them by hand):")
            out.extend(short_lines([f"{u.key}: {u.why}" for u in self.unreadable]))
        return out


@dataclass(frozen=True)
class Unreadable:
    key: str
    why: str


def _round_of(key: str, prefix: str) -> str:
    return key[len(prefix):].partition("/")[0]


@dataclass
class ExpireProgress:
    """How far an `--apply` got: rounds (and orphaned marker sets) to remove, and removed
    so far; what a signal's line says (newuser11 M12: "interrupted by SIGINT" only, after
    3 of 21 rounds)."""

    planned: int = 0
    removed: int = 0
    # Objects removed so far (every request's, a failed batch's too), and those a failed
    # request may have removed (`DeleteResult.unknown`): what a failure's line says
    # (newuser21 X8: "failed: cannot remove ...: Permission denied", not whether anything
    # was removed).
    objects: int = 0
    maybe: int = 0

    def said(self) -> str:
        """What was removed, for a line that ends the command before it finished."""
        if not self.objects and not self.maybe:
            return "nothing was removed"
        return (f"{self.removed} of {self.planned} round(s) removed whole, {self.objects:,} "
                "object(s) in all" + (f" (and perhaps {self.maybe:,} more: their requests may "
                                      "have been applied)" if self.maybe else "")
                + "; a round cut short mid-way is finished by the next "
                "`gc-admin expire --apply`")


def expire_rounds(
    store: ObjectStore,
    now: float,
    older_than_s: float,
    keep_last: int = DEFAULT_KEEP_LAST,
    apply: bool = False,
    say: Callable[[str], None] | None = None,
    progress: ExpireProgress | None = None,
    before_removing: Callable[[], None] | None = None,
) -> ExpirePlan:
    """Plan (and with `apply`, carry out) the expiry. Raises StoreError on a failed request;
    what was removed before it stays removed (each step leaves a consistent store).
    `progress`: kept up to date while it removes. `before_removing`: called once the plan
    has something to remove, before the first removal (`gc-admin expire`'s check that
    the store takes a write)."""
    progress = progress if progress is not None else ExpireProgress()
    plan = ExpirePlan(apply, older_than_s, keep_last)
    listed, damaged = listed_records(store, ROUNDS_PREFIX)
    records = {_round_of(o.key, ROUNDS_PREFIX).removesuffix(".json"): o
               for o in store.list_all(ROUNDS_PREFIX) if o.key in listed
               and o.key.endswith(".json")}
    # A record that is no object (a link, a FIFO, a directory: i41y) cannot be read as
    # expired: named, and its round kept whole (journal and markers), as an unreadable one.
    plan.unreadable.extend(Unreadable(key, why) for key, why in sorted(damaged.items()))
    unread = {_round_of(key, ROUNDS_PREFIX).removesuffix(".json") for key in damaged}
    journals: dict[str, list[ObjectInfo]] = {}
    for o in store.list_all(JOURNAL_PREFIX):
        journals.setdefault(_round_of(o.key, JOURNAL_PREFIX), []).append(o)
    check_room(store)  # rounds that cannot be ordered are never expired (newuser3 N8)
    seq = markers(store)  # highest first
    by_round: dict[str, list[str]] = {}
    for m in seq:
        by_round.setdefault(m.round_id, []).append(m.key)
    top = seq[0].key if seq else None
    # each round's number, and every marker's info (their age, for orphans)
    fixed_infos = {o.key: o for o in store.list_all(ROUND_SEQ_PREFIX)}
    fixed = set(fixed_infos)
    ages = {o.key: o.mtime for o in store.list_all(SEQ_PREFIX)} | {
        k: o.mtime for k, o in fixed_infos.items()}
    for round_id, keys in by_round.items():
        # after its number's markers (`_remove_round` removes seq keys in this order);
        # kept with the highest marker
        if round_seq_key(round_id) in fixed and top not in keys:
            keys.append(round_seq_key(round_id))
    # the store's order (`sequence.round_order`): first the rounds whose marker was
    # removed by hand, later than every marked one by their own number and their start
    # (newuser4 F4: `--keep-last 1` would have removed the newest round), then the
    # markers' order with the rounds that could not claim a number placed in it (review
    # rev38z10 finding 5: they were taken for the oldest), then the rest by name
    order = round_order(store, {o.key for o in records.values()},
                        {o.key for o in records.values()}, seq,
                        {o.key: o.mtime for o in records.values()})
    recent = _last_that_ran(store, records, [
        tuple(_round_of(k, ROUNDS_PREFIX).removesuffix(".json") for k in group)
        for group in order.groups], keep_last)
    plan.kept_recent = len(recent)
    cutoff = now - older_than_s

    for round_id, entries in sorted(journals.items()):
        names = {o.key[len(JOURNAL_PREFIX) + len(round_id) + 1:] for o in entries}
        # With END and no record, its driver died between the two (or is writing the
        # record now): its journal is the only account of its deletions until recovery
        # copies the record from END. Kept, like one without END.
        if round_id not in records and START in names:
            plan.unfinished.append(round_id)

    doomed: list[tuple[str, list[ObjectInfo], ObjectInfo | None]] = []
    for round_id in sorted(set(records) | set(journals)):
        if round_id in plan.unfinished or round_id in unread:
            continue
        rec = records.get(round_id)
        if round_id in recent:
            if rec is not None:
                _readable(store, rec, plan)  # kept anyway; damage is said
            continue
        entries = journals.get(round_id, [])
        newest = rec.mtime if rec is not None else max((o.mtime for o in entries), default=now)
        if newest > cutoff:
            continue
        if rec is not None and not _readable(store, rec, plan):
            continue  # kept whole: its journal may be the only account of its deletions
        doomed.append((round_id, entries, rec))
        plan.rounds.append(round_id)
        plan.objects += len(entries) + (rec is not None) + len(
            [k for k in by_round.get(round_id, []) if k != top])
        plan.bytes += sum(o.size for o in entries) + (rec.size if rec is not None else 0)
    orphans = _orphans(by_round, fixed, set(records) | set(journals) | unread, top, ages,
                       cutoff)
    plan.orphans = sorted(orphans)
    plan.objects += sum(len(keys) for keys in orphans.values())
    if not apply:
        return plan
    progress.planned = len(doomed) + len(plan.orphans)
    if progress.planned and before_removing is not None:
        before_removing()
    for round_id, entries, rec in doomed:
        plan.removed += _remove_round(store, round_id, entries, rec,
                                      [k for k in by_round.get(round_id, []) if k != top],
                                      progress)
        progress.removed += 1
        if say is not None:
            say(f"gc-admin: expire: removed round {round_id}")
    for round_id in plan.orphans:
        if _has_round(store, round_id):  # its record or journal came meanwhile: kept
            progress.planned -= 1
            continue
        plan.removed += _delete(store, orphans[round_id], progress)
        progress.removed += 1
        if say is not None:
            say(f"gc-admin: expire: removed the sequence markers of round {round_id}")
    return plan


def _orphans(by_round: dict[str, list[str]], fixed: set[str], known: set[str],
             top: str | None, ages: dict[str, float], cutoff: float) -> dict[str, list[str]]:
    """The sequence markers of rounds with no record and no journal, older than `cutoff`,
    by round: its numbers (never `top`), then its per-round marker (`_remove_round`'s
    order: stopped between them, the per-round marker is an orphan still)."""
    out: dict[str, list[str]] = {}
    rounds = set(by_round) | {k[len(ROUND_SEQ_PREFIX):] for k in fixed}
    for round_id in sorted(rounds - known):
        holds_top = top is not None and top in by_round.get(round_id, [])
        keys = [k for k in by_round.get(round_id, []) if k != top]
        if not holds_top and round_seq_key(round_id) in fixed and (
                round_seq_key(round_id) not in keys):
            keys.append(round_seq_key(round_id))
        if keys and all(ages.get(k, cutoff + 1) <= cutoff for k in keys):
            out[round_id] = keys
    return out


def _has_round(store: ObjectStore, round_id: str) -> bool:
    """Whether the round has its record, START or END now (looked at again just before
    its markers are removed: a record-only round claims its number just before its PUT)."""
    base = f"{JOURNAL_PREFIX}{round_id}/"
    return any(store.head(k) is not None for k in (round_key(round_id), base + START,
                                                   base + END))


def _last_that_ran(store: ObjectStore, records: dict[str, ObjectInfo],
                   order: list[tuple[str, ...]], keep_last: int) -> set[str]:
    """The last `keep_last` rounds that ran, newest first in `order` (groups of rounds whose
    order among themselves is not known: a group the count reaches is kept whole, so no
    round that may be among the last is removed): a refusal (paused, lease held:
    `recordread.is_refusal`) is not one and expires by age alone (issue 41 F5:
    `--keep-last 1` kept a refusal and removed the last `done` rounds). A record that
    cannot be read among them is in the set (kept; `_readable` names it) but not counted:
    it is never removed anyway, and counted it left one fewer readable round than asked
    (newuser22 Y8: `--keep-last 1`, the newest record damaged, removed the last readable)."""
    ran: set[str] = set()
    counted = 0
    for group in order:
        if counted >= keep_last:
            break
        for round_id in group:
            try:
                refusal = is_refusal(read_round_record(store, records[round_id].key))
            except DamagedRecord:
                ran.add(round_id)
                continue
            if not refusal:
                ran.add(round_id)
                counted += 1
    return ran


def _readable(store: ObjectStore, rec: ObjectInfo, plan: ExpirePlan) -> bool:
    """Whether round record `rec` reads as one; if not, it is noted in `plan.unreadable`.
    A failed request (StoreError) propagates: the record may be fine. Read as `show` reads
    it (`read_round_record`: strict JSON and a round record's fields): newuser21 X4, a
    record `show` called "not a round record" was removed by age without a word, so the two
    commands disagreed on what cannot be read."""
    try:
        read_round_record(store, rec.key)
    except DamagedRecord as e:
        plan.unreadable.append(Unreadable(rec.key, e.why))
        return False
    return True


def _delete(store: ObjectStore, keys: Iterable[str],
            progress: ExpireProgress | None = None) -> int:
    keys = list(keys)
    n = 0
    for i in range(0, len(keys), MAX_DELETE_BATCH):
        chunk = keys[i:i + MAX_DELETE_BATCH]
        r = store.delete_batch(chunk)
        if r.errors:
            if progress is not None:  # the batch's other keys are gone (`DeleteResult`)
                progress.objects += len(chunk) - len(r.gone) - len(r.errors) - len(r.changed)
                progress.maybe += len(r.unknown)
            key, why = next(iter(r.errors.items()))
            raise StoreError(f"cannot remove {key}: {why}")
        n += len(chunk) - len(r.gone)
        if progress is not None:
            progress.objects += len(chunk) - len(r.gone)
    return n


def _remove_round(store: ObjectStore, round_id: str, entries: list[ObjectInfo],
                  rec: ObjectInfo | None, seq_keys: list[str],
                  progress: ExpireProgress | None = None) -> int:
    base = f"{JOURNAL_PREFIX}{round_id}/"
    last = {base + STOP, base + START, base + END}
    n = _delete(store, [o.key for o in entries if o.key not in last], progress)
    for name in (STOP, START, END):  # END last: never a START without END left behind
        if any(o.key == base + name for o in entries):
            n += _delete(store, [base + name], progress)
    if rec is not None:
        n += _delete(store, [rec.key], progress)
    return n + _delete(store, seq_keys, progress)
