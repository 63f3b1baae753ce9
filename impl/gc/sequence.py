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
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from epochgc.impl.gc.errors import ReportError
from epochgc.impl.gc.reports import check_nesting
from epochgc.impl.store.base import ObjectStore, StoreError

SEQ_PREFIX = "_cluster/gc/seq/"
_WIDTH = 20
_CLAIM_TRIES = 64  # rounds finishing at the same moment; each try moves past one winner
_MAX_MARKER = 4096
# How many of the highest markers a claim reads for one naming its own round: the driver
# and a recovery of one round claim within minutes of each other, while no other round
# runs (the lease); only other dead rounds' recoveries claim meanwhile.
_REUSE_SCAN = 4


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


def highest(store: ObjectStore) -> int:
    """The highest number taken (0 if none). Keys list in order and have one width, so the
    last of the listing is the highest; anything else under the prefix is ignored."""
    top = 0
    for obj in store.list_all(SEQ_PREFIX):
        n = _number(obj.key)
        if n is not None and n > top:
            top = n
    return top


def claim(store: ObjectStore, round_id: str, record: str) -> int:
    """The next number, taken for `round_id` (whose record is `record`); the number
    already taken for it if one of the `_REUSE_SCAN` highest markers names it, or if the
    marker that beat us to a number does (review rev38n finding 1: a round recovered by
    mistake and its live driver, or two recoveries of one round, each claimed one). Raises
    StoreError if the store cannot create only-if-absent, or after _CLAIM_TRIES lost
    races."""
    doc = json.dumps({"round": round_id, "record": record}).encode()
    top = highest(store)
    for k in range(top, max(0, top - _REUSE_SCAN), -1):
        m = read_marker(store, marker_key(k))
        if m is not None and m.round_id == round_id:
            return k
    n = top + 1
    for _ in range(_CLAIM_TRIES):
        if store.put_if_absent(marker_key(n), doc):
            return n
        m = read_marker(store, marker_key(n))
        if m is not None and m.round_id == round_id:
            return n  # the other claimer recorded this same round
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
    """Every readable marker, highest number first."""
    found = [read_marker(store, o.key) for o in store.list_all(SEQ_PREFIX)
             if _number(o.key) is not None]
    return sorted((m for m in found if m is not None), key=lambda m: -m.seq)


def latest(store: ObjectStore) -> Marker | None:
    """The marker with the highest number that can be read (None if there is none)."""
    keys = sorted((o.key for o in store.list_all(SEQ_PREFIX) if _number(o.key) is not None),
                  reverse=True)
    for key in keys:
        m = read_marker(store, key)
        if m is not None:
            return m
    return None
