"""GC administration state in the store (issue 30): paused or running, and the operations of
`epochgc gc-admin` (pause, start, reset, show).

`_cluster/gc/admin.json` = {"paused": bool, "reason": str, "by": str, "at": unix_seconds}.
Absent means running (a new store). Every round reads it before it starts and its driver
polls it while it runs: a paused store refuses new rounds and stops running ones at their
next delete batch (as SIGTERM does). Failing closed: a document that exists but cannot be
read or parsed counts as paused, naming why.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from typing import Any

from epochgc.impl.gc.lease import LEASE_KEY
from epochgc.impl.store.base import ObjectStore, StoreError

ADMIN_KEY = "_cluster/gc/admin.json"
_MAX_BYTES = 4096


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


def read_admin_state(store: ObjectStore) -> AdminState:
    """The store's GC state; absent = running; unreadable or malformed = paused (fail
    closed), with the problem as the reason."""
    try:
        if store.head(ADMIN_KEY) is None:
            return AdminState(paused=False)
        raw = store.get(ADMIN_KEY, 0, _MAX_BYTES + 1)
    except StoreError as e:
        return AdminState(True, f"{ADMIN_KEY} cannot be read ({e}); treated as paused")
    try:
        if len(raw) > _MAX_BYTES:
            raise ValueError(f"larger than {_MAX_BYTES} bytes")
        doc = json.loads(raw)
        if not isinstance(doc, dict) or not isinstance(doc.get("paused"), bool):
            raise ValueError('not an object with a boolean "paused"')
        at = doc.get("at")
        return AdminState(doc["paused"], str(doc.get("reason", "")), str(doc.get("by", "")),
                          float(at) if isinstance(at, int | float) else None)
    except ValueError as e:
        return AdminState(True, f"{ADMIN_KEY} is malformed ({e}); treated as paused")


def write_admin_state(store: ObjectStore, paused: bool, reason: str, now: float) -> AdminState:
    """Pause (or resume) GC on the store; returns the state written."""
    state = AdminState(paused, reason, f"{socket.gethostname()} pid {os.getpid()}", now)
    store.put(ADMIN_KEY, json.dumps(
        {"paused": state.paused, "reason": state.reason, "by": state.by, "at": state.at}
    ).encode())
    return state


@dataclass(frozen=True)
class LeaseView:
    """The lease as `show` and `reset` see it."""

    holder: dict[str, Any] | None  # the document, None if absent or unreadable
    live: bool  # held and not expired


def read_lease(store: ObjectStore, now: float) -> LeaseView:
    """The lease document and whether it is live at `now` (real time)."""
    try:
        if store.head(LEASE_KEY) is None:
            return LeaseView(None, False)
        doc = json.loads(store.get(LEASE_KEY, 0, _MAX_BYTES))
    except (StoreError, ValueError):
        return LeaseView(None, True)  # present but unreadable: assume held (fail closed)
    if not isinstance(doc, dict):
        return LeaseView(None, True)
    until = doc.get("expires_at")
    return LeaseView(doc, isinstance(until, int | float) and until > now)


class ResetRefused(Exception):
    """A reset while a round holds a live lease, without --force."""


def reset_gc_state(store: ObjectStore, now: float, force: bool = False) -> list[str]:
    """The escape hatch: removes the GC lease (`_cluster/gc/lease.json`), so a round that
    died holding it no longer blocks the next ones until it expires. Nothing else: the
    pause state, the round records and the deletion journals are kept (they are the audit
    trail). Refused (ResetRefused) while the lease is live, unless `force`: the round
    holding it may still be deleting, and a second round would then run beside it.
    Returns what it removed."""
    lease = read_lease(store, now)
    if lease.live and not force:
        holder = lease.holder or {}
        raise ResetRefused(
            f"a GC round holds a live lease ({LEASE_KEY}: round {holder.get('round', '?')}, "
            f"host {holder.get('host', '?')}, pid {holder.get('pid', '?')}); it may still be "
            "deleting; stop it first, or pass --force if it is known dead")
    if store.head(LEASE_KEY) is None:
        return []
    store.delete_batch([LEASE_KEY])
    return [LEASE_KEY]
