"""A round's START and END read back from its journal (`recover.py`): one validating parser
each, so no field of either reaches a wait, a sum or a record unchecked (review rev38z10
findings 1 and 8).

START: a recovery reads its bound (`stop_within_s`), where its tasks ran (`driver_tree`),
its M, snapshot revision and options (copied into the dead round's record). `json.loads`
reads NaN, Infinity and 1e400 (as inf), which the record's strict `json.dumps` refuses: a
START whose options held one raised `ValueError` out of every recovery, so every round,
`gc-admin show` and `gc-admin reset` failed with it. Each field is checked on its own: a
damaged one is dropped and named (`Start.problem`; the record counts START among its
unreadable entries), the others still serve (its bound above all: a START whose options are
damaged still says how long its tasks may send).

END: the driver's own account, copied as the dead round's record when its driver died
between END and record. It is one only if it is strict JSON (`admin.load_strict`) with
the shape of a round record (`recordread.shape_problem`) and fits in a record
(`recordread.MAX_RECORD`); anything else is damaged (`DamagedEnd`): the round is read back
from its journal instead, as a round without END, and the record names the damaged END.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from epochgc.impl.gc.admin import load_strict
from epochgc.impl.gc.errors import ReportError
from epochgc.impl.gc.recordread import MAX_RECORD, shape_problem
from epochgc.impl.gc.reports import load_bounded
from epochgc.impl.gc.text import cut
from epochgc.impl.store.base import ObjectStore, StoreError
from epochgc.model.keys import MAX_EPOCH

MAX_DOC = 1 << 20  # bytes of a START or END read back (a real one is a few KB)
# Bytes of a START's options copied into a record at most (`GcOptions` as a dict is under
# 2 KB): the record stays well under `MAX_RECORD` (review rev38z10 finding 4).
MAX_OPTIONS = 64 << 10


@dataclass(frozen=True)
class Start:
    """A round's START as read back. `doc`: the document (None: none could be read, then a
    recovery waits the longest bound); `m`, `revision`: its M and snapshot revision, None
    if absent or not an epoch or revision; `options`: its options if they are an object of
    strict JSON within `MAX_OPTIONS` bytes, else {}; `problem`: what was damaged, if
    anything (the record counts START unreadable and says why)."""

    doc: dict[str, Any] | None
    m: int | None = None
    revision: int | None = None
    options: dict[str, Any] | None = None
    problem: str | None = None

    def options_or_none(self) -> dict[str, Any]:
        return self.options if self.options is not None else {}


def _count_or_none(doc: dict[str, Any], name: str, most: int,
                   problems: list[str]) -> int | None:
    """Field `name`: an integer from 0 to `most`, or None (absent, or damaged: named)."""
    v = doc.get(name)
    if v is None:
        return None
    if type(v) is int and 0 <= v <= most:
        return v
    problems.append(f"field {name} is not an integer from 0 to {most}")
    return None


def parse_start(raw: bytes, key: str) -> Start:
    """START's bytes, checked field by field (module docstring)."""
    if len(raw) > MAX_DOC:
        return Start(None, problem=f"larger than {MAX_DOC} bytes")
    try:
        doc = load_bounded(raw, key)  # nesting and numbers bounded (reports.load_bounded)
    except (ReportError, ValueError) as e:
        return Start(None, problem=cut(str(e).removeprefix(f"{key}: ")))
    if not isinstance(doc, dict):
        return Start(None, problem="not a JSON object")
    problems: list[str] = []
    m = _count_or_none(doc, "M", MAX_EPOCH, problems)
    revision = _count_or_none(doc, "snapshot_revision", (1 << 63) - 1, problems)
    options = doc.get("options")
    if options is not None:
        try:
            if not isinstance(options, dict):
                raise ValueError("not a JSON object")
            # What the record's own dump will do: NaN, Infinity, 1e400 (inf) refused.
            size = len(json.dumps(options, allow_nan=False, indent=1))
            if size > MAX_OPTIONS:
                raise ValueError(f"{size:,} bytes, more than {MAX_OPTIONS:,}")
        except ValueError as e:
            problems.append(f"field options is damaged ({cut(str(e))}): not copied")
            options = None
    return Start(doc, m, revision, options, "; ".join(problems) or None)


def read_start(store: ObjectStore, key: str) -> Start:
    """The START at `key` (`parse_start`); one that cannot be read, `Start(None)`."""
    try:
        raw = store.get(key, 0, MAX_DOC + 1)
    except StoreError as e:
        return Start(None, problem=f"cannot be read: {cut(str(e))}")
    return parse_start(raw, key)


class DamagedEnd(ValueError):
    """An END that is no round record; `why` says how."""

    def __init__(self, key: str, why: str) -> None:
        super().__init__(f"{key}: not a round record: {why}")
        self.key = key
        self.why = why


@dataclass(frozen=True)
class End:
    """A round's END that is a round record: `doc`, and `data`, the bytes its record is
    written with (strict JSON, at most `MAX_RECORD`)."""

    doc: dict[str, Any]
    data: bytes


def parse_end(raw: bytes, key: str) -> End:
    """END's bytes as a round record, or DamagedEnd (module docstring)."""
    try:
        doc = load_strict(raw, key, MAX_DOC)
    except ValueError as e:
        raise DamagedEnd(key, cut(str(e))) from None
    if not isinstance(doc, dict):
        raise DamagedEnd(key, "not a JSON object")
    problem = shape_problem(doc)
    if problem is not None:
        raise DamagedEnd(key, problem)
    data = json.dumps(doc, allow_nan=False, indent=1).encode()
    if len(data) > MAX_RECORD:
        raise DamagedEnd(key, f"larger than a record may be ({MAX_RECORD} bytes)")
    return End(doc, data)


def read_end(store: ObjectStore, key: str) -> End | DamagedEnd | None:
    """The END at `key`; None if there is none or it cannot be read now (a store error: the
    next look tries again); DamagedEnd (returned, not raised) if it is no round record."""
    try:
        raw = store.get(key, 0, MAX_DOC + 1)
    except StoreError:
        return None
    try:
        return parse_end(raw, key)
    except DamagedEnd as e:
        return e
