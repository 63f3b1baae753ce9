"""The order of GC rounds, as the store hands it out (issue 38 item 6).

Round ids (and so record names) start with the round's UTC start time on the clock of the
host that ran it; after a clock step back, a later round's name sorts before an earlier
one's, and `gc-admin show` named the wrong last round. So every record claims the next
number of a sequence the store arbitrates: `_cluster/gc/seq/<20 digits>` created only if
absent (`ObjectStore.put_if_absent`: a hard link on a local store, `PutObject` with
`If-None-Match: *` on S3), after listing the highest taken. Two writers that list the same
highest both try the next number; exactly one creates it and the other moves on. The
numbers are claimed when records are written (a round's end), so "last" is the last round
to finish. A marker names its round and record (`{"round", "record"}`).

One round, one number: a round may be numbered by more than one writer (its driver and a
recovery that took it for dead; two recoveries at once). Each round's number is fixed by a
per-round marker, `_cluster/gc/seq-round/<round id>` (`{"round", "seq"}`), created only if
absent after the number's marker: the first to create it fixes the round's number, a
claimer that loses reads it back and removes the number marker it just created. A claim
reads that one key first, so its requests do not grow with the rounds before it (review
rev38o finding 2: the claim looked for its round among the 4 highest markers only, and two
recoveries of five dead rounds gave one a second number). It lives outside `seq/` so that
listing the numbers (`highest`) lists numbers only.

A store that cannot create only-if-absent (`StoreError`) gets records without a number;
`latest` then has nothing newer to offer and readers fall back to record names.

Every key under the prefix is exactly 20 ASCII digits, and the sequence ends at the highest
number 20 digits hold (newuser3 N8: after a marker `99999999999999999999` the next round
took a 21-digit number, which the readers skipped, so `gc-admin show` named an older round
as the last and `expire --keep-last 1` would have removed the newest). Anything else under
the prefix, or a sequence at its end, is a `SequenceError` naming the key: a round is
refused before it deletes, and `show`/`expire` refuse to order rounds by it. Numbers are
compared as integers, never as strings.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from epochgc.impl.gc.errors import GcError, ReportError
from epochgc.impl.gc.reports import MAX_STORED_INT, load_bounded
from epochgc.impl.gc.text import printable
from epochgc.impl.shortlist import short_list
from epochgc.impl.store.base import ObjectStore, StoreError

SEQ_PREFIX = "_cluster/gc/seq/"
ROUND_SEQ_PREFIX = "_cluster/gc/seq-round/"
_WIDTH = 20
_CLAIM_TRIES = 64  # rounds finishing at the same moment; each try moves past one winner
_MAX_MARKER = 4096
_MAX_RECORD = 1 << 20  # bytes of a round record read for its number
LAST = 10**_WIDTH - 1  # the highest number a marker can name
assert LAST <= MAX_STORED_INT  # a marker's number reads back (`reports.load_bounded`)


class SequenceError(GcError):
    """A key under `SEQ_PREFIX` that is not a round number, or a sequence at its end: the
    order of rounds cannot be told (or extended) safely. Names the key."""


@dataclass(frozen=True)
class Marker:
    seq: int
    round_id: str
    record: str
    key: str


def marker_key(seq: int) -> str:
    return f"{SEQ_PREFIX}{seq:0{_WIDTH}d}"


def round_seq_key(round_id: str) -> str:
    return f"{ROUND_SEQ_PREFIX}{round_id}"


def _number(key: str) -> int | None:
    tail = key[len(SEQ_PREFIX):]
    return int(tail) if len(tail) == _WIDTH and tail.isascii() and tail.isdigit() else None


def number_of(key: str) -> int:
    """The number a marker's key names; SequenceError for any other key under the prefix."""
    n = _number(key)
    if n is None:
        raise SequenceError(
            f"{printable(key)} is not a GC round number ({_WIDTH} digits 0-9 after "
            f"{SEQ_PREFIX}): the order of rounds cannot be told; remove it by hand "
            "(a damaged or foreign object)")
    return n


def numbers(store: ObjectStore) -> dict[int, str]:
    """Every marker's number and key; SequenceError on a key that is not a round number."""
    return {number_of(o.key): o.key for o in store.list_all(SEQ_PREFIX)}


def highest(store: ObjectStore) -> int:
    """The highest number taken (0 if none), compared as integers. SequenceError on a key
    that is not a round number."""
    return max(numbers(store), default=0)


def check_room(store: ObjectStore) -> int:
    """The highest number taken, if a round may still claim the next one. SequenceError
    naming the marker when the sequence is at its end (a round would need a 21st digit),
    or when its highest marker is far above the others and no round holds it (newuser4
    F4: a marker `...998` was accepted, the next round took the last number, and after
    the advice to remove the marker at the end `show` and `expire` misordered rounds)."""
    nums = sorted(numbers(store))
    if not nums:
        return 0
    top = nums[-1]
    below = nums[-2] if len(nums) > 1 else 0
    if top - below > MAX_JUMP and not _held(store, top):
        raise SequenceError(
            f"{marker_key(top)}: far above the other GC round numbers (the next below is "
            f"{below}; rounds hand them out one by one, {MAX_JUMP} apart at most) and no "
            f"round holds it (no {ROUND_SEQ_PREFIX}<round> names it): a damaged or foreign "
            "object, from which the next round's number would jump. Remove it by hand")
    if top >= LAST:
        raise SequenceError(_at_end(store, nums))
    return top


# Numbers are handed out one at a time; a gap comes from a claim that lost its round's
# number to another claimer (its marker removed) or from `gc-admin expire`, never this
# wide between the highest two markers.
MAX_JUMP = 1000


def _held(store: ObjectStore, n: int) -> bool:
    """Whether marker `n` is a round's: readable, and its round's number is `n`."""
    m = read_marker(store, marker_key(n))
    return m is not None and round_number(store, m.round_id) == n


def _at_end(store: ObjectStore, nums: list[int]) -> str:
    """The refusal of a sequence at its end, with what to remove: every marker above the
    last jump (none was handed out in order), and the per-round markers of the rounds that
    took numbers there (their records keep their own numbers, by which `show` and
    `expire` still order them: `newer_unmarked`)."""
    start = len(nums) - 1
    while start > 0 and nums[start] - nums[start - 1] <= MAX_JUMP:
        start -= 1
    above = nums[start:]
    keys = [marker_key(n) for n in above]
    rounds = [m.round_id for m in (read_marker(store, k) for k in keys) if m is not None]
    held = [round_seq_key(r) for r in rounds if round_number(store, r) in above]
    # the first five of each kind, then how many more of both
    named = short_list([*keys[:5], *held[:5], *keys[5:], *held[5:]],
                       len(keys[:5]) + len(held[:5]))
    return (f"{marker_key(nums[-1])}: the GC round sequence is at its end ({LAST} is the "
            f"highest {_WIDTH}-digit number); a round's record could not be numbered and "
            f"ordered. Numbers this high were not handed out in order: remove by hand "
            f"{named} (every key under "
            f"{SEQ_PREFIX} from {marker_key(above[0])} up, and the {ROUND_SEQ_PREFIX} "
            "markers of the rounds that hold them); their records keep their own numbers")


def claim(store: ObjectStore, round_id: str, record: str) -> int:
    """The round's number: the one fixed for `round_id` already (its per-round marker),
    else the next free number, fixed for it by creating the per-round marker; if another
    claimer of the same round fixed one first, that one (and ours is removed). Raises
    StoreError if the store cannot create only-if-absent, or after _CLAIM_TRIES lost
    races; SequenceError if a key under the prefix is not a number or none is left."""
    fixed = round_number(store, round_id)
    if fixed is not None:
        return fixed
    doc = json.dumps({"round": round_id, "record": record}).encode()
    n = check_room(store) + 1
    for _ in range(_CLAIM_TRIES):
        if n > LAST:  # never a 21-digit key: it would order nowhere
            check_room(store)
        version = store.create_if_absent(marker_key(n), doc)
        if version is not None:
            return _fix(store, round_id, n, version)
        m = read_marker(store, marker_key(n))
        if m is not None and m.round_id == round_id:
            return _fix(store, round_id, n, None)  # the other claimer's, for this round
        n += 1  # taken meanwhile by another round: the next one
    raise StoreError(f"could not claim a round number under {SEQ_PREFIX} "
                     f"({_CLAIM_TRIES} taken in a row)")


def _fix(store: ObjectStore, round_id: str, n: int, version: str | None) -> int:
    """Fix `n` as the round's number unless another claimer fixed one first: then theirs,
    and our marker `n` (`version`: created by us; None: not ours, left) is removed, only if
    it is still ours, so that no number names the round twice."""
    doc = json.dumps({"round": round_id, "seq": n}).encode()
    if store.put_if_absent(round_seq_key(round_id), doc):
        return n
    theirs = round_number(store, round_id)
    if theirs is None or theirs == n:
        return n  # unreadable (damaged): ours stands, as before per-round markers
    if version is not None:
        with contextlib.suppress(StoreError):  # left: a second number, not a false record
            store.delete_if_match(marker_key(n), version)
    return theirs


def _read_small(store: ObjectStore, key: str, limit: int) -> Any:
    """The JSON document at `key` (at most `limit` bytes read); None if it is gone or
    cannot be read or parsed."""
    try:
        raw = store.get(key, 0, limit)
        return load_bounded(raw, key)  # nesting and numbers bounded (reports.load_bounded)
    except (StoreError, ReportError, ValueError):
        return None


def _seq(doc: Any) -> int | None:
    """A document's `seq` if it is a round number (an int >= 1, not a bool)."""
    seq = doc.get("seq") if isinstance(doc, dict) else None
    return seq if isinstance(seq, int) and not isinstance(seq, bool) and seq >= 1 else None


def round_number(store: ObjectStore, round_id: str) -> int | None:
    """The number fixed for `round_id` (None: none, or unreadable)."""
    doc = _read_small(store, round_seq_key(round_id), _MAX_MARKER)
    seq = _seq(doc)
    return seq if seq is not None and doc.get("round") == round_id else None


def read_marker(store: ObjectStore, key: str) -> Marker | None:
    """The marker at `key`; None if it is gone or unreadable."""
    n = _number(key)
    if n is None:
        return None
    doc = _read_small(store, key, _MAX_MARKER)
    if not (isinstance(doc, dict) and isinstance(doc.get("round"), str)
            and isinstance(doc.get("record"), str)):
        return None
    return Marker(n, doc["round"], doc["record"], key)


def markers(store: ObjectStore) -> list[Marker]:
    """Every readable marker, highest number first; SequenceError on a key that is not a
    round number."""
    found = [read_marker(store, key) for _n, key in sorted(numbers(store).items())]
    return sorted((m for m in found if m is not None), key=lambda m: -m.seq)


def record_number(store: ObjectStore, record: str) -> int | None:
    """The number a round's record carries (its `seq`), None if it has none or cannot be
    read."""
    return _seq(_read_small(store, record, _MAX_RECORD))


def newer_unmarked(store: ObjectStore, records: set[str], marks: list[Marker]) -> list[str]:
    """The records (keys) whose round holds no marker (of `marks`, `markers(store)`) and
    that are later than the highest marker with a record by BOTH their own number and
    their start time (their name: a round id begins with its start time), newest first.
    Such a round lost its marker by hand (newuser4 F4: after the advice to remove the
    marker at the end, `show` named an older round as the last and `expire --keep-last 1`
    would have removed the newest). When the two disagree the store's marker order
    stands (a clock step back makes later rounds' names sort earlier: issue 38 item 6);
    a record with no number is never taken for newer."""
    marked = {m.record for m in marks}
    top = next((m for m in marks if m.record in records), None)
    found: list[tuple[int, str]] = []
    for key in sorted(records - marked, reverse=True):
        if top is not None and key <= top.record:
            break  # started no later than the top's round: its number cannot count
        n = record_number(store, key)
        if n is not None and (top is None or n > top.seq):
            found.append((n, key))
    return [key for _n, key in sorted(found, reverse=True)]


def claim_failed_after(doc: Any) -> int | None:
    """A record's `seq_after` (the highest number the store had handed out when its claim
    failed: `record.number_round`) if it is one (an int 0..LAST, not a bool)."""
    v = doc.get("seq_after") if isinstance(doc, dict) else None
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= LAST else None


@dataclass(frozen=True)
class RoundOrder:
    """Records (keys) newest first, in groups: the members of one group are rounds whose
    order among themselves nothing in the store tells (a group of one is placed)."""

    groups: tuple[tuple[str, ...], ...]

    def keys(self) -> list[str]:
        return [key for group in self.groups for key in group]


def round_order(store: ObjectStore, names: set[str], readable: set[str], marks: list[Marker],
                written: dict[str, float]) -> RoundOrder:
    """The order of the round records `names` (`readable`: those that read as objects;
    `marks`: `markers(store)`; `written`: each record's write time on the store's clock,
    its listing's mtime), newest first.

    First the rounds whose marker was removed by hand, later than every marked one by their
    own number and their start (`newer_unmarked`, newuser4 F4); then the store's marker
    order, with each record that holds no number placed into it by what is known of it
    (review rev38z10 finding 5: a round whose claim failed once, a 503 past the client's
    retries, was placed below every numbered round, and `gc-admin show` named the round
    before it as the last):
    - its `seq_after`, the highest number handed out when its claim failed: after that
      round, before the next (`record.number_round`; exact, whatever the clocks); rounds
      with one `seq_after` (claims failing round after round) ordered among themselves by
      their records' write times on the store's clock, as below, in whole seconds (review
      rev38z12 finding 5: they were one group however far apart);
    - a `seq_after` above every number the store lists, or naming a marker the store wrote
      in a later second than the record, is damage (review rev38z12 finding 4: a bit
      flipped, 1 -> 9, made the round the last for `show` and `expire`): such a record is
      not placed (with the last, below);
    - else (written before records said it) its record's write time against the markers'
      on the store's clock (S3: LastModified, set by the server, whole seconds in its
      headers, RFC 9110 5.6.7; a local store: the file's mtime, its host's clock): after
      every marker written in an earlier second, grouped with one written in the same
      second (their order is not known);
    - else (no marker at all: a store that never numbered) by name, as before numbering.
    Last, by name, the records from before numbering (no `seq` field), those whose own
    number stands against the markers, those whose `seq_after` is damaged, and those that
    cannot be read."""
    top = newer_unmarked(store, readable, marks)
    marked = {m.record for m in marks if m.record in names}
    # (position among the markers' numbers, write second within it): one group per place
    placed: list[tuple[tuple[float, int], str]] = [((float(m.seq), 0), m.record)
                                                   for m in marks if m.record in marked]
    bottom: list[str] = []
    seconds: dict[int, int] | None = None  # marker number -> its write second, when needed
    for key in sorted(names - set(top) - marked, reverse=True):
        doc = _read_small(store, key, _MAX_RECORD) if key in readable and marks else None
        if not (isinstance(doc, dict) and "seq" in doc and doc["seq"] is None):
            bottom.append(key)
            continue
        if key not in written:  # gone since it was listed: nothing to place it by
            bottom.append(key)
            continue
        if seconds is None:
            seconds = {number_of(o.key): int(o.mtime) for o in store.list_all(SEQ_PREFIX)}
        at = int(written[key])
        after = claim_failed_after(doc)
        if after is not None:
            if after > max(seconds, default=0) or seconds.get(after, at) > at:
                bottom.append(key)  # damaged: no number this high, or not yet then
            else:
                placed.append(((after + 0.5, at), key))
            continue
        same = [n for n, t in seconds.items() if t == at]
        placed.append(((float(max(same)), 0), key) if same else (
            (max((n for n, t in seconds.items() if t < at), default=0) + 0.5, at), key))
    groups: list[tuple[str, ...]] = [(key,) for key in top]
    for _pos, members in groupby(sorted(placed, reverse=True), key=lambda p: p[0]):
        groups.append(tuple(key for _p, key in members))
    groups.extend((key,) for key in bottom)
    return RoundOrder(tuple(groups))


def latest(store: ObjectStore) -> Marker | None:
    """The marker with the highest number that can be read (None if there is none);
    SequenceError on a key that is not a round number."""
    for _n, key in sorted(numbers(store).items(), reverse=True):
        m = read_marker(store, key)
        if m is not None:
            return m
    return None
