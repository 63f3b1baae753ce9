"""A round's record read back, strictly: what `gc-admin show` prints and what `gc-admin
expire` must have read before it removes a round (issue 41: a record it cannot parse is
named and kept, never removed unread)."""

from __future__ import annotations

import json
from typing import Any

from epochgc.impl.gc.admin import load_strict
from epochgc.impl.store.base import ObjectStore

MAX_RECORD = 1 << 20  # bytes of a round record read back (a real one is a few KB)


class DamagedRecord(ValueError):
    """The record at `key` is not a JSON object this code can read; `why` says how."""

    def __init__(self, key: str, why: str) -> None:
        super().__init__(f"cannot read the round record {key}: {why}")
        self.key = key
        self.why = why


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
        raise DamagedRecord(key, f"not a JSON object (a JSON {type(rec).__name__})")
    return rec
