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

import json
from dataclasses import dataclass

from epochgc.impl.gc.errors import GcError, ReportError
from epochgc.impl.gc.reports import check_nesting
from epochgc.impl.gc.text import printable
from epochgc.impl.store.base import ObjectStore, StoreError

SEQ_PREFIX = "_cluster/gc/seq/"
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
    """The next number, taken for `round_id` (whose record is `record`). Raises StoreError
    if the store cannot create only-if-absent, or after _CLAIM_TRIES lost races;
    SequenceError if a key under the prefix is not a number or none is left."""
    doc = json.dumps({"round": round_id, "record": record}).encode()
    n = check_room(store) + 1
    for _ in range(_CLAIM_TRIES):
        if n > LAST:  # never a 21-digit key: it would order nowhere
            check_room(store)
        if store.put_if_absent(marker_key(n), doc):
            return n
        n += 1  # taken meanwhile by another round: the next one
    raise StoreError(f"could not claim a round number under {SEQ_PREFIX} "
                     f"({_CLAIM_TRIES} taken in a row)")


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
