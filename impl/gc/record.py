"""The deletion record: every round (dry or real, blocked, refused or failed) leaves one JSON
document in the store, like a table format's commit log entry (Iceberg snapshot summaries,
Delta's `_delta_log`): `_cluster/gc/rounds/<start time>-<id>.json`.

It says what the round decided from (M, snapshot revision, the reports it used and their
ages), what it found and did (counts), how it ended (outcome, exit code, error), and where
the manifest of the keys it actually deleted is (written by the executors after the M
re-read). Keys start with the round's start time on its own clock; the order of rounds is
the sequence number each record claims (`sequence.py`, issue 38 item 6), not the names.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from datetime import UTC, datetime
from typing import Any

from epochgc.impl.gc.sequence import SequenceError, claim, highest
from epochgc.impl.gc.summary import GcSummary
from epochgc.impl.store.base import ObjectStore, StoreError

ROUNDS_PREFIX = "_cluster/gc/rounds/"
FORMAT = 1


def new_round_id(started_at: float) -> str:
    """`<UTC start time>-<random>`: names the round's record and its journal."""
    t = datetime.fromtimestamp(started_at, UTC)
    stamp = t.strftime("%Y%m%dT%H%M%S") + f".{t.microsecond // 1000:03d}Z"
    return f"{stamp}-{uuid.uuid4().hex[:8]}"


def round_key(round_id: str) -> str:
    return f"{ROUNDS_PREFIX}{round_id}.json"


def iso_utc(t: float | None) -> str | None:
    """Unix seconds as ISO 8601 UTC (`2026-11-30T10:16:02.704070+00:00`): every time in a
    round's record and in the --json of `gc-admin pause` / `resume`."""
    return None if t is None else datetime.fromtimestamp(t, UTC).isoformat()


def record_document(s: GcSummary, options: dict[str, Any]) -> dict[str, Any]:
    return {
        "format": FORMAT,
        # Issue 38 item 6: the order of rounds (`sequence.py`), whatever their clocks said.
        "seq": s.seq,
        # Review rev38z10 finding 5: a round whose claim failed: the highest number the
        # store had handed out then, which places it (`sequence.round_order`); else null.
        "seq_after": s.seq_after,
        "started_at": iso_utc(s.started_at),
        "outcome": s.outcome,
        # None: a round recorded after its driver ended (`recorded_exit_code`).
        "exit_code": s.recorded_exit_code,
        # newuser14 R1: the signal the driver ended by (its exit code 128 + its number),
        # also after another stop (`interrupted` keeps that stop's reason); else null.
        "signal": s.signal,
        "dry_run": s.dry_run,
        "M": s.M,
        "snapshot_revision": s.revision,
        "blocked": s.blocked,
        "refused": s.refused,
        "failed_check": s.failed_check,
        "error": s.error,
        "interrupted": s.interrupted,
        "paused": s.paused,
        # Issue 41 F5: a refusal (paused, lease held) is recorded but is not a round that
        # ran: `recordread.is_refusal`.
        "refusal": None if s.refusal is None else s.refusal.value,
        "health": s.health,
        "safety_blocked": s.safety_blocked,
        "min_partition_epoch": s.min_partition_epoch,
        "max_deleted_epoch": s.max_deleted_epoch,
        "journal": s.journal,
        # Issue 38 item 2: entries of the journal that could not be read back (`deleted`
        # is then a lower bound), and whether it could be read back at all.
        "journal_unreadable": s.unreadable_entries,
        "journal_read": s.journal_read,
        # Issue 38 item 1: a dead round's record, written afterwards from its journal (by
        # whom, when); and the dead rounds this round recorded before it started.
        "recovered_by": s.recovered_by,
        "recovered_at": iso_utc(s.recovered_at),
        "recovered": s.recovered,
        "reports_used": s.reports_used,
        "stale_nodes": s.stale_nodes,
        # Issue 41 item 3: False: `listed`/`eligible` below are lower bounds.
        "listing_complete": s.listing_complete,
        "counts": {
            "listed": s.listed,
            "fetched": s.fetched,
            "eligible": s.eligible,
            "eligible_bytes": s.eligible_bytes,
            "deleted": s.deleted,
            "already_gone": s.already_gone,
            "changed": s.changed,
            "bytes_deleted": s.bytes_deleted,
            "errors": s.errors,
            # Review rev38q finding 1: keys whose fate the store could not tell (neither
            # deleted nor listed again for sure); `deleted` is then a lower bound.
            "unknown": s.unknown,
            # Review rev38v finding 3: keys (bytes) that left the store in batches whose
            # answer was lost or ambiguous, by the round's requests or another writer's: not
            # in `deleted`/`bytes_deleted` (what the round's answered requests removed).
            "gone_unattributed": s.gone_unattributed,
            "bytes_gone_unattributed": s.bytes_gone_unattributed,
            "skipped_too_new": s.skipped_too_new,
            "skipped_too_young": s.skipped_too_young,
            "malformed": s.malformed,
            "refused_entries": s.refused_entries,
            "list_requests": s.list_requests,
            "delete_requests": s.delete_requests,
        },
        "manifest": s.manifest,
        "samples": {
            "malformed": s.malformed_keys,
            "refused_entries": s.refused_samples,
            "errors": s.error_samples,
        },
        "options": options,
        "seconds": round(s.seconds, 3),
    }


def number_round(store: ObjectStore, s: GcSummary) -> None:
    """Claim the round's number in the store's sequence (`sequence.claim`) unless it has
    one; a store that cannot hand one out leaves it None (the record is still written)."""
    if s.seq is None:
        try:
            s.seq = claim(store, s.round_id, round_key(s.round_id))
        except (StoreError, SequenceError):
            # A round is refused before it deletes on a damaged sequence (`check_room`);
            # one damaged meanwhile leaves this record unnumbered, never a 21-digit number.
            s.seq = None
            # What places it among the numbered rounds (review rev38z10 finding 5): the
            # highest number handed out by now; unknown (null) if that cannot be read.
            with contextlib.suppress(StoreError, SequenceError):
                s.seq_after = highest(store)


def write_record(store: ObjectStore, s: GcSummary, options: dict[str, Any]) -> str:
    """Write the record (numbered first, `number_round`); returns its key. Raises
    StoreError (the caller decides)."""
    number_round(store, s)
    key = round_key(s.round_id)
    doc = record_document(s, options)
    store.put(key, json.dumps(doc, allow_nan=False, indent=1).encode())
    return key
