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

from epochgc.impl.gc.errors import GcError, ReportError
from epochgc.impl.gc.reports import check_nesting
from epochgc.impl.gc.text import printable
from epochgc.impl.store.base import ObjectStore, StoreError

SEQ_PREFIX = "_cluster/gc/seq/"
ROUND_SEQ_PREFIX = "_cluster/gc/seq-round/"
_WIDTH = 20
_CLAIM_TRIES = 64  # rounds finishing at the same moment; each try moves past one winner
_MAX_MARKER = 4096
LAST = 10**_WIDTH - 1  # the highest number a marker can name


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
    """The highest number taken, if a round may still claim the next one; SequenceError
    naming the marker when the sequence is at its end (a round would need a 21st digit)."""
    top = highest(store)
    if top >= LAST:
        raise SequenceError(
            f"{marker_key(top)}: the GC round sequence is at its end ({LAST} is the "
            f"highest {_WIDTH}-digit number); a round's record could not be numbered and "
            "ordered. A marker this high was not handed out by rounds: remove it by hand")
    return top


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


def round_number(store: ObjectStore, round_id: str) -> int | None:
    """The number fixed for `round_id` (None: none, or unreadable)."""
    key = round_seq_key(round_id)
    try:
        raw = store.get(key, 0, _MAX_MARKER)
        check_nesting(raw, key)
        doc = json.loads(raw)
    except (StoreError, ReportError, ValueError):
        return None
    seq = doc.get("seq") if isinstance(doc, dict) else None
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
        return None
    return seq if doc.get("round") == round_id else None


def read_marker(store: ObjectStore, key: str) -> Marker | None:
    """The marker at `key`; None if it is gone or unreadable."""
    n = _number(key)
    if n is None:
        return None
    try:
        raw = store.get(key, 0, _MAX_MARKER)
        check_nesting(raw, key)  # json would raise RecursionError past ~1000 deep
        doc = json.loads(raw)
    except (StoreError, ReportError, ValueError):
        return None
    if not (isinstance(doc, dict) and isinstance(doc.get("round"), str)
            and isinstance(doc.get("record"), str)):
        return None
    return Marker(n, doc["round"], doc["record"], key)


def markers(store: ObjectStore) -> list[Marker]:
    """Every readable marker, highest number first; SequenceError on a key that is not a
    round number."""
    found = [read_marker(store, key) for _n, key in sorted(numbers(store).items())]
    return sorted((m for m in found if m is not None), key=lambda m: -m.seq)


def latest(store: ObjectStore) -> Marker | None:
    """The marker with the highest number that can be read (None if there is none);
    SequenceError on a key that is not a round number."""
    for _n, key in sorted(numbers(store).items(), reverse=True):
        m = read_marker(store, key)
        if m is not None:
            return m
    return None
