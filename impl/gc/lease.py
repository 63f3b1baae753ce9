"""The store's GC lease (issue 29): two rounds at once on one store both claimed the same
keys (26 of 2,000), so a real round holds `_cluster/gc/lease.json` from before its first
delete to its end, as production runs one GC per prefix range.

The lease names its holder (round, host, pid, and a token unique to this hold) and
expires: a round that dies holding it blocks the next ones for at most the lease's
duration. A running round renews it every third of that; a renewal that finds it taken
asks the round to stop. Released, it is marked expired (kept, so the next round takes it
over). Times are the real clock's (the lease is between processes; `--now` does not apply).

Every write of it is conditional on the store itself (issue 38 item 3: on S3 the takeover
was a read, then a delete by name, then a create, and 4 rounds taking over one expired
lease on moto had 1-3 winners): created only if absent (`create_if_absent`: S3 PutObject
`If-None-Match: *`, a hard link locally), taken over, renewed and released only if it is
still the version read or last written (`replace_if_match`: `If-Match: <ETag>`). A store
that does not enforce these is refused (`require_conditional_writes`), never written
unconditionally. A conditional write whose answer was lost (a 500 after it applied, which
botocore retries into a 412) is recognised by reading the lease back: the token is ours.
"""

from __future__ import annotations

import json
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from epochgc.impl.gc.errors import GcError, ReportError
from epochgc.impl.gc.journal import Driver
from epochgc.impl.gc.killpoint import reach
from epochgc.impl.gc.reports import load_bounded
from epochgc.impl.store.base import (
    ConditionalConflict,
    NotAnObject,
    NoVersion,
    ObjectStore,
    StoreError,
    Versioned,
    send_clock,
)
from epochgc.impl.store.driverbound import current as driver_bound

LEASE_KEY = "_cluster/gc/lease.json"
DEFAULT_LEASE_S = 600.0
_MAX_LEASE_BYTES = 4096
# Conditional writes that lost a race (412 after a read, 409) are retried this many times
# with a fresh read; past that another round is busy with the lease: refused.
_TRIES = 4
# How far the wall clock may drift from the monotonic clock between two lease writes before
# it is taken as a step (`Lease.firm`).
STEP_TOLERANCE_S = 2.0


class Lease:
    """One round's hold on the store. `acquire`, then `keep` (renewals in a thread), then
    `release`."""

    def __init__(
        self,
        open_store: Callable[[], ObjectStore],
        round_id: str,
        duration_s: float = DEFAULT_LEASE_S,
        clock: Callable[[], float] = time.time,
        elapsed: Callable[[], float] = send_clock,
    ) -> None:
        self.open_store = open_store
        self.round_id = round_id
        self.duration_s = duration_s
        self.clock = clock
        # What the holder measures its own hold on (`_until`, `firm`, `left_s`) and a step
        # against: CLOCK_BOOTTIME on Linux (`store.base.send_clock`). Review rev38z12
        # finding 3: on CLOCK_MONOTONIC, which "does not count time that the system is
        # suspended" (clock_gettime(2), Linux man-pages; CLOCK_BOOTTIME "is identical to
        # CLOCK_MONOTONIC, except that it also includes any time that the system is
        # suspended"), a suspend of X s read as a step of the wall clock, and the renewal
        # after it wrote an expiry X s short, already past on every reader's clock, while
        # the holder's hold said the whole duration more. Injected by tests.
        self.elapsed = elapsed
        self.token = uuid.uuid4().hex  # this hold: a doc with it was written by this object
        self.version = ""  # the version of the lease this round last wrote
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Which process holds it, as `gc-admin show` on this machine can check it (issue
        # 41: a dead driver's live lease was shown for its whole 10 minutes, unflagged).
        self._driver = asdict(Driver.this_process())
        # the time (on `elapsed`) until which the lease is this round's for sure: from the
        # moment the last successful write's document was made (before its request went
        # out), for as long as that document grants on the readers' clocks (`_granted`)
        self._until = float("-inf")
        self._made = float("-inf")
        self._granted = 0.0
        # The clocks of the last document made before any step (`_known_mono` monotonic,
        # `_known_wall` the wall clock, its `renewed_at`): the readers judge the lease by
        # the wall clock, the driver by `elapsed` (rev38m finding 1). Once the clocks
        # disagree (`stepped`) every later document's times are measured from these on
        # `elapsed` (`_doc`, review rev38z10 finding 6).
        self._known_mono = float("-inf")
        self._known_wall = float("nan")
        self.stepped: str | None = None  # why the clocks disagree: never firm again
        self.lost: str | None = None  # why the store's lease is no longer this round's
        self._clocks = threading.Lock()  # `_made` and `_made_wall` change together

    def firm(self) -> bool:
        """Held for at least a quarter of its duration more, as of the last write this
        round made successfully (a local check, no request): the round's tasks are told to
        go on only while this holds (`gate.py`), so none is told to once the lease may
        expire and a recovery may read the round back (a quarter, 150 s by default, is
        what a batch told to go may still take: `bounds.py`). Renewals come every third:
        one that fails leaves it firm until the next is tried and a little after.

        Never firm again once the wall clock moved differently from the monotonic clock
        since a lease write by more than `STEP_TOLERANCE_S` (a step: NTP, a VM resumed, an
        operator's `date`): the expiry the readers see is wall-clock, so a driver whose
        clock stepped back writes a lease every reader takes for expired while its own
        monotonic count says it is firm (rev38m finding 1). A steady skew between hosts is
        not visible here; the recovery's wait covers it (`bounds.py`)."""
        if self.stepped is None:
            self._check_step()
        return (self.stepped is None and self.lost is None and not self._stop.is_set()
                and self.left_s() > self.duration_s / 4)

    def left_s(self) -> float:
        """Seconds until this round's hold ends, as of the last write of the lease that
        succeeded (its document was made before that request went out), measured on
        `elapsed`; -inf before it is held. Never more than that document's expiry leaves
        on the wall clock it was made by (`_doc`). Past it another round may take the
        store (`driverbound.DriverBound.hold`: no request of this driver is sent then)."""
        return self._until - self.elapsed()

    def look(self, store: ObjectStore) -> str | None:
        """One look at the lease in the store (the round's watch, once a look): None while
        it is still this round's, else why not, latched (`firm` is false from then on).
        newuser5 G3: `gc-admin reset --force --even-if-running` removed a running round's
        lease and the round deleted on for 14 s, recording `done`: only a renewal (every
        200 s) looked at the lease, so a second round could start beside it. One HEAD; a
        GET only when the version is not the one this round last wrote (a renewal's or the
        release's write may cross the HEAD: the token then says it is still ours)."""
        if self.lost is not None or not self.version:
            return self.lost
        info = store.head(LEASE_KEY)
        if info is not None and info.version == self.version:
            return None
        got = store.get_versioned(LEASE_KEY, _MAX_LEASE_BYTES)
        if got is None:
            self.lost = (f"the GC lease {LEASE_KEY} was removed while the round ran "
                         "(gc-admin reset --force?): another round may start beside it")
        elif not self._ours(got):
            self.lost = f"the GC lease was taken: {_refusal(_parse(got) or {})}"
        return self.lost

    def _check_step(self) -> None:
        """Latch `stepped` if the wall clock moved unlike the monotonic one since the last
        document made before a step."""
        with self._clocks:
            self._stepped(self.elapsed(), self.clock())

    def _stepped(self, mono: float, wall: float) -> bool:
        """Whether the clocks read together as `mono`, `wall` moved differently since the
        last document made before a step (a rate error of NTP's slew, 500 ppm, is 0.3 s
        over a lease); latches `stepped`. Under `_clocks`."""
        if self.stepped is None and not math.isnan(self._known_wall):
            moved, passed = wall - self._known_wall, mono - self._known_mono
            if abs(moved - passed) > STEP_TOLERANCE_S:
                self.stepped = (f"the wall clock moved {moved:+.1f}s while {passed:.1f}s "
                                "passed since the lease was written: the lease's expiry is "
                                "unsure")
        return self.stepped is not None

    def _doc(self, release: bool = False) -> bytes:
        """The lease document as of now: held for `duration_s` more (released: expired now).

        Its times are the wall clock's (`self.clock`, CLOCK_REALTIME: what every reader
        compares `expires_at` with, on its own host; S3 keeps no expiry of its own, and the
        store's clock shows only in LastModified and its answers' Date). After a step of
        this host's wall clock (`stepped`) they are the last document's before the step
        plus the time passed since on `elapsed` (CLOCK_BOOTTIME, which like CLOCK_MONOTONIC
        "is not affected by discontinuous jumps in the system time (e.g., if the system
        administrator manually changes the clock)", clock_gettime(2), Linux man-pages).
        Review rev38z10 finding 6: after a forward step of 10^6 s the renewals wrote the
        stepped clock's expiry, and a driver killed then (no release) left a lease every
        round read as live for 11 days, until `gc-admin reset --force`. Now a renewal
        never writes an expiry past what `elapsed` allows: the hold ends on the readers'
        clocks when it would have without the step.

        The holder's own hold (`_granted`, from `_made`) is what the document leaves on
        the wall clock read now, at most `duration_s`: after a forward step it is less
        (none at all past the duration), never more than what a reader sees (review
        rev38z12 finding 3: the holder counted 600 s more on a lease written already
        expired; `driverbound` let its requests out while another round took it over)."""
        with self._clocks:
            self._made = self.elapsed()
            wall = self.clock()
            if self._stepped(self._made, wall):
                now = self._known_wall + (self._made - self._known_mono)
            else:
                now = self._known_wall = wall
                self._known_mono = self._made
            self._granted = 0.0 if release else min(self.duration_s,
                                                     now + self.duration_s - wall)
        return json.dumps({
            "round": self.round_id, "host": socket.gethostname(), "pid": os.getpid(),
            "token": self.token, "renewed_at": now,
            "expires_at": 0 if release else now + self.duration_s,
            "driver": self._driver, **({"released_at": now} if release else {}),
        }).encode()

    def _ours(self, got: Versioned | None) -> bool:
        held = _parse(got)
        return held is not None and held.get("token") == self.token

    def acquire(self) -> None:
        """Take the lease, or raise GcError naming its holder. An expired (or unreadable)
        lease is taken over: replaced only if it is still the version read."""
        store = self.open_store()
        try:
            store.require_conditional_writes()
            held: dict[str, Any] | None = None
            for _ in range(_TRIES):
                try:
                    try:
                        created = store.create_if_absent(LEASE_KEY, self._doc())
                    except NoVersion:
                        # Created, its version not said (review rev38z9 finding 4): read
                        # back as after a lost answer (our token: ours, the GET's version).
                        created = None
                    if created is not None:
                        self._taken(created)
                        return
                    got = store.get_versioned(LEASE_KEY, _MAX_LEASE_BYTES)
                    if got is None:
                        continue  # removed since (a reset): create again
                    if self._ours(got):  # our own write applied, its answer was lost
                        self._taken(got.version)
                        return
                    held = _parse(got)
                    if held is not None and live(held, self.clock()):
                        raise _held(held)
                    try:
                        taken = store.replace_if_match(LEASE_KEY, self._doc(), got.version)
                    except NoVersion:
                        taken = None  # written, its version not said: the next look reads it
                    if taken is not None:
                        self._taken(taken)
                        return
                except ConditionalConflict:
                    continue  # another request on the lease completed first: read again
            raise _held(held or {})
        except NotAnObject as e:
            raise GcError(
                f"{LEASE_KEY} is there but is not a regular object (a link, a directory or "
                f"a special file: {e}); every round is refused until it is removed: see "
                "epochgc gc-admin show; gc-admin reset --force removes it, a directory "
                "by hand") from e
        except StoreError as e:
            raise GcError(f"cannot take the GC lease {LEASE_KEY}: {e}") from e
        finally:
            store.close()

    def _taken(self, version: str) -> None:
        """The lease is this round's, at `version`: held until `_made` + its duration, and
        this process's driver requests end with it (`driverbound.DriverBound.hold`; none
        bound outside a GC driver)."""
        self.version = version
        self._until = self._made + self._granted
        bound = driver_bound()
        if bound is not None:
            bound.hold(self.left_s)

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

    def _rewrite(self, store: ObjectStore, doc: bytes) -> dict[str, Any] | None:
        """Write `doc` over this round's lease, only if it is still the one this round
        wrote: None when written (or, after repeated conflicts, still this round's and not
        rewritten: the next renewal tries again), else the document found there ({} if
        none)."""
        for _ in range(_TRIES):
            try:
                try:
                    done = store.replace_if_match(LEASE_KEY, doc, self.version)
                except NoVersion:
                    done = None  # written, its version not said: read back, as below
                if done is not None:
                    self.version = done
                    if not self._stop.is_set():  # a renewal, not the release
                        self._until = self._made + self._granted
                    return None
                got = store.get_versioned(LEASE_KEY, _MAX_LEASE_BYTES)
            except ConditionalConflict:
                continue
            if got is None or not self._ours(got):
                return _parse(got) or {}
            self.version = got.version  # ours, written by a request whose answer was lost
        got = store.get_versioned(LEASE_KEY, _MAX_LEASE_BYTES)
        return None if self._ours(got) else _parse(got) or {}

    def _renew(self) -> str | None:
        try:
            store = self.open_store()
            try:
                other = self._rewrite(store, self._doc())
            finally:
                store.close()
        except (StoreError, GcError):
            return None  # a failed renewal is retried; the lease still has time
        if other is not None:
            return f"the GC lease was taken: {_refusal(other)}"
        return None

    def release(self) -> None:
        """Stop renewing and, if the lease is still this round's, mark it expired (the next
        round takes it over). Written, not deleted: a release never goes through the data
        delete path, whose failures (or a test's injected crashes) would keep it held. A
        lease taken over since (this round was late) is never touched."""
        self._stop.set()  # not firm from now on; `_until` still says when the hold ends
        if self._thread is not None:
            self._thread.join()
        if not self.version:
            return  # never held
        reach("lease-releasing")
        try:
            store = self.open_store()
            try:
                self._rewrite(store, self._doc(release=True))
            finally:
                store.close()
        except Exception:  # never mask the round's own outcome (a test store may raise)
            pass  # it expires on its own


def _parse(got: Versioned | None) -> dict[str, Any] | None:
    """The lease document, None if absent or unreadable (nested too deep included: json
    would raise RecursionError out of the round)."""
    if got is None:
        return None
    try:
        doc = load_bounded(got.data, LEASE_KEY)  # nesting and numbers bounded
    except (ReportError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def taken_over(data: bytes, now: float) -> bool:
    """Whether a round at `now` takes over a lease of these bytes (`Lease.acquire`): one it
    cannot parse, or one expired. `gc-admin show` says so of a malformed lease (issue 41
    F5: it advised `reset --force` where the next round simply replaced it)."""
    held = _parse(Versioned(data, ""))
    return held is None or not live(held, now)


def live(held: dict[str, Any], now: float) -> bool:
    """Whether the lease document `held` is still held at `now` (wall clock): the one
    judgement of expiry, for the round that would take it over (`Lease.acquire`) and for
    `gc-admin show` and `reset` (`admin.read_lease`): review rev38z12 finding 2, `show`
    compared an int expiry of 401 digits exactly (live) where the round read it expired."""
    return _expires(held) > now


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


class LeaseBusy(GcError):
    """Another round holds the lease, and its holder is not known dead: GC may not run now;
    retry later (exit 2, the table's "blocked", newuser12 P11: it was 1, "failed", so a
    scheduler keyed on exit codes paged for a routine overlap)."""


def _held(held: dict[str, Any]) -> GcError:
    """The refusal by a live lease: `LeaseBusy`, or a plain GcError (exit 1) when its holder
    is known dead on this host: no retry ends that before it expires; an operator acts."""
    said = _refusal(held)
    return GcError(said) if holder_running(held) is False else LeaseBusy(said)


def _refusal(held: dict[str, Any]) -> str:
    until = _expires(held)
    left = f"{until - time.time():.0f}s" if until else "?"
    said = (f"another GC round holds the store's lease ({LEASE_KEY}): round "
            f"{held.get('round', '?')} on host {held.get('host', '?')} pid "
            f"{held.get('pid', '?')}, expiring in {left}")
    if holder_running(held) is False:
        # newuser3 N11: only `show` said so; the operator waited or forced blind.
        # "from its journal, if it started one" (newuser14 R7: a round killed in Spark's
        # start-up has none, and nothing to record).
        return (f"{said}; {DEAD_HOLDER}: `epochgc gc-admin reset --force` removes the lease "
                "and records the round from its journal, if it started one (or wait until "
                "it expires)")
    return f"{said}; two rounds at once would both claim the same keys"


# How it ended is not known (newuser13 Q3: a driver that exited 1 on a store gone, unable
# to release its lease, was said to have died): only that it ended with the lease held.
DEAD_HOLDER = ("its holder's process on this host is not running: the round ended without "
               "releasing it")


def holder_running(holder: dict[str, Any] | None) -> bool | None:
    """Whether a lease holder's process still runs: False only when known (the lease names
    the driver's process identity, boot and pid namespace, and this machine is in the
    same ones: `journal.Driver.gone`); None when it cannot be told from here (another
    machine or container, or a lease that does not name it: a pid alone may be another
    namespace's or reused)."""
    ident = (holder or {}).get("driver")
    if not isinstance(ident, dict):
        return None
    boot, namespace, ticks = (ident.get(k) for k in ("boot_id", "pid_namespace", "start_ticks"))
    pid = ident.get("pid")
    if not (isinstance(boot, str) and isinstance(namespace, str) and isinstance(ticks, str)
            and isinstance(pid, int) and not isinstance(pid, bool) and pid > 0):
        return None
    # Older leases kept the kernel file's newline in the boot id.
    driver = Driver(boot_id=boot.strip(), pid_namespace=namespace, pid=pid, start_ticks=ticks)
    here = Driver.this_process()
    if here.boot_id != driver.boot_id or here.pid_namespace != driver.pid_namespace:
        return None
    return not driver.gone()
