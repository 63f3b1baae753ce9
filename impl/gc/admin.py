"""GC administration state in the store (issue 30): paused or running, and the operations of
`epochgc gc-admin` (pause, start, reset, show).

`_cluster/gc/admin.json` = {"paused": bool, "reason": str, "by": str, "at": unix_seconds,
"token": str} (the token names the change that wrote it: `change_admin_state`; readers
ignore it). Every write is conditional on the version read (`change_admin_state`).
Absent means running (a new store). Every round reads it before it starts and its driver
polls it while it runs: a paused store refuses new rounds and stops running ones at their
next delete batch (as SIGTERM does). Failing closed: a document that exists but cannot be
read or parsed counts as paused, naming why.
"""

from __future__ import annotations

import enum
import json
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from epochgc.impl.gc.errors import ReportError
from epochgc.impl.gc.lease import DEAD_HOLDER, LEASE_KEY, holder_running, taken_over
from epochgc.impl.gc.lease import live as lease_live
from epochgc.impl.gc.reports import finite_float, load_bounded
from epochgc.impl.store.base import (
    ConditionalConflict,
    NoConditionalWrites,
    NotAnObject,
    ObjectInfo,
    ObjectStore,
    Outcome,
    StoreError,
)

ADMIN_KEY = "_cluster/gc/admin.json"
_MAX_BYTES = 4096
# A pause reason is cut to this many bytes (as a JSON string) when written, so the document
# always reads back within _MAX_BYTES (issue 30 review: a longer one was written, then
# read as malformed, its reason and author lost).
MAX_REASON_BYTES = 2048
_CUT = " [cut]"


@dataclass(frozen=True)
class AdminState:
    paused: bool
    reason: str = ""
    by: str = ""
    at: float | None = None

    def why(self) -> str:
        """The refusal line of a paused store."""
        who = f" by {self.by}" if self.by else ""
        return f"GC is paused on this store{who}: {self.reason or 'no reason given'} " \
               "(epochgc gc-admin start resumes it)"


class _Missing(Exception):
    """No entry at all at the key (head and get agree)."""


def _read_entry(store: ObjectStore, key: str) -> tuple[ObjectInfo | None, bytes]:
    """The object at `key`: its info (None if it appeared between head and get) and up to
    _MAX_BYTES + 1 bytes. _Missing if there is nothing there; NotAnObject if a link, a
    directory or a special file is there (`head` says None for those too: absent is only
    believed once `get` agrees); StoreError if it cannot be read."""
    info = store.head(key)
    if info is None:
        try:
            raw = store.get(key, 0, _MAX_BYTES + 1)
        except NotAnObject:
            raise
        except StoreError:
            raise _Missing(key) from None  # head said absent; get found nothing hidden
        return None, raw
    return info, store.get(key, 0, _MAX_BYTES + 1)


def _unique_names(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for k, v in pairs:
        if k in doc:  # json keeps the last, other readers the first: ambiguous
            raise ValueError(f"field {k!r} is given twice in one object")
        doc[k] = v
    return doc


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def load_strict(raw: bytes, key: str, limit: int = _MAX_BYTES) -> Any:
    """The JSON document `raw` (object `key`), or ValueError saying what is wrong: larger
    than `limit` bytes, not UTF-8, nested deeper than the reports' limit (json would raise
    RecursionError), a name given twice in one object, NaN/Infinity or a number out of
    range (so what it returns always dumps as strict JSON)."""
    if len(raw) > limit:
        raise ValueError(f"larger than {limit} bytes")
    try:
        # RFC 8259 section 8.1: JSON exchanged between systems MUST be UTF-8; json.loads
        # guesses UTF-16/32 from the first bytes, and `\xff\xfe` (a UTF-16 byte order
        # mark) read as an empty text was "Expecting value: line 1 column 1" (issue 41 F5).
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"not UTF-8 ({e.reason} at byte {e.start})") from None
    try:
        # integers bounded there (review rev38z12 finding 1: one of 401 digits)
        return load_bounded(raw, key, object_pairs_hook=_unique_names,
                            parse_constant=_no_constant, parse_float=finite_float)
    except ReportError as e:
        raise ValueError(str(e).removeprefix(f"{key}: ")) from None


def _read_admin(store: ObjectStore) -> bytes | None:
    """The pause state's bytes, None if there is none. One request where the store reads
    with a version (`get_versioned`: S3's GetObject answers 404 for an absent key, a local
    store opens the file once and refuses a link, a directory or a special file), where
    `_read_entry` takes two (a HEAD, then a GET); issue 38: the in-round watch reads it
    every look, and on S3 each read is a round trip of the round's request count."""
    try:
        got = store.get_versioned(ADMIN_KEY, _MAX_BYTES + 1)
    except NoConditionalWrites:  # a store that cannot: head, then get
        try:
            return _read_entry(store, ADMIN_KEY)[1]
        except _Missing:
            return None
    return None if got is None else got.data


def read_admin_state(store: ObjectStore) -> AdminState:
    """The store's GC state; absent = running; unreadable, malformed or not a regular
    object (a link, a directory, a special file) = paused (fail closed), with the problem
    as the reason."""
    try:
        raw = _read_admin(store)
        if raw is None:
            return AdminState(paused=False)
    except NotAnObject as e:
        return _not_an_object(e)
    except StoreError as e:
        return AdminState(True, f"{ADMIN_KEY} cannot be read ({e}); treated as paused")
    return _parse_state(raw)


def _not_an_object(e: NotAnObject) -> AdminState:
    return AdminState(True, f"{ADMIN_KEY} is there but is not a regular object ({e}); "
                            "treated as paused")


def _parse_state(raw: bytes) -> AdminState:
    """The state the document `raw` says; malformed = paused (fail closed), naming why."""
    try:
        doc = load_strict(raw, ADMIN_KEY)
        if not isinstance(doc, dict) or not isinstance(doc.get("paused"), bool):
            raise ValueError('not an object with a boolean "paused"')
        at = doc.get("at")
        return AdminState(doc["paused"], str(doc.get("reason", "")), str(doc.get("by", "")),
                          float(at) if isinstance(at, int | float) else None)
    except ValueError as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return AdminState(True, f"{ADMIN_KEY} is malformed ({e}); treated as paused")


def cap_reason(reason: str) -> str:
    """`reason` as written: characters UTF-8 cannot hold (lone surrogates) replaced, and cut
    (marked " [cut]") to at most MAX_REASON_BYTES bytes as a JSON string."""
    reason = reason.encode("utf-8", "replace").decode("utf-8")

    def size(text: str) -> int:
        return len(json.dumps(text, ensure_ascii=False).encode())

    if size(reason) <= MAX_REASON_BYTES:
        return reason
    lo, hi = 0, len(reason)  # the longest prefix that fits with the mark
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if size(reason[:mid] + _CUT) <= MAX_REASON_BYTES:
            lo = mid
        else:
            hi = mid - 1
    return reason[:lo] + _CUT


def new_admin_state(paused: bool, reason: str, now: float,
                    by: str | None = None) -> AdminState:
    """The state a pause (or resume) writes. `by`: who (default this host and pid;
    `gc-admin` passes the operator, user@host: its own pid names nothing once it exits,
    issue 41 item 7). The reason is capped (`cap_reason`) so the document always reads
    back (<= _MAX_BYTES)."""
    by = (by if by is not None else f"{socket.gethostname()} pid {os.getpid()}").encode(
        "utf-8", "replace").decode()
    return AdminState(paused, cap_reason(reason), by[:255], now)


def write_admin_state(store: ObjectStore, paused: bool, reason: str, now: float,
                      by: str | None = None) -> AdminState:
    """Pause (or resume) GC on the store whatever its state was; returns the state written
    (conditionally, as every write of it is: `change_admin_state`)."""
    state = new_admin_state(paused, reason, now, by)
    written = change_admin_state(store, lambda _before: state).written
    assert written is not None  # decide always writes
    return written


@dataclass(frozen=True)
class AdminChange:
    """What `change_admin_state` did: the state its decision was made on (the one it
    replaced, if it wrote) and the state it wrote (None: it decided to write nothing)."""

    before: AdminState
    written: AdminState | None


# Conflicts in a row before a change gives up: each one is another writer's write that
# completed (S3 412/409), so a few operators at once settle in a few tries.
_CHANGE_TRIES = 16


def change_admin_state(store: ObjectStore,
                       decide: Callable[[AdminState], AdminState | None]) -> AdminChange:
    """Read the state, `decide` what to write from it (None: nothing), and write that only
    if the state is still the version read: S3 PutObject `If-Match: <ETag>`, or
    `If-None-Match: *` where there is none (https://docs.aws.amazon.com/AmazonS3/latest/
    userguide/conditional-writes.html); a local store compares under its lock
    (`LocalStore.replace_if_match`). A conflict (412, 409: another writer's write landed
    in between) reads again and decides again, so what the caller says it did (from
    `before`) is true in a linear order of the writers (newuser16 S7: a `pause` and a
    `start` at once on S3 both read the old pause and both wrote, and the pause said done
    was lost). The document carries a token unique to this change: a write whose answer
    was lost (applied, then retried into a 412) is recognised when read back.

    Where no version can be had, the write is a plain one, as before issue 41 S7: a store
    that cannot write conditionally (`NoConditionalWrites`: a server that ignores the
    conditions refuses every GC round anyway, impl/gc/lease.py), or a local link or
    directory at the key (`NotAnObject`, read as paused), which `put` replaces."""
    token = uuid.uuid4().hex
    try:
        store.require_conditional_writes()
    except NoConditionalWrites:
        return _write_by_name(store, read_admin_state(store), decide)
    last: AdminChange | None = None  # the last write sent: its state and what it replaced
    for _ in range(_CHANGE_TRIES):
        try:
            got = store.get_versioned(ADMIN_KEY, _MAX_BYTES + 1)
        except NotAnObject as e:
            return _write_by_name(store, _not_an_object(e), decide)
        except NoConditionalWrites:
            return _write_by_name(store, read_admin_state(store), decide)
        if got is not None and last is not None and _token(got.data) == token:
            return last  # our own write, applied though its answer was lost
        before = AdminState(paused=False) if got is None else _parse_state(got.data)
        decided = decide(before)
        if decided is None:
            return AdminChange(before, None)
        doc = _document(decided, token)
        last = AdminChange(before, decided)
        try:
            if got is None:
                done = store.create_if_absent(ADMIN_KEY, doc)
            else:
                done = store.replace_if_match(ADMIN_KEY, doc, got.version)
        except ConditionalConflict:
            continue  # another request on the key completed first: read again
        if done is not None:
            return last
    raise StoreError(f"{ADMIN_KEY} changed {_CHANGE_TRIES} times while this command wrote "
                     "it (other gc-admin commands at once); this one's change is not "
                     "made: run it again (gc-admin show says the state)")


def _write_by_name(store: ObjectStore, before: AdminState,
                   decide: Callable[[AdminState], AdminState | None]) -> AdminChange:
    decided = decide(before)
    if decided is not None:
        store.put(ADMIN_KEY, _document(decided, uuid.uuid4().hex))
    return AdminChange(before, decided)


def _document(state: AdminState, token: str) -> bytes:
    return json.dumps(
        {"paused": state.paused, "reason": state.reason, "by": state.by, "at": state.at,
         "token": token},
        ensure_ascii=False, allow_nan=False,
    ).encode()


def _token(raw: bytes) -> str | None:
    try:
        doc = load_strict(raw, ADMIN_KEY)
    except ValueError:
        return None
    token = doc.get("token") if isinstance(doc, dict) else None
    return token if isinstance(token, str) else None


class LeaseState(enum.Enum):
    """What sits at the lease path (`_cluster/gc/lease.json`)."""

    ABSENT = "absent"
    LIVE = "live"  # held, not expired
    EXPIRED = "expired"  # released, or its holder stopped renewing it
    UNREADABLE = "unreadable"  # an object that cannot be read or parsed: may be held
    NOT_AN_OBJECT = "not_an_object"  # a link, directory or special file: refuses every round


@dataclass(frozen=True)
class LeaseView:
    """The lease as `show` and `reset` see it."""

    state: LeaseState
    holder: dict[str, Any] | None = None  # the document (LIVE, EXPIRED): strict JSON
    problem: str = ""  # why UNREADABLE or NOT_AN_OBJECT
    # What reset's conditional delete compares (ObjectInfo.version); "" = by name.
    version: str = ""
    # UNREADABLE: its bytes were read, and the next round takes it over (`taken_over`).
    next_round_replaces: bool = False

    @property
    def live(self) -> bool | None:
        """Held: True, free: False, None when it cannot be told (a lease that cannot be
        read that a round may have written, or not a regular object). An unreadable lease
        the next round replaces is held by no round (no round wrote it: `show.py`), so
        False, as the human form says it; it was True beside `next_round_replaces: true`
        (newuser21 X5), a contradiction to a script that gates on `live`."""
        if self.state is LeaseState.LIVE:
            return True
        if self.state in (LeaseState.ABSENT, LeaseState.EXPIRED) or self.next_round_replaces:
            return False
        return None

    def holder_running(self) -> bool | None:
        """Whether the holder's process still runs: False only when known (the lease names
        the driver's process identity, boot and pid namespace, and this machine is in the
        same ones: `journal.Driver.gone`); None when it cannot be told from here (another
        machine or container, or a lease that does not name it: a pid alone may be
        another namespace's or reused)."""
        return holder_running(self.holder)

    def as_dict(self) -> dict[str, Any]:
        """For `show --json` (`holder_running`: see `holder_running`)."""
        return {"state": self.state.value, "live": self.live, "holder": self.holder,
                "problem": self.problem or None,
                "next_round_replaces": self.next_round_replaces,
                "holder_running": self.holder_running() if self.holder else None}


def _opt_str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def read_lease(store: ObjectStore, now: float) -> LeaseView:
    """The lease at `now` (real time): its state, its document and the version read."""
    try:
        info, raw = _read_entry(store, LEASE_KEY)
    except _Missing:
        return LeaseView(LeaseState.ABSENT)
    except NotAnObject as e:
        return LeaseView(LeaseState.NOT_AN_OBJECT, problem=str(e))
    except StoreError as e:
        return LeaseView(LeaseState.UNREADABLE, problem=str(e))
    if info is None:  # created between head and get: its version is unknown
        return LeaseView(LeaseState.UNREADABLE,
                         problem="it was created while being read; run the command again")
    try:
        doc = load_strict(raw, LEASE_KEY)
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
    except ValueError as e:
        return LeaseView(LeaseState.UNREADABLE, problem=f"malformed: {e}", version=info.version,
                         next_round_replaces=taken_over(raw, now))
    # as the round judges it (review rev38z12 finding 2: one judgement of expiry)
    return LeaseView(LeaseState.LIVE if lease_live(doc, now) else LeaseState.EXPIRED, doc,
                     version=info.version)


class ResetRefused(Exception):
    """A reset that would remove what may still be in use: a live (or unreadable) lease
    without --force, or a lease that changed since it was read."""


@dataclass(frozen=True)
class LeaseReset:
    """What `reset_lease` did: the keys it removed, and the lease it removed as it read it
    (its holder's round: newuser14 R7, `reset` says what became of it)."""

    removed: list[str]
    lease: LeaseView
    # The store said only that the lease is gone after the request: removed by this request
    # or another (`Outcome.GONE`), not which.
    gone: bool = False


def reset_gc_state(store: ObjectStore, now: float, force: bool = False,
                   even_if_running: bool = False) -> list[str]:
    """`reset_lease`'s removed keys."""
    return reset_lease(store, now, force, even_if_running).removed


def reset_lease(store: ObjectStore, now: float, force: bool = False,
                even_if_running: bool = False) -> LeaseReset:
    """The escape hatch: removes the GC lease (`_cluster/gc/lease.json`), so a round that
    died holding it no longer blocks the next ones until it expires. Nothing else: the
    pause state, the round records and the deletion journals are kept (they are the audit
    trail). Refused (ResetRefused) while the lease is live, unreadable, or not a regular
    object (a link, a directory: it refuses every round), unless `force`: the round holding
    it may still be deleting, and a second round would then run beside it. The delete is
    conditional on the version read: a lease taken over since is never removed (refused).
    `force` is "its holder is known dead": a live lease whose holder's process is running
    on this machine (`LeaseView.holder_running`) is refused even so, naming the pid, unless
    `even_if_running` (newuser3 N4: a reset against a running round recorded it `killed`,
    and two rounds ran at once). Returns what it removed and the lease read."""
    lease = read_lease(store, now)
    if lease.state is LeaseState.ABSENT:
        return LeaseReset([], lease)
    if not force:
        _refuse_unforced(lease)
    if lease.state is LeaseState.LIVE and not even_if_running and lease.holder_running():
        holder = lease.holder or {}
        driver = holder.get("driver")
        pid = driver.get("pid") if isinstance(driver, dict) else holder.get("pid", "?")
        raise ResetRefused(
            f"the round holding the lease ({LEASE_KEY}: round {holder.get('round', '?')}) "
            f"is running: pid {pid} on this host; stop it first (Ctrl-C or kill {pid}: "
            "it records its round and releases the lease), or pass --even-if-running "
            "with --force to take the lease from a running round")
    if lease.state is LeaseState.NOT_AN_OBJECT:
        # --force on a link or a directory (a local store): no round can hold it (a round
        # cannot create the lease while it is there), so it is removed by name.
        r = store.delete_batch([LEASE_KEY])
        if r.errors:
            # In `show`'s words (newuser23 F5: "[Errno 21] Is a directory: 'lease.json'").
            raise ResetRefused(f"cannot remove {LEASE_KEY}: {lease.problem}, and a directory "
                               "is never removed: remove it by hand")
        return LeaseReset([] if LEASE_KEY in r.gone else [LEASE_KEY], lease)
    # Issue 38 item 3: conditional on the store itself (S3 DeleteObject If-Match: <ETag>);
    # the batch delete's per-object ETag is ignored by moto, and the version was "" on S3.
    try:
        outcome = store.delete_if_match(LEASE_KEY, lease.version)
    except StoreError as e:
        raise ResetRefused(f"cannot remove {LEASE_KEY}: {e}; run the command again") from e
    if outcome is Outcome.CHANGED:
        raise ResetRefused(
            f"{LEASE_KEY} changed since it was read (a GC round may have taken the lease "
            "over); not removed: see epochgc gc-admin show")
    # GONE: the lease read is gone after our request: removed by it (a copy an
    # intermediary or botocore sent before: reviews rev38z3 finding 3, rev38z9 finding 3)
    # or by another writer; said so (`LeaseReset.gone`).
    return LeaseReset([] if outcome is Outcome.ABSENT else [LEASE_KEY], lease,
                      gone=outcome is Outcome.GONE)


def _refuse_unforced(lease: LeaseView) -> None:
    if lease.state is LeaseState.LIVE:
        holder = lease.holder or {}
        raise ResetRefused(
            f"a GC round holds a live lease ({LEASE_KEY}: round {holder.get('round', '?')}, "
            f"host {holder.get('host', '?')}, pid {holder.get('pid', '?')}); "
            + (f"{DEAD_HOLDER}: pass --force to remove the lease and record the round "
               "from its journal, if it started one"
               if holder_running(holder) is False else
               "it may still be deleting; stop it first, or pass --force if it is known "
               "dead"))
    if lease.state is LeaseState.UNREADABLE and lease.next_round_replaces:
        # As `show` says it (issue 41 F5): no round half-writes a lease.
        raise ResetRefused(
            f"the GC lease {LEASE_KEY} cannot be read ({lease.problem}); no round wrote it "
            "(a round writes its lease whole): the next round replaces it; pass --force to "
            "remove it now")
    if lease.state is LeaseState.UNREADABLE:
        raise ResetRefused(
            f"the GC lease {LEASE_KEY} cannot be read ({lease.problem}); a round may still "
            "hold it: pass --force if no GC round is running")
    if lease.state is LeaseState.NOT_AN_OBJECT:
        raise ResetRefused(
            f"{LEASE_KEY} is not a regular object ({lease.problem}); every GC round is "
            "refused while it is there: pass --force to remove it (a link is removed, "
            "never followed; a directory is never removed: remove it by hand)")
