"""What `epochgc gc-admin show` reads and how it prints it (issues 30, 38, 41).

`gc_state` reads every part independently (a part that cannot be read says why instead of
failing the rest); `render` prints it for people: ISO 8601 UTC times, durations, no Python
reprs, every store-supplied string escaped (`text.printable`). `--json` prints the state
itself (strict JSON).
"""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from typing import Any

from epochgc.impl.gc.admin import LeaseState, read_admin_state, read_lease
from epochgc.impl.gc.errors import ReportError
from epochgc.impl.gc.lease import LEASE_KEY
from epochgc.impl.gc.monitor import check_health
from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.gc.recordread import (
    DamagedRecord,
    is_refusal,
    listed_records,
    read_round_record,
)
from epochgc.impl.gc.recover import NO_JOURNAL, journal_started, recorded, unrecordable_line
from epochgc.impl.gc.reports import read_cluster_view
from epochgc.impl.gc.sequence import SequenceError, check_room, markers, round_order
from epochgc.impl.gc.summary import OUTCOME_DRIVER_GONE, SPARK_STOPPED
from epochgc.impl.gc.text import GONE_WHERE_SHORT, printable
from epochgc.impl.store.base import ObjectStore, StoreError
from epochgc.model.cluster import partition_epochs


def gc_state(store: ObjectStore, now: float, max_report_age_s: float,
             recovered: list[dict[str, Any]] | None = None,
             recovering: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """What `show` prints (`recovered`: the dead rounds it just recorded, if any;
    `recovering`: those it wrote STOP to, recorded after their bound by the next round or
    `gc-admin reset`)."""
    doc: dict[str, Any] = {"M": None, "blocked": None, "partition_epochs": {}}
    try:
        view = read_cluster_view(store, now, max_report_age_s)
        decision = view.gc_epoch()
        doc["M"], doc["blocked"] = decision.M, decision.blocked
        doc["partition_epochs"] = partition_epochs(list(view.partitions), view.counted())
    except (ReportError, StoreError) as e:
        doc["blocked"] = f"the reports cannot be read: {e}"
    doc["health"] = check_health(store, now, max_report_age_s).as_dict()
    state = read_admin_state(store)
    # The operator's --reason (or why the pause state is taken as paused), as `pause
    # --json` gives it; not the refusal sentence around it (newuser23 F5).
    doc["paused"] = state.paused
    doc["paused_reason"] = (state.reason or None) if state.paused else None
    doc["paused_by"] = state.by or None if state.paused else None
    doc["paused_at"] = state.at if state.paused else None
    doc["lease"] = read_lease(store, now).as_dict()
    doc["lease"]["journal_started"] = _journal_started(store, doc["lease"])
    doc["last_round"], doc["last_refusal"] = last_rounds(store)
    doc["recovered"] = recovered or []
    doc["recovering"] = recovering or []
    doc["now"] = now
    return doc


# How many records `last_rounds` reads back looking for a round that ran: refusals (a cron
# against a paused store) may pile up; past this many it says so.
SCAN_RECORDS = 100


def last_round(store: ObjectStore) -> dict[str, Any] | None:
    """The last round that ran (`last_rounds`)."""
    return last_rounds(store)[0]


def last_rounds(store: ObjectStore) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The record of the last round that ran, and of the last refusal if one came after
    it (issue 41 F5: a refused `gc`, paused or the lease held, became the "last round").
    Rounds in the store's sequence order (`sequence.round_order`: issue 38 item 6, record
    names come from each round's own clock; a round that could not claim a number placed
    by what is known of it, review rev38z10 finding 5), highest first; records from before
    numbering by name. A record that cannot be read counts as a round (named, never
    skipped). Rounds that ran whose order nothing tells are named, not one taken for the
    last."""
    refusal: dict[str, Any] | None = None
    scanned = 0
    try:
        readable, damaged = listed_records(store, ROUNDS_PREFIX)
        names = readable | set(damaged)
        if not names:
            return None, None
        check_room(store)  # a sequence that cannot order rounds is named, not used
        written = {o.key: o.mtime for o in store.list_all(ROUNDS_PREFIX)}
        order = round_order(store, names, readable, markers(store), written)
        for group in order.groups:
            if scanned >= SCAN_RECORDS:
                break
            scanned += len(group)
            ran: list[dict[str, Any]] = []
            refused: list[dict[str, Any]] = []
            for key in group:
                if key in damaged:  # a link, a FIFO (never opened), a directory: named
                    raise DamagedRecord(key, damaged[key])
                rec = {"key": key, **read_round_record(store, key)}
                (refused if is_refusal(rec) else ran).append(rec)
            if len(ran) > 1:
                return {"error": UNORDERED.format(", ".join(r["key"] for r in ran))}, refusal
            if ran:  # a refusal beside it may have come before it: not said to be after
                return ran[0], refusal
            refusal = refusal or (refused[0] if refused else None)
    except (DamagedRecord, SequenceError) as e:
        # Issue 41 F9: the damaged record is named, as every other damaged document is; a
        # damaged sequence too, rather than a last round taken from it (newuser3 N8).
        return {"error": str(e)}, refusal
    except (StoreError, ValueError) as e:
        return {"error": f"cannot read the round records: {e}"}, None
    if scanned >= SCAN_RECORDS and scanned < len(names):
        return {"error": f"no round that ran among the last {SCAN_RECORDS} records, all "
                         "refusals"}, refusal
    return None, refusal


# Rounds that ran that could not claim a number, and whose order nothing in the store tells
# (review rev38z10 finding 5: one of them was named the last round, wrongly).
UNORDERED = ("the last round cannot be told among {}: rounds that could not claim a number "
             "in the store's sequence, whose order nothing in the store tells")


# --- the human form ---


def iso(t: Any) -> str:
    """Unix seconds as ISO 8601 UTC to the second; anything else as given, escaped."""
    if isinstance(t, int | float) and not isinstance(t, bool):
        try:
            return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        except (ValueError, OverflowError, OSError):
            pass
    return printable(str(t))


def duration(seconds: float) -> str:
    """`1d 2h`, `3h 5m`, `4m 10s`, `12s`, `0.4s`: the two largest units."""
    if seconds < 10:
        return f"{seconds:.1f}s"
    s = round(seconds)
    parts = [(s // 86400, "d"), (s % 86400 // 3600, "h"), (s % 3600 // 60, "m"), (s % 60, "s")]
    shown = [f"{n}{u}" for n, u in parts if n][:2]
    return " ".join(shown) or "0s"


def _since(t: Any, now: float) -> str:
    if not (isinstance(t, int | float) and not isinstance(t, bool)):
        return iso(t)
    ago = now - t
    rel = f"{duration(ago)} ago" if ago >= 0 else f"in {duration(-ago)}"
    return f"{iso(t)} ({rel})"


def count_text(v: Any) -> str:
    """A count from the store: an integer with thousands separators, as `gc` prints its
    counts (newuser7: "deleted 3000 key(s)" beside gc's "3,000 deleted"); else `_text`."""
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return _text(v)


def _text(v: Any) -> str:
    """A store-supplied value, printable: strings escaped, None as "none", numbers as is;
    anything else (a list, an object) as compact JSON-ish text, never a Python repr."""
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int | float):
        return str(v)
    if isinstance(v, str):
        return printable(v)
    return printable(json.dumps(v, sort_keys=True, ensure_ascii=True, default=str))


def render(doc: dict[str, Any]) -> list[str]:
    now = float(doc["now"])
    out: list[str] = []
    if doc["M"] is not None:
        out.append(f"M: {doc['M']}")
    elif doc["blocked"]:
        out.append(f"M: none, GC is blocked: {_text(doc['blocked'])}")
    else:
        out.append("M: none, nothing collectible yet (no partition has a GC epoch)")
    if doc["M"] is not None and doc["blocked"]:
        out.append(f"  blocked: {_text(doc['blocked'])}")
    if doc["partition_epochs"]:
        out.append("partition GC epochs M(p):")
        for p, e in doc["partition_epochs"].items():
            out.append(f"  {_text(p)}: " + ("none (no fresh report)" if e is None else str(e)))
    h = doc["health"]
    out.append(f"health: {_text(h['state'])}")
    out.extend(f"  {_text(r)}" for r in h["reasons"])
    if doc["paused"]:
        by = f" by {_text(doc['paused_by'])}" if doc.get("paused_by") else ""
        at = f" since {_since(doc['paused_at'], now)}" if doc.get("paused_at") else ""
        why = _text(doc["paused_reason"]) if doc.get("paused_reason") else "no reason given"
        out.append(f"paused: yes{by}{at}: {why} (epochgc gc-admin start resumes it)")
    else:
        out.append("paused: no")
    out.append("lease: " + _lease_line(doc["lease"], now))
    for r in doc.get("recovered") or []:
        gone = r.get("gone_before") or "its end"
        out.append(f"recorded a dead round: {_text(r['round'])} (driver gone before "
                   f"{_text(gone)}): {_text(r.get('outcome') or OUTCOME_DRIVER_GONE)}, "
                   f"{count_text(r['deleted'])} key(s) deleted"
                   + (f", {count_text(r['unreadable'])} journal entr(ies) unreadable"
                      if r.get("unreadable") else "")
                   + (f", {count_text(r['unknown'])} key(s) of unknown fate"
                      if r.get("unknown") else "")
                   + (f", {count_text(r['gone_unattributed'])} more left the store "
                      f"{GONE_WHERE_SHORT}"
                      if r.get("gone_unattributed") else "")
                   + f" ({_text(r['record'])})")
    for r in doc.get("recovering") or []:
        out.append(f"dead round being recovered: {_text(r['round'])} (driver gone before its "
                   f"end): STOP written; recorded by the next round or `gc-admin reset` "
                   f"after {iso(r['record_after'])} (its tasks' {r['wait_s']:.0f} s "
                   "bound)")
    for r in doc.get("unrecordable") or []:
        out.append(unrecordable_line(DamagedRecord(r["key"], r["why"])))
    out.extend(_last_round_lines(doc["last_round"], now))
    out.extend(_last_refusal_lines(doc.get("last_refusal"), now))
    return out


def _last_refusal_lines(rec: dict[str, Any] | None, now: float) -> list[str]:
    """The last refusal after the last round that ran, apart (issue 41 F5)."""
    if rec is None:
        return []
    seq = f" (#{rec['seq']})" if isinstance(rec.get("seq"), int) else ""
    started = rec.get("started_at")
    if isinstance(started, str):
        with contextlib.suppress(ValueError):
            started = datetime.fromisoformat(started).timestamp()
    why = rec.get("paused") or rec.get("error") or rec.get("refusal")
    return [f"last refusal (not a round: nothing listed or deleted): {_text(rec.get('key'))}"
            f"{seq}, {_since(started, now)}, exit code {_text(rec.get('exit_code'))}: "
            f"{_text(why)}"]


FORCE_ADVICE = ("gc-admin reset --force removes it; a directory there is never removed: "
                "remove it by hand")


def _journal_started(store: ObjectStore, lease: dict[str, Any]) -> bool | None:
    """For a lease whose holder is known not to run: whether its round started its
    deletion journal (`recover.journal_started`) or has its record; None where not asked
    or not known."""
    holder = lease.get("holder") or {}
    round_id = holder.get("round")
    if lease.get("holder_running") is not False or not isinstance(round_id, str):
        return None
    try:
        return journal_started(store, round_id) or recorded(store, round_id)
    except StoreError:
        return None


def _lease_line(lease: dict[str, Any], now: float) -> str:
    state = LeaseState(lease["state"])
    if state is LeaseState.ABSENT:
        return "none (no round holds the store)"
    if state in (LeaseState.LIVE, LeaseState.EXPIRED):
        h = lease["holder"] or {}
        who = (f"round {_text(h.get('round'))} on host {_text(h.get('host'))} "
               f"pid {_text(h.get('pid'))}")
        if state is LeaseState.LIVE:
            line = (f"held by {who}, renewed {_since(h.get('renewed_at'), now)}, "
                    f"expires {_since(h.get('expires_at'), now)}")
            if lease.get("holder_running") is False and lease.get("journal_started") is False:
                # newuser14 R7: it promised "records the round" for a round killed in
                # Spark's start-up, which has no journal to record it from.
                line += (f"; holder pid {_text(h.get('pid'))} on this host is not running: "
                         f"the round ended without releasing it, {NO_JOURNAL}; "
                         "`gc-admin reset --force` removes the lease (or wait until it "
                         "expires)")
            elif lease.get("holder_running") is False:
                # Known gone (issue 41): spares the operator the wait or a blind --force.
                line += (f"; holder pid {_text(h.get('pid'))} on this host is not running: "
                         "the round ended without releasing it; `gc-admin reset --force` "
                         "removes the lease and records the round (or wait until it "
                         "expires)")
            return line
        if h.get("released_at") is not None:
            return f"free (last held by {who}, released {_since(h.get('released_at'), now)})"
        return (f"free (last held by {who}, expired {_since(h.get('expires_at'), now)} "
                "without being released: that round died or lost the store)")
    if state is LeaseState.UNREADABLE and lease.get("next_round_replaces"):
        # Issue 41 F5: `gc` takes an unreadable lease over (`Lease.acquire`), so `show` says
        # so rather than advise a reset the next round does not need. No round wrote it:
        # every lease write is whole (S3 PutObject is atomic; a local store writes aside,
        # then links or renames into place), and the takeover is conditional on the version
        # read, so a round that writes it meanwhile is never overwritten.
        return (f"{LEASE_KEY} cannot be read: {_text(lease['problem'])}; no round wrote it "
                "(a round writes its lease whole): the next round replaces it")
    what = "is not a regular object" if state is LeaseState.NOT_AN_OBJECT else "cannot be read"
    # Issue 41 F8: reset --force removes a link or an unreadable object, never a directory
    # (it may hold what is not garbage): the advice names both, as reset does.
    return (f"{LEASE_KEY} {what}: {_text(lease['problem'])} "
            f"({FORCE_ADVICE})")


# What a round recorded after its driver ended says of that end (newuser13 Q3).
# A round whose spark-submit JVM ended under it (`GcSummary.exit_unseen`).
UNSEEN_SUBMIT = ("spark-submit's: its JVM ended under the round, and how spark-submit exited "
                 "is not the driver's to see")
UNSEEN_END = ("its driver ended without writing the round's record: killed, its host lost, "
              "or it failed where it could not reach the store")


def _last_round_lines(last: dict[str, Any] | None, now: float) -> list[str]:
    if last is None:
        return ["last round: none recorded"]
    if "error" in last and "key" not in last:
        return [f"last round: {_text(last['error'])}"]
    given = last.get("counts")
    counts: dict[str, Any] = given if isinstance(given, dict) else {}
    seq = f" (#{last['seq']})" if isinstance(last.get("seq"), int) else ""
    out = [f"last round: {_text(last.get('key'))}{seq}"]
    code = last.get("exit_code")
    # newuser13 Q3: a round recorded after its driver ended has no exit code (null)
    out.append(f"  outcome: {_text(last.get('outcome'))}, exit code "
               + (f"{_text(code)}" if code is not None
                  else f"unknown ({UNSEEN_END})" if last.get("recovered_by")
                  else f"unknown ({UNSEEN_SUBMIT})" if last.get("interrupted") == SPARK_STOPPED
                  else _text(code))
               # newuser14 R1: a signal after another stop decided the exit code
               + (f" ({_text(last['signal'])} after the {_text(last.get('interrupted'))} "
                  "stop)" if isinstance(last.get("signal"), str)
                  and last.get("signal") != last.get("interrupted") else ""))
    started = last.get("started_at")
    if isinstance(started, str):
        with contextlib.suppress(ValueError):
            started = datetime.fromisoformat(started).timestamp()
    took = last.get("seconds")
    # A dead round's record is written afterwards from its journal: its seconds are the
    # journal's span (START to the last entry), not the round's run, which began before
    # Spark started and ended when its driver died, unseen (newuser3 N11: "took 9.0s" for
    # a round killed ~13 s after it started). recover.py measures it.
    span = "ran at least {} (its journal's first to last entry; its driver's end unseen)" \
        if last.get("recovered_by") else "took {}"
    out.append(f"  started {_since(started, now)}"
               + (f", {span.format(duration(took))}" if isinstance(took, int | float)
                  else ""))
    m = last.get("M")
    out.append("  M: " + ("none" if m is None else _text(m))
               + f", deleted {count_text(counts.get('deleted', 0))} key(s)"
               + f" ({count_text(counts.get('bytes_deleted', 0))} bytes), "
               f"errors {count_text(counts.get('errors', 0))}")
    if "listed" in counts:
        # Issue 41: a round stopped mid-listing counted only its finished tasks' listing.
        out.append(f"  listed {count_text(counts['listed'])} key(s), eligible "
                   f"{count_text(counts.get('eligible', 0))}"
                   + (" (partial: the round stopped before its listing finished)"
                      if last.get("listing_complete") is False else ""))
    for field, label in (("blocked", "blocked"), ("error", "error"), ("paused", "paused"),
                         ("interrupted", "interrupted"), ("recovered_by", "recorded by")):
        if last.get(field):
            out.append(f"  {label}: {_text(last[field])}")
    if last.get("journal_unreadable"):
        out.append(f"  journal entries unreadable: {count_text(last['journal_unreadable'])} "
                   "(deleted is a lower bound)")
    if counts.get("unknown"):
        # Review rev38q finding 1: keys whose fate the store could not tell.
        out.append(f"  keys of unknown fate: {count_text(counts['unknown'])} (the store could "
                   "not say whether they were deleted; deleted is a lower bound)")
    if counts.get("gone_unattributed"):
        # Review rev38v finding 3: found absent in batches no answer says it deleted.
        out.append(f"  left the store, not attributed: "
                   f"{count_text(counts['gone_unattributed'])} key(s) "
                   f"({count_text(counts.get('bytes_gone_unattributed', 0))} bytes) "
                   f"{GONE_WHERE_SHORT} (by this round's requests or another writer's; not "
                   "in deleted)")
    malformed = counts.get("malformed")
    if malformed:
        # newuser5 G7: a `--skip-malformed` round's malformed keys were not mentioned.
        given = last.get("samples")
        samples = given.get("malformed") if isinstance(given, dict) else None
        shown = [printable(k) for k in samples[:3] if isinstance(k, str)] \
            if isinstance(samples, list) else []
        out.append(f"  malformed keys: {count_text(malformed)} (never deleted)"
                   + (f", e.g. {', '.join(shown)}" if shown else ""))
    if last.get("journal"):
        out.append(f"  journal: {_text(last['journal'])}")
    return out


def json_safe(doc: Any) -> tuple[Any, list[str]]:
    """`doc` with every string UTF-8 cannot hold (lone surrogates: a non-UTF-8 key as a
    local store lists it, PEP 383) in its `printable` form, and the JSON Pointers (RFC
    6901) of those strings. newuser5 G7: `show --json` carried `bad\\udcff\\udcfename`,
    which strict consumers reject (RFC 8259 section 8.2: such a string's behaviour is
    unpredictable); the pointers say which strings are escaped, so a reader can tell a
    key's escape from the same characters in a key."""
    escaped: list[str] = []

    def walk(v: Any, at: str) -> Any:
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                escaped.append(at)
                return printable(v)
            return v
        if isinstance(v, dict):
            return {k: walk(x, f"{at}/{_pointer(str(k))}") for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x, f"{at}/{i}") for i, x in enumerate(v)]
        return v

    return walk(doc, ""), escaped


def _pointer(token: str) -> str:
    """One reference token of a JSON Pointer (RFC 6901 section 3: `~` as `~0`, `/` as
    `~1`)."""
    return token.replace("~", "~0").replace("/", "~1")
