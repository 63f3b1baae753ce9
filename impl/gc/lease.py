"""The store's GC lease (issue 29): two rounds at once on one store both claimed the same
keys (26 of 2,000), so a real round holds `_cluster/gc/lease.json` from before its first
delete to its end, as production runs one GC per prefix range.

The lease is created only if absent (`ObjectStore.put_if_absent`: a hard link on a local
store, `If-None-Match: *` on S3), names its holder (round, host, pid) and expires: a round
that dies holding it blocks the next ones for at most the lease's duration. A running round
renews it every third of that; a renewal that finds the lease gone or another holder's asks
the round to stop. Released, it is marked expired (kept, so the next round takes it over).
Times are the real clock's (the lease is between processes; `--now` does not apply).
"""

from __future__ import annotations

import json
import math
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from epochgc.impl.gc.errors import GcError, ReportError
from epochgc.impl.gc.reports import check_nesting
from epochgc.impl.store.base import ObjectStore, StoreError

LEASE_KEY = "_cluster/gc/lease.json"
DEFAULT_LEASE_S = 600.0


class Lease:
    """One round's hold on the store. `acquire`, then `keep` (renewals in a thread), then
    `release`."""

    def __init__(
        self,
        open_store: Callable[[], ObjectStore],
        round_id: str,
        duration_s: float = DEFAULT_LEASE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.open_store = open_store
        self.round_id = round_id
        self.duration_s = duration_s
        self.clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _doc(self) -> bytes:
        now = self.clock()
        return json.dumps({
            "round": self.round_id, "host": socket.gethostname(), "pid": os.getpid(),
            "renewed_at": now, "expires_at": now + self.duration_s,
        }).encode()

    def acquire(self) -> None:
        """Take the lease, or raise GcError naming its holder. An expired lease is taken
        over (deleted only if unchanged since it was read, then created again)."""
        store = self.open_store()
        try:
            if store.put_if_absent(LEASE_KEY, self._doc()):
                return
            info = store.head(LEASE_KEY)
            held = _read(store)
            if held is not None and _expires(held) > self.clock():
                raise GcError(_refusal(held))
            if info is not None:  # expired (or unreadable): take it over
                r = store.delete_if_unchanged([(LEASE_KEY, info.version)])
                if r.changed or r.errors:
                    raise GcError(_refusal(_read(store) or {}))
            if not store.put_if_absent(LEASE_KEY, self._doc()):
                if info is None and store.head(LEASE_KEY) is None:
                    # Something no head() sees blocks the create: not another round's lease.
                    raise GcError(
                        f"{LEASE_KEY} is there but is not a regular object (a link, a "
                        "directory or a special file); every round is refused until it is "
                        "removed: see epochgc gc-admin show; gc-admin reset --force removes it")
                raise GcError(_refusal(_read(store) or {}))
        except StoreError as e:
            raise GcError(f"cannot take the GC lease {LEASE_KEY}: {e}") from e
        finally:
            store.close()

    def keep(self, lost: Callable[[str], None]) -> None:
        """Renew the lease every third of its duration until `release`; `lost(why)` is
        called (once) if it was taken from this round."""

        def run() -> None:
            while not self._stop.wait(self.duration_s / 3):
                why = self._renew()
                if why is not None:
                    lost(why)
                    return

        self._thread = threading.Thread(target=run, name="epochgc-lease", daemon=True)
        self._thread.start()

    def _renew(self) -> str | None:
        try:
            store = self.open_store()
            try:
                held = _read(store)
                if held is None or held.get("round") != self.round_id:
                    return f"the GC lease was taken: {_refusal(held or {})}"
                store.put(LEASE_KEY, self._doc())
            finally:
                store.close()
        except StoreError:
            return None  # a failed renewal is retried; the lease still has time
        return None

    def release(self) -> None:
        """Stop renewing and, if the lease is still this round's, mark it expired (the next
        round takes it over). Written, not deleted: a release never goes through the data
        delete path, whose failures (or a test's injected crashes) would keep it held."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            store = self.open_store()
            try:
                held = _read(store)
                if held is not None and held.get("round") == self.round_id:
                    store.put(LEASE_KEY, json.dumps(
                        {**held, "released_at": self.clock(), "expires_at": 0}).encode())
            finally:
                store.close()
        except Exception:  # never mask the round's own outcome (a test store may raise)
            pass  # it expires on its own


def _read(store: ObjectStore) -> dict[str, Any] | None:
    """The lease document, None if absent or unreadable (nested too deep included: json
    would raise RecursionError out of the round)."""
    try:
        raw = store.get(LEASE_KEY, 0, 4096)
        check_nesting(raw, LEASE_KEY)
        doc = json.loads(raw)
    except (StoreError, ReportError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _expires(held: dict[str, Any]) -> float:
    """When the lease expires; one whose expiry is not a finite number never was written
    by a round: expired, taken over like an unreadable one."""
    until = held.get("expires_at")
    if isinstance(until, int | float) and not isinstance(until, bool):
        try:
            v = float(until)
        except OverflowError:  # an integer of hundreds of digits
            return 0.0
        if math.isfinite(v):
            return v
    return 0.0


def _refusal(held: dict[str, Any]) -> str:
    until = _expires(held)
    left = f"{until - time.time():.0f}s" if until else "?"
    return (f"another GC round holds the store's lease ({LEASE_KEY}): round "
            f"{held.get('round', '?')} on host {held.get('host', '?')} pid "
            f"{held.get('pid', '?')}, expiring in {left}; two rounds at once would both "
            "claim the same keys")
