"""A round's record read back, strictly: what `gc-admin show` prints and what `gc-admin
expire` must have read before it removes a round (issue 41: a record it cannot parse is
named and kept, never removed unread)."""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

from epochgc.impl.gc.admin import load_strict
from epochgc.impl.gc.summary import SPARK_STOPPED
from epochgc.impl.gc.text import json_kind
from epochgc.impl.store.base import ObjectStore

MAX_RECORD = 1 << 20  # bytes of a round record read back (a real one is a few KB)


class DamagedRecord(ValueError):
    """The record at `key` is not a JSON object this code can read; `why` says how."""

    def __init__(self, key: str, why: str) -> None:
        super().__init__(f"cannot read the round record {key}: {why}")
        self.key = key
        self.why = why


def listed_records(store: ObjectStore, prefix: str) -> tuple[set[str], dict[str, str]]:
    """The objects under `prefix` (round records), and the entries there that are no
    object a record can be read from, by key (a directory's without its '/'), with why:
    what a local store refuses to list (a symbolic link, a FIFO or other special file, a
    directory; `LocalStore`'s page `refused`). i41y: such a record was not listed at all,
    so `show` said "none recorded" and `expire` passed it by in silence."""
    names: set[str] = set()
    refused: dict[str, str] = {}
    start: str | None = None
    while True:
        page = store.list_page(prefix, start)
        names.update(o.key for o in page.objects)
        refused.update((key.rstrip("/"), why) for key, why in page.refused)
        if not page.truncated or not page.objects:
            return names, refused
        start = page.objects[-1].key


def read_record(store: ObjectStore, key: str) -> dict[str, Any]:
    """The record at `key`; DamagedRecord if its bytes are not one strict JSON object (a
    StoreError, a failed request, propagates: the record may be fine)."""
    raw = store.get(key, 0, MAX_RECORD + 1)
    try:
        # RFC 8259 section 8.1: JSON exchanged between systems MUST be UTF-8; json.loads
        # would guess UTF-16/32 from the first bytes (issue 41 F9: "'utf-16-le' codec ...").
        raw.decode("utf-8")
        rec = load_strict(raw, key, MAX_RECORD)
    except UnicodeDecodeError as e:
        raise DamagedRecord(key, f"not UTF-8 ({e.reason} at byte {e.start})") from None
    except ValueError as e:
        what = "not valid JSON: " if isinstance(e, json.JSONDecodeError) else ""
        raise DamagedRecord(key, f"{what}{e}") from None
    if not isinstance(rec, dict):
        raise DamagedRecord(key, f"not a JSON object (a JSON {json_kind(rec)})")
    return rec


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_time(v: object) -> bool:
    """Unix seconds (finite) or an ISO 8601 text (`record.py` writes the latter)."""
    if isinstance(v, str):
        try:
            datetime.fromisoformat(v)
        except ValueError:
            return False
        return True
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


# The fields `gc-admin show` prints, each with what it must be (`record.py` writes them);
# a field marked required is in every record this code has ever written.
_TEXT_OR_NONE = ("blocked", "error", "paused", "interrupted", "recovered_by", "journal",
                 "refusal", "signal")
_COUNTS = ("deleted", "bytes_deleted", "errors", "listed", "eligible", "gone_unattributed",
           "bytes_gone_unattributed")


def shape_problem(rec: dict[str, Any]) -> str | None:
    """What is wrong with the shape of a round record's printed fields, or None: newuser3
    N9, `{}`, `{"outcome": 5, "started": "abc"}` or `{"counts": {"deleted": "lots"}}` were
    shown as rounds ("started None", "deleted lots key(s)")."""
    if not isinstance(rec.get("outcome"), str):
        return "field outcome is missing or not a text"
    code = rec.get("exit_code")
    # null: a round recorded after its driver ended, how not known (newuser13 Q3), or one
    # whose spark-submit JVM ended under it (its exit code is spark-submit's, unseen)
    if not (_is_int(code) or (code is None and "exit_code" in rec
                              and (isinstance(rec.get("recovered_by"), str)
                                   or rec.get("interrupted") == SPARK_STOPPED))):
        return "field exit_code is missing or not an integer"
    if not _is_time(rec.get("started_at")):
        return "field started_at is missing or not a time"
    counts = rec.get("counts")
    if not isinstance(counts, dict):
        return "field counts is missing or not an object"
    for name in _COUNTS:
        if name in counts and not (_is_int(counts[name]) and counts[name] >= 0):
            return f"field counts.{name} is not a count"
    if rec.get("M") is not None and not _is_int(rec["M"]):
        return "field M is not an epoch (an integer or null)"
    if rec.get("seq") is not None and not (_is_int(rec["seq"]) and rec["seq"] > 0):
        return "field seq is not a round number"
    seconds = rec.get("seconds")
    if seconds is not None and not (_is_time(seconds) and not isinstance(seconds, str)
                                    and seconds >= 0):
        return "field seconds is not a duration"
    for name in _TEXT_OR_NONE:
        if rec.get(name) is not None and not isinstance(rec[name], str):
            return f"field {name} is not a text"
    unreadable = rec.get("journal_unreadable")
    if unreadable is not None and not (_is_int(unreadable) and unreadable >= 0):
        return "field journal_unreadable is not a count"
    if rec.get("listing_complete") not in (None, True, False):
        return "field listing_complete is not true, false or null"
    return None


def read_round_record(store: ObjectStore, key: str) -> dict[str, Any]:
    """`read_record`, and the record has the shape of a round record (`shape_problem`);
    DamagedRecord names what is wrong."""
    rec = read_record(store, key)
    problem = shape_problem(rec)
    if problem is not None:
        raise DamagedRecord(key, f"not a round record ({problem})")
    return rec


def is_refusal(rec: dict[str, Any]) -> bool:
    """Whether a round record is a refusal, not a round that ran (issue 41 F5): its
    `refusal` (`summary.Refusal`: paused, lease), or, in a record from before that field,
    the outcome `paused` (a lease refusal was then an `error` like any failure: counted as
    a round)."""
    if rec.get("refusal") is not None:
        return True
    return "refusal" not in rec and rec.get("outcome") == "paused"
