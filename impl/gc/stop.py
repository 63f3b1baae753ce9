"""Stopping a round gracefully (issue 29): SIGINT, SIGTERM or the round's --deadline ask the
round to stop; the driver then writes the journal's STOP marker, each task stops at its next
delete batch (the batches in flight finish and are journaled), and the round ends with an
END record that says `interrupted`.

A signal handler only records the request and wakes a thread: the marker is written by that
thread, never from inside the handler (which runs between two bytecodes of whatever the main
thread was doing, possibly a store request on the same client). A second signal raises
KeyboardInterrupt: the operator insists; the journal still holds what was deleted. It does
so once, and never once the round is finishing (`RoundStop.finishing`: its END, its record,
its lease): a KeyboardInterrupt there left the lease live for 10 minutes, or no record at
all (newuser3 N1); a later signal is only said.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import select
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Protocol

from epochgc.impl.signals import SIGNALS as _COMMAND_SIGNALS
from epochgc.impl.signals import Interrupted, record, unblock_output
from epochgc.impl.store.driverbound import DriverBound
from epochgc.impl.store.patience import Patience

# SIGHUP: a terminal's hangup, as SIGTERM, unless ignored at start (`nohup`): the same set
# as every command's (impl/signals.py SIGNALS says why).
SIGNALS = {s: s.name for s in _COMMAND_SIGNALS}
ANNOUNCE_WAIT_S = 5.0  # a bound for a stream that blocks, not a timing assumption


class RoundStop:
    """A request to stop the round, with the reason ("SIGINT", "SIGTERM", "deadline")."""

    def __init__(self) -> None:
        self.reason: str | None = None
        # What a stop does at this stage of the round, for `announce` (the round sets it as
        # it goes: before its deletes, while they run).
        self.means = "no key deleted yet; ending the round"
        self._event = threading.Event()
        # Set with `_event`, and by `close`: what the helper threads (`announce`, `arm`)
        # wait on, so that each ends with the round instead of outliving it.
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []  # the helper threads `close` waits for
        self._abandoned = False  # `abandon`: `close` waits for them no longer
        self._further = threading.Event()  # a request made after the first (`wait_further`)
        self._said = threading.Event()  # set once `announce` has said the stop (or never will)
        self._said.set()
        self._lock = threading.Lock()
        self._armed = False
        self._disarmed = False  # `disarm`: the armed action is no longer wanted
        self._wake_fd: int | None = None  # the waker thread's pipe (`_start_waker`)
        # Whether a later signal may still raise KeyboardInterrupt: not once one has, and
        # never again once the round is finishing (its record and lease must be written
        # whole: newuser3 N1).
        self.insist_open = True
        self._say: Callable[[str], None] | None = None  # `announce`'s, for later signals
        self._again: list[_Later] = []  # later signals not acted on, to be said (`again`)
        # Issue 41 (newuser8 I10): before the round writes anything to the store (its lease,
        # its START), a signal ends the command at once (`before_round`): a stop request
        # waited for the store read under way, 10 minutes on a silent endpoint.
        self.unstarted = False
        self.cut_short = False  # a signal ended it so (nothing of the round is written)
        # The first signal received, whatever the stop's own reason (newuser13 Q6: the
        # safety monitor had stopped the round; SIGINT, SIGINT, SIGTERM were "again" and
        # the driver's writes kept retrying a silent store for minutes).
        self.signalled: str | None = None
        # That first signal, when it came after a stop of another kind (the monitor's, the
        # deadline's, a pause's) and before the round's exit code was decided (`decide`):
        # the command ends by it, 128 + its number, and the record keeps the stop's reason
        # (newuser14 R1: it was exit 1, "again", for an operator's one Ctrl-C; a script
        # running the command must stop, impl/entry.py). A later signal changes nothing.
        self.ended_by: str | None = None
        self.decided = False  # the exit code is decided (`decide`): a signal only said
        self.deadline_passed = False  # the --deadline's request came, first or not
        # A signal came while `finishing`, which began with no stop requested
        self.finishing_clean = False
        # The round's outcome is set (`work_over`): a stop from now on stops nothing.
        self.outcome_set = False
        # The first stop came once the outcome was set: the command's last line says it
        # (gc's cli: `came`), `announce` does not (newuser15 S4: one SIGTERM right after
        # the deletes was two lines, "SIGTERM: stopping: writing the round's record..."
        # then "SIGTERM after the round ended: its record stands, exit code 0").
        self.late = False

    def before_round(self) -> None:
        """From now until `round_begins`, the first SIGINT or SIGTERM raises
        KeyboardInterrupt in the main thread at once (the handler of
        `install_signal_handlers`): nothing of the round is in the store to finish, and the
        command is likely waiting for a store read (issue 41, newuser8 I10)."""
        self.unstarted = True
        self.means = "nothing written to the store yet; ending now"

    def work_over(self) -> None:
        """The round's outcome is set (its stage has taken `reason` as its interruption or
        none): a stop from now on is `late`."""
        self.outcome_set = True

    def round_begins(self) -> None:
        """The round is about to write to the store (its lease) or start Spark: a signal
        from now on stops it gracefully, as before."""
        self.unstarted = False
        self.means = "no key deleted yet; ending the round"

    @contextlib.contextmanager
    def finishing(self, record: bool = True, lease: bool = True,
                  dry_run: bool = False) -> Iterator[None]:
        """The round's END, record and lease release: a signal from now on (in this
        process) never raises; it is said, and the round's own exit code stands. `record`:
        the round writes its record; `lease`: it holds a lease to release; `dry_run`: it
        is a dry run (which writes nothing and holds no lease, issue 29). What a stop does
        is said as what the round does (newuser10 L10: a dry run stopped as it ended said
        "writing the round's record and releasing its lease"), and once it is over, that
        it is over."""
        if not self.cut_short:  # else nothing is written: what it does stays said
            self.means = _finishing(record, lease, dry_run)
        # Not stopped when it began finishing: a signal from now on stops nothing, and the
        # command's last line says it with the round's exit code (gc's cli: `came`), so
        # `announce` says nothing of it (newuser14 R6: one Ctrl-C was two lines, "SIGINT:
        # stopping: writing the round's record..." then "SIGINT after the round ended").
        self.finishing_clean = not self.requested
        self.unstarted = False  # a round refused before it began still writes its record
        self.insist_open = False
        try:
            yield
        finally:
            if self.reason is None:  # no signal while finishing: a later one is "after"
                self.finishing_clean = False
            if not self.cut_short:
                self.means = ("the dry run is over (it writes no record and holds no "
                              "lease); ending" if dry_run else "the round is over; ending")

    def again(self, name: str, first: bool = False, at_once: bool = False) -> None:
        """Say that a later signal (or the deadline: `name`) came and is not acted on: from
        the waker thread (a signal handler must neither write to a stream it may have
        interrupted nor take a lock, which starting a thread does), else from a new daemon
        thread. `first`: the first of its kind, after a stop of another kind (the safety
        monitor's, a pause: newuser13 Q6), said as such, not as "again". `at_once`: it
        ends the round at once (newuser14 R1: such a signal was not said when it came)."""
        if self._say is None:
            return
        self._again.append(_Later(name, first, at_once))  # list.append: atomic under the GIL
        fd = self._wake_fd
        if fd is None:
            self._start(self._say_again, "epochgc-stop-again")
            return
        with contextlib.suppress(OSError):
            os.write(fd, b"\1")

    def _say_again(self) -> None:
        say = self._say
        while self._again:
            later = self._again.pop(0)
            if say is None:
                continue
            if later.at_once:
                line = (f"gc: {later.name}: the round was already stopping ({self.reason}); "
                        "stopping it at once")
            elif later.first:
                line = f"gc: {later.name}: already stopping ({self.reason}): {self.means}"
            else:
                line = f"gc: {later.name} again: already stopping: {self.means}"
            say(line + self._code_said(later))

    def _code_said(self, later: _Later) -> str:
        """How a signal that is only said leaves the exit code. The first signal after a
        stop of another kind, before the exit code is decided, ends the command by it
        (`ended_by`); any other signal changes nothing: the first signal's code stands
        (SIGTERM, then SIGINT: 143), or, with no signal before the exit code was decided,
        the stop's. Said, so that an operator who sent SIGINT knows what the command
        ends with (newuser13 Q6, newuser14 R1)."""
        name = later.name
        if name not in SIGNALS.values():  # the deadline
            return ""
        decides = self.ended_by or (self.reason if self.reason in SIGNALS.values() else None)
        if decides == name:
            if later.first and self.ended_by == name:
                return (f"; the record keeps the {self.reason} stop, and the command then "
                        f"ends by {name} (exit code {128 + signal.Signals[name]})")
            return ""
        code = 128 + signal.Signals[name]
        if decides is not None:
            return (f"; the exit code stays {decides}'s, {128 + signal.Signals[decides]}, "
                    f"not {code}")
        return f"; the exit code stays the {self.reason} stop's, not {code}"

    def decide(self) -> str | None:
        """The round's exit code is decided now (its record is about to be made): from here
        a signal is only said and changes nothing. The signal the command ends by, if one
        came after a stop of another kind (`ended_by`); a handler runs in the main thread
        between two bytecodes, so a signal is either before this call (it counts) or
        after it (said as not changing the code)."""
        self.decided = True
        return self.ended_by

    @property
    def requested(self) -> bool:
        return self.reason is not None

    def operator_stops(self) -> bool:
        """Whether an operator or the clock stopped the round (a signal, even one after
        another stop, or the deadline)."""
        return (self.signalled is not None or self.deadline_passed
                or self.reason in SIGNALS.values())

    def bounds_requests(self) -> bool:
        """Whether the driver's requests are bounded as for a stop (`driverbound.
        DriverBound`: none retried, none sent once the store left one unanswered): once
        the round is stopping, for any reason. newuser13 Q6: after the safety monitor's
        stop on a silent store each write kept botocore's retries (~150 s a write), and
        the round outlived its lease; only a signal or the deadline cut them short. A
        store that answers still gets each call's first attempt, so a stopped round on a
        live store writes its record; one throttled answer then fails that write, said
        with what records the round later (`gc-admin reset --force`)."""
        return self.requested or self.operator_stops()

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a request; True if one was made."""
        return self._event.wait(timeout)

    def wait_further(self, timeout: float, stopped_before: bool | None = None) -> bool:
        """Wait up to `timeout` seconds for a request to stop, or, if one was made before
        (`stopped_before`; default: now), for a further one (the --deadline passing after a
        SIGTERM; a second signal raises KeyboardInterrupt in the main thread instead, as
        everywhere): a wait the stop itself led to (the driver's wait for requests its
        killed tasks sent) still ends on the next request. True if one was made."""
        before = self.reason is not None if stopped_before is None else stopped_before
        return (self._further if before else self._event).wait(timeout)

    def request(self, reason: str) -> None:
        """Ask the round to stop; the first reason given is kept. Safe in a signal handler."""
        if reason == "deadline" and not self.deadline_passed:
            # newuser13 Q6: a deadline after the monitor's stop counts, and is said ("no
            # line ever mentions the deadline")
            self.deadline_passed = True
            if self.reason is not None:
                self.again("deadline", first=True)
        if self.reason is None:
            self.late = self.outcome_set
            self.reason = reason
        else:
            self._further.set()
        self._set()

    def _set(self) -> None:
        self._event.set()
        self._wake.set()

    def _start(self, target: Callable[[], None], name: str) -> None:
        """Start a helper thread that `close` waits for. Daemon, so that a stuck one (a
        stream that blocks) never holds the exit; `close` bounds the wait."""
        t = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(t)
        t.start()

    def close(self, timeout: float = ANNOUNCE_WAIT_S) -> None:
        """The round is over: stop the waker and end the helper threads (`announce`'s,
        `arm`'s; one that was never woken acts on nothing), waiting up to `timeout`
        seconds for them. A helper left writing to stderr while the interpreter shuts
        down aborts the process ("could not acquire lock for <stderr> at interpreter
        shutdown, possibly due to daemon threads", exit -6: CI, stop 48); and each round
        run in one process left its threads waiting for good. Idempotent; call from the
        thread that runs the round."""
        fd = self._wake_fd
        if fd is not None:
            self._wake_fd = None
            os.close(fd)  # the waker reads what is in its pipe, then end-of-file, and ends
        self._wake.set()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            if t is threading.current_thread():
                continue
            # In slices, so that a later signal (`abandon`, from its handler, which runs
            # in this thread between two slices' waits) ends the wait at once.
            while t.is_alive() and not self._abandoned:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                t.join(min(left, 0.05))
        self._threads = [t for t in self._threads if t.is_alive()]

    def abandon(self) -> None:
        """A signal after the first came: `close` waits no more for the helper threads (one
        blocked writing to a stderr nobody reads held the command `timeout` seconds past
        the second Ctrl-C: newuser23 F3, 5 s). Safe in a signal handler: one assignment."""
        self._abandoned = True

    def disarm(self) -> None:
        """What `arm` set up is no longer to be done for a request from now on (one made
        already is acted on): the stage it stops is over, and the round writes its own
        stage-end STOP (newuser14 R4: the deadline's STOP, then that one, each said failing
        on a silent store, the same fact twice)."""
        self._disarmed = True

    def request_from_signal(self, reason: str) -> None:
        """A signal handler's request: takes no lock. The handler runs in the main thread
        between two bytecodes, possibly while that thread holds the event's own lock (in
        `Event.wait` or `Event.set`, e.g. the recovery's wait, `wait`): `Event.set` there
        waited for a lock its own thread held, until a second signal (review rev38o,
        reasoned). The reason is recorded at once (`requested` is true); the event is set
        by the waker thread, woken through a pipe (os.write: no lock)."""
        if self.reason is None:
            self.late = self.outcome_set
            self.reason = reason
        fd = self._wake_fd
        if fd is None:
            self._set()  # no waker: set from here (not installed as a handler)
            return
        with contextlib.suppress(OSError):  # full (a wake is pending) or closed
            os.write(fd, b"\0")

    def _start_waker(self) -> None:
        """Start the thread that sets the event when a signal handler writes to its pipe
        (`close` stops it)."""
        r, w = os.pipe()
        os.set_blocking(w, False)
        self._wake_fd = w

        def run() -> None:
            try:
                while byte := os.read(r, 1):
                    if byte == b"\1":
                        self._say_again()
                    else:
                        self._set()
            finally:
                os.close(r)

        self._start(run, "epochgc-stop-waker")

    def arm(self, write_marker: Callable[[], None], on_error: Callable[[str], None],
            what: str = "write the STOP marker") -> None:
        """From now on a request (or one already made) writes the STOP marker (or does
        whatever else `write_marker` does, `what`), once, from a daemon thread; a failure
        is reported through `on_error`."""
        with self._lock:
            if self._armed:
                return
            self._armed = True

        def run() -> None:
            self._wake.wait()
            if self.reason is None or self._disarmed:  # closed, or over, with no request
                return
            # The operator hears of the stop before it acts (a round may end as soon as the
            # marker is there); bounded, as a stream that blocks must not hold up the stop.
            self._said.wait(ANNOUNCE_WAIT_S)
            try:
                write_marker()
            except Exception as e:  # the tasks then run to their end: reported, not fatal
                # newuser12 P15: the one line of the round without its "gc:" prefix.
                on_error(f"gc: could not {what}: {e}")

        self._start(run, "epochgc-stop")


@dataclass(frozen=True)
class _Later:
    """A signal (or the deadline) that came once the round was stopping (`RoundStop.again`)."""

    name: str
    first: bool  # the first of its kind, after a stop of another kind: not "again"
    at_once: bool = False  # it ends the stopping round at once (`SignalAgain`)


def _finishing(record: bool, lease: bool, dry_run: bool) -> str:
    """What a round does once it is finishing, in a stop's words."""
    if dry_run:
        return "the dry run writes no record and holds no lease; ending it"
    if record:
        return ("writing the round's record and releasing its lease" if lease
                else "writing the round's record")
    return "nothing of the round to record; ending it"


def announce(stop: RoundStop, say: Callable[[str], None],
             reasons: tuple[str, ...] = tuple(SIGNALS.values())) -> None:
    """Say at once, from a daemon thread, that a stop for one of `reasons` was received and
    what it does now (`stop.means`): issue 41, a Ctrl-C mid-round printed nothing until the
    round ended, up to 18 s later. Not from the signal handler, which runs between two
    bytecodes of whatever the main thread was doing (a write to the same stream, say).
    Said before the armed action (`RoundStop.arm`) runs."""
    stop._said.clear()
    stop._say = say

    def run() -> None:
        stop._wake.wait()
        try:
            if stop.reason in reasons and not (stop.finishing_clean or stop.late):
                say(f"gc: {stop.reason}: stopping: {stop.means}...")
            elif stop.reason == "deadline":
                # newuser14 R4: the --deadline passing was said by no line (a round whose
                # stage-end STOP was being retried on a silent store then ended 15 s later
                # on a read-back error)
                say(f"gc: the --deadline passed: stopping: {stop.means}...")
        finally:
            stop._said.set()

    stop._start(run, "epochgc-stop-said")


# How a round a second signal ended is said (its error, its record's and its last line).
STOPPED_AT_ONCE = "stopped at once"


class SignalAgain(KeyboardInterrupt):
    """A second SIGINT/SIGTERM while the round stops: the operator insists. Its text is the
    round's error as it is said, "SIGINT again: stopped at once" (newuser11 M8: it read
    "error: KeyboardInterrupt: SIGINT again", a Python class name, as if it crashed). The
    first signal after a stop of another kind (`after`: the monitor's, the deadline's) is
    not "again" (newuser13 Q6): "SIGINT after the round's stop (unhealthy): stopped at
    once"."""

    def __init__(self, name: str, after: str | None = None) -> None:
        said = f"{name} after the round's stop ({after})" if after else f"{name} again"
        super().__init__(f"{said}: {STOPPED_AT_ONCE}")


class _Deliveries:
    """How many times each signal was delivered since the Python-level handler last ran.
    CPython's C-level handler only sets a flag per signal ("tripped") and the Python-level
    one runs once for however many deliveries came before the main thread got to it (it
    waits in a call into Spark while another thread takes the signal: signal(7), a
    process-directed signal goes to any thread that does not block it). What it does per
    delivery is write the signal's number, one byte, to the wakeup fd (`signal.
    set_wakeup_fd`; CPython Modules/signalmodule.c `trip_signal`): read here, by the handler
    itself (non-blocking; no lock taken)."""

    def __init__(self) -> None:
        self._r: int | None = None
        self._w: int | None = None
        self._before = -1
        self._counts: dict[int, int] = {}

    def start(self) -> None:
        """Count from now on. Call from the main thread (`set_wakeup_fd` requires it)."""
        r, w = os.pipe()
        os.set_blocking(r, False)
        os.set_blocking(w, False)  # the C handler's write must never block
        try:
            self._before = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        except ValueError:  # not the main thread: nothing counted, one call is one press
            os.close(r)
            os.close(w)
            return
        self._r, self._w = r, w

    def extra(self, signum: int) -> int:
        """The deliveries of `signum` beyond the one this handler call is for."""
        r = self._r
        if r is None:
            return 0
        with contextlib.suppress(OSError):  # empty (EAGAIN), or closed
            while data := os.read(r, 512):
                for b in data:
                    self._counts[b] = self._counts.get(b, 0) + 1
        n = self._counts.pop(signum, 0)
        return max(0, n - 1)

    def stop(self) -> None:
        if self._r is None or self._w is None:
            return
        with contextlib.suppress(ValueError):
            signal.set_wakeup_fd(self._before)
        os.close(self._r)
        os.close(self._w)
        self._r = self._w = None


class Restore(Protocol):
    """`install_signal_handlers`'s undo: the previous handlers back (`handlers`), the
    round's helper threads ended."""

    def __call__(self, handlers: bool = True) -> None: ...


def install_signal_handlers(stop: RoundStop) -> Restore:
    """SIGINT and SIGTERM request `stop` (a second one raises KeyboardInterrupt); returns a
    function that restores the previous handlers (with `handlers=False`, leaves the
    handlers as they are: the caller installed the next ones first, so that no signal
    finds the previous ones in between, review41b B3). Call from the main thread."""
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    folded = _Deliveries()

    def handle(signum: int, _frame: FrameType | None) -> None:
        # newuser15 S8: presses the C-level handler took before this one ran (one call for
        # them all) are acted on one by one: the second is "again", as if it came later.
        for _ in range(folded.extra(signum)):
            _handle(signum)
        _handle(signum)

    def _handle(signum: int) -> None:
        name = SIGNALS[signal.Signals(signum)]
        first = stop.signalled is None
        # A write blocked on a reader that never reads (the round's progress line on a
        # stderr pipe nobody reads) goes nowhere from a later signal on: the round goes on
        # to its record and its end (newuser22 Y2: it ended only at the third signal, with
        # no record). The first signal throws nothing away. A helper thread left blocked
        # in a write there is not waited for (newuser23 F3).
        if not first and unblock_output():
            stop.abandon()
        if first:
            stop.signalled = name
            if stop.requested and stop.reason not in SIGNALS.values() and not stop.decided:
                stop.ended_by = name  # after another stop: the command ends by it (R1)
        if stop.unstarted and not stop.requested:
            # Before the round wrote anything (`RoundStop.before_round`): it ends now, out
            # of whatever read the main thread waits in; a later signal is only said.
            # Raised as the `epochgc` group's Interrupted (a KeyboardInterrupt naming its
            # signal): one that escapes the command still exits 128 + its number. Recorded
            # without waking `announce`: the command's last line says it (a thread's line
            # came after it, or named what a later stage would do).
            stop.reason = name
            stop.insist_open = False
            stop.cut_short = True
            record(signum)
            raise Interrupted(signum)
        if stop.requested and not stop.insist_open:
            # The first signal after a stop of another kind (the monitor's, a pause) is not
            # "again" (newuser13 Q6)
            stop.again(name, first=first and stop.reason != name)
            return
        if stop.requested:
            stop.insist_open = False  # once: the cleanup it starts is not cut short
            # py4j logs a KeyboardInterrupt inside one of its calls (the driver waits in
            # one for the whole stage) with a traceback on the root logger, and so do the
            # connections it then finds broken (issue 41 item 3: four tracebacks before
            # our one line). Nothing the command says goes through logging.
            logging.disable(logging.CRITICAL)
            after = stop.reason if first and stop.reason != name else None
            if after is not None:  # said when it comes, as a first signal is (R1)
                stop.again(name, first=True, at_once=True)
            raise SignalAgain(name, after)
        stop.request_from_signal(name)

    stop._start_waker()
    for s in SIGNALS:
        signal.signal(s, handle)
    folded.start()

    def restore(handlers: bool = True) -> None:
        if handlers:
            for s, h in previous.items():
                signal.signal(s, h)
        folded.stop()
        stop.close()  # stops the waker too

    return restore


def driver_bound(stop: RoundStop, patience: Patience,
                 say: Callable[[str], None] | None = None) -> DriverBound:
    """The bound on a round's driver requests (`driverbound.py`) that `stop` shortens: each
    attempt waits `patience.read_timeout_s` for its answer, said every `say_after_s`."""
    return DriverBound(patience.read_timeout_s, stop.bounds_requests, say, patience.say_after_s)


def deadline_timer(stop: RoundStop, seconds: float) -> threading.Timer:
    """A started daemon timer that requests `stop` ("deadline") after `seconds`."""
    t = threading.Timer(seconds, stop.request, ("deadline",))
    t.daemon = True
    t.start()
    return t


class HeldSignal:
    """The first SIGINT, SIGTERM or SIGHUP that came after the round ended while its output
    (a dry run's `--list -` and the summary after it) is still to be written: held, not
    acted on, while the command stops Spark and exports its metrics (bounded cleanups that
    must not be cut halfway), then raised where the output begins (`interruptible_output`).
    newuser10 L9: such a signal was taken as "after the round ended ... exit code 0",
    ignored, and the command then blocked on the unread pipe and exited 1 once the reader
    went."""

    def __init__(self) -> None:
        self.signum: int | None = None


def hold_signals() -> HeldSignal:
    """From now on the first SIGINT, SIGTERM or SIGHUP is recorded in the returned
    `HeldSignal` and otherwise ignored (a later one too: the first decides). The handler
    writes nothing (it may run between two bytecodes of a write to the same stream). Call
    from the main thread."""
    held = HeldSignal()

    def hold(signum: int, _frame: FrameType | None) -> None:
        if held.signum is None:
            held.signum = signum

    for s in SIGNALS:
        signal.signal(s, hold)
    return held


@dataclass
class OutputProgress:
    """How far a dry run's `--list -` output got, for the line of a signal that cut it."""

    keys: int  # in the list, in all
    begun: bool = False  # its first line is written
    listed: bool = False  # every line is written; the summary follows

    def said(self) -> str:
        if self.listed:
            return (f"the list was written ({self.keys:,} key(s)); the summary after it was "
                    "cut short")
        if self.begun:
            return f"the list was cut short ({self.keys:,} key(s) in all)"
        return f"the list was not written ({self.keys:,} key(s) in all)"


@contextlib.contextmanager
def interruptible_output(what: Callable[[], str],
                         held: HeldSignal | None = None) -> Iterator[None]:
    """Output that is the command's work (a dry run's `--list -`), written after the round:
    a SIGINT, SIGTERM or SIGHUP while it is written (a write blocked on a reader that never
    reads: `| less` left open, newuser9 K11), or one `held` since the round ended
    (newuser10 L9), stops the writing and raises `Interrupted` (`what()` says how far it
    got), and stdout is dropped so the exit cannot block on it again. A handler that raises
    interrupts the blocked write: PEP 475, "if the signal handler raises an exception, the
    system call is not retried". Call from the main thread."""
    from epochgc.impl import closedout

    def cut(signum: int, _frame: FrameType | None) -> None:
        raise Interrupted(signum, what())

    previous = {s: signal.signal(s, cut) for s in SIGNALS}
    try:
        if held is not None and held.signum is not None:
            raise Interrupted(held.signum, what())
        yield
    except Interrupted:
        closedout.drop()
        raise
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


class LateSignal:
    """The first signal that came after the round's record (`absorb_late_signal`), or
    None: a push still waiting is given up for it (newuser20 W4). `writing`: what output
    the command is writing now ("the summary"), or None: a signal after the first one,
    while it is written, cuts it short (review41b B1)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.writing: str | None = None
        # The command's first signal came before the record (it stopped the round): every
        # signal from now on is a later one (newuser22 Y2).
        self.stopped = False

    @contextlib.contextmanager
    def cuts(self, what: str) -> Iterator[None]:
        """`what` (the command's output) is written under this: a signal after the first
        one cuts it short."""
        self.writing = what
        try:
            yield
        finally:
            self.writing = None


def absorb_late_signal(exit_code: int, say: Callable[[str], None] | None,
                       stands: str = "its record stands", stopped: bool = False,
                       abandon: Callable[[], None] = lambda: None) -> LateSignal:
    """The round has ended and its record is written: every SIGINT, SIGTERM or SIGHUP from
    now on is said (`say`) and otherwise ignored, so that the exit code stays the record's
    (newuser41 item 11: one that landed after the summary ended the process 143/130, or by
    the default action, -15/-2, while the record said how the round had ended). The first
    is kept in the returned `LateSignal`: the metrics' push gives up for it. newuser20 W4:
    the handlers in place before this call came back at the first, so a second Ctrl-C
    (the first one's push still waiting) ended a done round 130. Call from the main
    thread. One that came as the round ended, already said as late, counts as the first:
    the caller sets it in `LateSignal.signum`.

    A signal after the first, while the command writes its output (`LateSignal.writing`
    set), cuts that output short (`_cut_output`), as every command's second signal does
    (README: "A second signal while that last output is written (to a reader that never
    reads) cuts the write short"; review41b B1: said and ignored, a summary blocked on a
    pipe nobody read kept gc running for good, SIGQUIT or SIGKILL the only way out). The
    exit code stays the record's: the handler returns, and the write it interrupted is
    retried (PEP 475) onto /dev/null, which takes it at once. Not while Spark is stopped
    or the push waits (`writing` None): those are not cut short.

    `stopped`: a signal stopped the round, so each one from now on is a later signal, the
    first of them included: it points stdout and stderr that a reader has stopped reading
    at /dev/null (`unblock_output`) and cuts the output short (newuser22 Y2: taken as the
    first late one, its own line blocked on a stderr pipe nobody read, and the round
    ended only at the third signal). `abandon`: called for such a later signal once output
    went to /dev/null (`RoundStop.abandon`: no more waiting for the round's helper
    threads, one of which may be blocked in a write to that pipe)."""
    got = LateSignal()
    got.stopped = stopped

    def late(signum: int, _frame: FrameType | None) -> None:
        first = got.signum is None
        if first:
            got.signum = signum
        later = not first or got.stopped
        # Whatever write blocks on a reader that never reads (the stop's own line on a
        # full stderr pipe, the first late signal's) goes nowhere from a later signal on
        # (newuser22 Y2: every later signal blocked in its own line); a helper thread
        # blocked in one is not waited for (newuser23 F3).
        if later and unblock_output():
            abandon()
        if got.writing is not None and later:
            _cut_output(signum, got.writing, say is not None,
                        f"{stands}, exit code {exit_code}")
            return
        if say is None:
            return
        line = (f"gc: {SIGNALS[signal.Signals(signum)]} after the round ended: {stands}, "
                f"exit code {exit_code}")
        try:
            say(line)
        except RuntimeError:  # it came inside the main thread's own write to stderr
            with contextlib.suppress(OSError):
                os.write(2, f"{line}\n".encode("utf-8", "backslashreplace"))

    for s in SIGNALS:
        signal.signal(s, late)
    _ignore_at_exit(late)
    return got


def _cut_output(signum: int, what: str, say: bool, stands: str) -> None:
    """Drop the rest of the command's output: descriptor 1 onto /dev/null
    (`closedout.drop`, as `interruptible_output` does), so that a write blocked on a reader
    that never reads returns; and say so in one line on stderr (`say`) if stderr takes it
    now. Stderr the same pipe as stdout (`2>&1`) is full as well: it goes to /dev/null too,
    so that no write of ours to it blocks for good (the one the main thread may be in, a
    late signal's line)."""
    from epochgc.impl import closedout

    same = _same_pipe(1, 2)
    closedout.drop()
    line = (f"gc: {SIGNALS[signal.Signals(signum)]} while {what} was written: "
            f"{what} was cut short; {stands}\n")
    if say and _takes_now(2):
        with contextlib.suppress(OSError):
            os.write(2, line.encode("utf-8", "backslashreplace"))
    elif same:
        closedout.to_devnull(2)


def _same_pipe(a: int, b: int) -> bool:
    """Whether descriptors `a` and `b` are the same pipe or socket (a file never blocks)."""
    try:
        sa, sb = os.fstat(a), os.fstat(b)
    except OSError:
        return False
    return ((sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)
            and (stat.S_ISFIFO(sa.st_mode) or stat.S_ISSOCK(sa.st_mode)))


def _takes_now(fd: int) -> bool:
    """Whether a line written to `fd` now does not block: poll(2) says it is writable (a
    pipe with room for a write of up to PIPE_BUF bytes, pipe(7); a terminal; a file)."""
    p = select.poll()
    p.register(fd, select.POLLOUT)
    try:
        events = p.poll(0)
    except OSError:
        return False
    return any(e & select.POLLOUT and not e & (select.POLLERR | select.POLLNVAL)
               for _, e in events)


_ABSORBING: list[Callable[[int, FrameType | None], None]] = []  # `absorb_late_signal`'s


def _ignore_at_exit(late: Callable[[int, FrameType | None], None]) -> None:
    """Once Python code has stopped running at exit, a signal is ignored where `late` still
    absorbs it (newuser13 Q1: one that landed up to ~0.5 s after the summary killed `gc` by
    its default action, 143/130, no line, while its record said done, exit 0). At
    interpreter finalization, after the atexit callbacks, CPython restores the default
    action of every signal with a Python handler (`_PySignal_Fini`, Modules/signalmodule.c:
    "Restore default signals", skipped for SIG_IGN and SIG_DFL), and then finalizes the
    modules, py4j's and PySpark's included, which takes that long. Registered late (atexit
    runs the last registered first), so from the atexit callbacks on, such a signal is
    ignored without a line: the exit code is the record's either way."""
    _ABSORBING.append(late)
    if len(_ABSORBING) == 1:
        atexit.register(_ignore_absorbed)


def _ignore_absorbed() -> None:
    for s in SIGNALS:
        if signal.getsignal(s) in _ABSORBING:
            signal.signal(s, signal.SIG_IGN)
