"""While a real round deletes, its driver keeps asking two questions (issue 30): has an
operator paused GC on the store, and is the cluster still known healthy (`monitor.py`)?
Either answer stops the round as SIGTERM does: the driver writes the journal's STOP marker,
each task starts no new delete batch, the batches in flight finish and are journaled, and
the round ends `interrupted` ("paused": exit 3; "unhealthy": exit 2).

Two more questions since the tasks ask the driver "go on?" instead of the store (issue 38,
review rev38m): has anyone else written the round's STOP marker (a recovery that took the
round for dead, `gc-admin reset --force`), and is the lease still firm? `<round>/STOP`
is HEADed by a thread of its own every `bounds.STOP_LOOK_EVERY_S` (30 s), beside the
looks, each HEAD from its own short-lived thread so that a slow one does not hold back the
next (issue 38: with the HEADs inside the looks, two requests apart once a request took
30 s, the gate's freshness ran out during healthy looks and the round stopped
`watch-late`). A look HEADs it too where one is due (first, between its requests, and last
if the next look's HEAD, the interval later, would come more than
`bounds.NEXT_HEAD_WITHIN_S` after the last): the same rule, the same clock, so STOP is
HEADed about once per 30 s whoever sends it. `fresh()` says whether a HEAD that found none
was sent recently enough for the gate to say "go" (`bounds.LOOK_FRESH_S`): from one HEAD's
send to the next's answer is 30 s and a request, so the gate stays open on a store
answering within `LOOK_FRESH_S - STOP_LOOK_EVERY_S` (60 s) a request. A firm lease is
checked once a look too, so `lease-unsure` stops a round whose tasks do not ask (review
finding 3).

A look reads the snapshot and the reports through one listing and GETs only those that
changed since the previous look (`reports.SeenDocs`): a pause is still read every look,
and every failure is still an unknown health.

The wait after a look is the interval, or twice as long as the look itself took if that is
longer (up to `max(interval, NEXT_HEAD_WITHIN_S / 2)`): the watch spends at most a third of
its time in requests (issue 38, requests per key: on a store answering in seconds, looks
one after another were the round's largest cost that grows with its length, ~2 requests
per 2 latencies; with half its time in requests, its 3 requests a look were still 48 of a
120,000-key round's ~150 requests beyond the least at 1.5 s a request). Where a look takes
less than half the interval (any store answering in well under a second) nothing
changes; where it takes longer, a pause, an unhealthy cluster or a lost lease is seen
within three looks' time instead of one and an interval, a few round trips either way.
STOP is HEADed on its own clock (above), whatever the looks' pace.

The watch's requests are a command's control reads (`watch_store`, issue 41 newuser11
M14): on S3, `patience.py`'s bounds (10 s an attempt, 3 attempts, "waiting for ... no answer
yet" every 10 s), not the delete path's client (botocore's adaptive retries: 11 attempts, so
a store gone silent mid-round was "health unknown" only ~146 s later, with no line
meanwhile). `bounds.py`'s chain is unchanged: the gate's "go" rests on a HEAD of STOP that
found none, timed from before its first attempt was sent; a shorter read timeout only makes
a HEAD fail sooner, which stops the round (unknown health) and closes the gate sooner:
safe. It never lets a "go" rest on an older HEAD.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable

from epochgc.impl.gc.admin import AdminState, read_admin_state
from epochgc.impl.gc.bounds import HEADS_IN_FLIGHT, NEXT_HEAD_WITHIN_S, STOP_LOOK_EVERY_S
from epochgc.impl.gc.monitor import HealthVerdict, check_health
from epochgc.impl.gc.reports import SeenDocs
from epochgc.impl.gc.stop import RoundStop
from epochgc.impl.store.base import ObjectStore, StoreError
from epochgc.impl.store.hooked import HookedStore
from epochgc.impl.store.url import open_control

PAUSED = "paused"
UNHEALTHY = "unhealthy"
STOPPED = "stop-marker"  # the round's STOP marker, written by another process
LEASE_UNSURE = "lease-unsure"
LEASE_LOST = "lease-lost"  # the lease in the store is gone or another round's

# The wait after a look, in the look's own time at least: the watch's share of time in
# requests is at most 1 / (1 + this).
LOOK_WAIT_FACTOR = 2.0

Spawn = Callable[[Callable[[], None], str], threading.Thread]


def watch_store(open_store: Callable[[], ObjectStore],
                say: Callable[[str], None] | None) -> Callable[[], ObjectStore]:
    """How the watch opens its store: `open_store`'s store with the control reads' bounds
    (an S3 StoreSpec: `patience.py`, a read still unanswered said through `say`; any
    other store as `open_store` opens it)."""
    return functools.partial(open_control, open_store,
                             None if say is None else lambda line: say(f"gc: {line}"))


def daemon_thread(run: Callable[[], None], name: str) -> threading.Thread:
    """Run `run` in a new daemon thread named `name`, started."""
    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


class RoundWatch:
    """Looks once when started, then every `interval_s` until `close`; the first pause or
    unhealthy verdict asks `stop` to stop the round (`on_unhealthy` gets the verdict first;
    `paused` keeps the pause state that stopped it). A look that fails in any way is an
    unknown health: the round stops (fail closed)."""

    def __init__(
        self,
        open_store: Callable[[], ObjectStore],
        stop: RoundStop,
        clock: Callable[[], float],
        max_report_age_s: float,
        interval_s: float,
        on_unhealthy: Callable[[HealthVerdict], None],
        stop_key: str | None = None,
        firm: Callable[[], bool] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        stop_every_s: float = STOP_LOOK_EVERY_S,
        next_head_within_s: float = NEXT_HEAD_WITHIN_S,
        wait: Callable[[float], bool] | None = None,
        spawn: Spawn = daemon_thread,
        lease_look: Callable[[ObjectStore], str | None] | None = None,
    ) -> None:
        """`stop_key`: the round's STOP marker, HEADed once the last HEAD of it is
        `stop_every_s` old (None: not looked at, and `fresh()` is always false); `firm`:
        the lease's `Lease.firm`, asked each look (None: no lease). `wait(s)`: how the
        watch's threads wait `s` seconds of `monotonic`, True once closed (default: the
        close event's, on the monotonic clock); `spawn`: how they are started (tests
        run them on a simulated clock). `lease_look`: the lease's `Lease.look`, one
        request a look (newuser5 G3: a lease removed by `reset --force --even-if-running`
        was seen only by the next renewal, 200 s later)."""
        self.open_store = open_store
        self.stop = stop
        self.clock = clock
        self.max_report_age_s = max_report_age_s
        self.interval_s = interval_s
        self.on_unhealthy = on_unhealthy
        self.stop_key = stop_key
        self.stop_every_s = stop_every_s
        # A look ends with a HEAD if the last clear one is `next_head_within_s` less the
        # wait old: the next look's HEAD, the wait later, is then sent within
        # `next_head_within_s` of a clear one.
        self.next_head_within_s = next_head_within_s
        # The wait after the last look (`_run`): the interval, or the look's own time.
        self.wait_s = interval_s
        self.longest_wait_s = max(interval_s, next_head_within_s / 2)
        self.firm = firm
        self.lease_look = lease_look
        self.monotonic = monotonic
        self.paused: AdminState | None = None
        self._lock = threading.Lock()  # the HEADs' times, taken by the looks and the HEADs
        self._sent_at = float("-inf")  # when the last HEAD of STOP was sent (any thread's)
        self._clear_at = float("-inf")  # when the last HEAD that found no STOP was sent
        self._in_flight = 0  # HEADs of the STOP thread not answered yet
        self._heads_over = False  # the STOP thread has ended (its store closes with the last)
        self._seen = SeenDocs()  # the snapshot and reports as of the last look
        self._done = threading.Event()
        self._wait = self._done.wait if wait is None else wait
        self.spawn = spawn
        self._threads: list[threading.Thread] = []
        self._verdict_said = False  # `_unhealthy`: the first verdict only
        self._verdict_lock = threading.Lock()

    def _unhealthy(self, verdict: HealthVerdict) -> None:
        """`on_unhealthy(verdict)`, for the first verdict only: it stopped the round, and
        a later one (a HEAD of STOP in flight then, failing on the same silent store) is
        neither said again nor recorded over it (newuser15 S7: the monitor's "...;
        stopping" twice, 9 s apart)."""
        with self._verdict_lock:
            if self._verdict_said:
                return
            self._verdict_said = True
        self.on_unhealthy(verdict)

    def start(self) -> None:
        """Look once now, on the caller's thread (a pause written since the round's own
        check, while Spark started or the lease was taken, is seen before any task starts),
        then keep looking from a daemon thread. STOP is HEADed by another from now on: the
        first look HEADs it at once (the gate's first "go" rests on that answer), the
        thread `stop_every_s` later, during the first look if that is slow."""
        if self.stop_key is not None:
            self._threads.append(self.spawn(self._run_heads, "epochgc-watch-stop"))
        if self._look():
            return
        self._threads.append(self.spawn(self._run, "epochgc-watch"))

    def close(self) -> None:
        """Stop looking and HEADing (a HEAD still in flight is not waited for: its answer
        is dropped)."""
        self._done.set()
        for thread in self._threads:
            if thread.is_alive():
                thread.join()

    def fresh(self, within_s: float) -> bool:
        """A HEAD of STOP that found none was sent at most `within_s` ago."""
        return self.monotonic() - self._clear_at <= within_s

    def poll_once(self) -> str | None:
        """One look: the reason to stop, or None. A store that cannot be opened is an
        unknown health (fail closed)."""
        if self.firm is not None and not self.firm():
            return LEASE_UNSURE
        began = self.monotonic()
        try:
            store = self.open_store()
        except StoreError as e:
            self._unhealthy(HealthVerdict.unknown(f"the store cannot be opened: {e}"))
            return UNHEALTHY
        try:
            if self.lease_look is not None and self.lease_look(store) is not None:
                return LEASE_LOST
            if self._stop_seen(store):
                return STOPPED
            # A look of many requests (48 brokers' reports at 2 s each: ~100 s) HEADs STOP
            # again between them once the last clear HEAD is `stop_every_s` old: the gate
            # stays fresh through a slow look (review rev38n finding 3).
            def between(_what: str) -> None:
                self._stop_seen(store)  # found: the round is asked to stop at once

            looking = HookedStore(store, between)
            state = read_admin_state(looking)
            if self.stop.reason == STOPPED:
                return STOPPED
            if state.paused:
                self.paused = state
                return PAUSED
            verdict = check_health(looking, self.clock(), self.max_report_age_s, self._seen)
            if self.stop.reason == STOPPED:
                return STOPPED
            # The wait before the next look: twice this look's time, within the interval
            # and its longest (decided before the closing HEAD, which it must account for).
            took = self.monotonic() - began
            self.wait_s = min(max(self.interval_s, LOOK_WAIT_FACTOR * took),
                              self.longest_wait_s)
            # The look's last request (review rev38o finding 6): a look that ended long
            # after its HEAD, and then the wait, would leave the next HEAD's answer past
            # the gate's freshness.
            end_head_after_s = max(0.0, self.next_head_within_s - self.wait_s)
            if verdict.healthy and self._stop_seen(store, end_head_after_s):
                return STOPPED
        finally:
            store.close()
        if not verdict.healthy:
            self._unhealthy(verdict)
            return UNHEALTHY
        return None

    def _stop_seen(self, store: ObjectStore, after_s: float | None = None) -> bool:
        """HEAD the STOP marker if the last HEAD of it (any thread's) was sent `after_s`
        (default `stop_every_s`) ago; True if it is there (the round is asked to stop at
        once: the gate says no from now on)."""
        sent = self._claim(self.stop_every_s if after_s is None else after_s)
        if sent is None or not self._found(store, sent):
            return False
        self.stop.request(STOPPED)
        return True

    def _claim(self, after_s: float) -> float | None:
        """The send time of a HEAD of STOP due now (none sent in the last `after_s`), taken
        and claimed (no other thread sends one meanwhile); None if none is due."""
        if self.stop_key is None:
            return None
        with self._lock:
            # Taken before the request is sent: a HEAD that finds none proves only that
            # STOP was absent when the server read it, at or after this time.
            sent = self.monotonic()
            if sent - self._sent_at < after_s:
                return None
            self._sent_at = sent
            return sent

    def _found(self, store: ObjectStore, sent: float) -> bool:
        """The HEAD claimed at `sent`: True if STOP is there; if not, the gate's "go" may
        rest on it until `sent` + `LOOK_FRESH_S`."""
        assert self.stop_key is not None
        if store.head(self.stop_key) is not None:
            return True
        with self._lock:  # answers may come out of order: the latest send counts
            self._clear_at = max(self._clear_at, sent)
        return False

    def _run_heads(self) -> None:
        """HEAD STOP once the last HEAD of it is `stop_every_s` old, each HEAD from its own
        thread (at most `HEADS_IN_FLIGHT` at once): a HEAD taking a request's time does not
        delay the next, so the gate's "go" rests on a HEAD sent at most `stop_every_s` and
        one request ago. Ends when the watch closes or the round is asked to stop."""
        try:
            store = self.open_store()
        except StoreError as e:
            self._failed(f"the store cannot be opened: {e}")
            return
        try:
            while not self.stop.requested:
                with self._lock:
                    due_in = self._sent_at + self.stop_every_s - self.monotonic()
                    # none sent yet: the first look's, now; piled up: the oldest is stale
                    # by the time it answers
                    if self._sent_at == float("-inf") or self._in_flight >= HEADS_IN_FLIGHT:
                        due_in = self.stop_every_s
                if due_in > 0:
                    if self._wait(due_in):
                        return
                    continue
                sent = self._claim(self.stop_every_s)
                if sent is not None:
                    self._send_apart(store, sent)
        except Exception as e:  # a thread that cannot start: fail closed, not silently
            self._failed(f"the watch could not HEAD {self.stop_key} ({type(e).__name__}: {e})")
        finally:
            self._end_heads(store, 0)

    def _send_apart(self, store: ObjectStore, sent: float) -> None:
        with self._lock:
            self._in_flight += 1
        try:
            self.spawn(functools.partial(self._head_apart, store, sent),
                       "epochgc-watch-stop-head")
        except BaseException:
            with self._lock:
                self._in_flight -= 1
            raise

    def _head_apart(self, store: ObjectStore, sent: float) -> None:
        """One HEAD of the STOP thread, in its own thread. Fails closed as a look does: a
        HEAD that fails stops the round (unknown health). Once the watch is closed its
        answer is dropped (the stage is over: nothing is left for it to stop)."""
        try:
            found = self._found(store, sent)
        except Exception as e:  # fail closed, naming what went wrong
            if not self._done.is_set():
                self._failed(f"the watch could not HEAD {self.stop_key} "
                             f"({type(e).__name__}: {e})")
        else:
            if found and not self._done.is_set():
                self.stop.request(STOPPED)
        finally:
            self._end_heads(store, 1)

    def _end_heads(self, store: ObjectStore, answered: int) -> None:
        """A HEAD answered (`answered` 1) or the STOP thread over (0): the last of them
        closes the store they share."""
        with self._lock:
            self._in_flight -= answered
            self._heads_over = self._heads_over or not answered
            last = self._heads_over and self._in_flight == 0
        if last:
            store.close()

    def _failed(self, why: str) -> None:
        """The STOP thread could not HEAD: the round stops (unknown health), unless the
        watch is closed already (the stage is over)."""
        if self._done.is_set():
            return
        self._unhealthy(HealthVerdict.unknown(why))
        self.stop.request(UNHEALTHY)

    def _look(self) -> bool:
        """One `poll_once`; True if it stopped the round. Any exception stops it too: a
        watch that died would let the round run on unwatched (issue 30 review: a nested pause
        document raised RecursionError in this thread)."""
        try:
            why = self.poll_once()
        except Exception as e:  # fail closed, naming what went wrong
            self._unhealthy(HealthVerdict.unknown(
                f"the watch could not look ({type(e).__name__}: {e})"))
            why = UNHEALTHY
        if why is None:
            return False
        self.stop.request(why)
        return True

    def _run(self) -> None:
        while not self._wait(self.wait_s) and not self.stop.requested:
            if self._look():
                return


def go_on(stop: RoundStop, firm: Callable[[], bool] | None, watch: RoundWatch | None,
          within_s: float) -> Callable[[], bool]:
    """The driver's answer to its tasks' "go on?" (`gate.py`): go while the round is not
    asked to stop, its lease is firm, and (with a watch) a HEAD of its STOP marker that
    found none was sent within `within_s` (`bounds.LOOK_FRESH_S`). A lease no longer firm
    stops the round (`lease-unsure`): no task may go on once a recovery could take the
    round for dead. A watch that has not looked lately stops it too (`watch-late`): its
    silence could hide a STOP written meanwhile."""

    def is_open() -> bool:
        if stop.requested:
            return False
        if firm is not None and not firm():
            stop.request(LEASE_UNSURE)  # the record says why the round stopped
            return False
        if watch is not None and not watch.fresh(within_s):
            stop.request("watch-late")
            return False
        return True

    return is_open
