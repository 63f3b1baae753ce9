"""Bounds on a GC driver's own S3 requests once its round is asked to stop (issue 41,
newuser10 L4/L5).

The driver's writes (START, STOP, END, the record, the lease, the journal read-back) went
through the delete path's client: a 60 s read timeout and botocore's adaptive retries (10
attempts). On an endpoint that accepts and never answers, a Ctrl-C waited minutes with no
line. While a bound is installed (`installed`, by the `gc` command in the driver process
only: executors run in Python workers of their own and keep the client the stop bound of
`gc/bounds.py` rests on), every S3Store made in this process:
- waits `timeout_s` (the control reads' read timeout, `patience.py`) for each attempt's
  answer: a small JSON object's PUT or HEAD answers in milliseconds (AWS's latency advice,
  cited in `patience.py`);
- says a write still unanswered after `say_after_s`, as the reads do;
- once `stopping()` is true, sends no retry of a call (an attempt past the first, by
  botocore's own `amz-sdk-request: attempt=N` header: `botocore/handlers.py`
  `add_retry_headers`), and, once an attempt made after the stop got no answer (a connect
  or read timeout), sends no further request at all: the store is silent, and the round
  exits saying what it could not write (`gc-admin reset --force` records it later).
A store that answers (throttles included) is unaffected until the stop, and after it each
call still gets its first attempt, so a stopped round on a live store writes its record.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field


class StoppedNotSent(Exception):
    """Raised from botocore's `before-send` hook: this attempt was not sent because the round
    is stopping. Not a botocore error, so botocore does not retry it."""


@dataclass(frozen=True)
class DriverBound:
    """The driver's request bounds: `timeout_s` per attempt, the waiting line (`say`, every
    `say_after_s`), and whether the round is stopping."""

    timeout_s: float
    stopping: Callable[[], bool]
    say: Callable[[str], None] | None = None
    say_after_s: float = 10.0
    # Set once an attempt sent after the stop got no answer (shared by every store).
    silent: threading.Event = field(default_factory=threading.Event, compare=False)
    # Per calling thread, since its call began (`begin`): its failed attempts, and whether
    # the last was a connection refused (the waiting line's state: newuser13 Q2, "no
    # answer yet" was said of a port that refused each attempt at once).
    _failed: dict[int, tuple[int, bool]] = field(default_factory=dict, compare=False)
    # Seconds left of the round's GC lease (`hold`), as the lease measures them.
    _lease_left: list[Callable[[], float]] = field(default_factory=list, compare=False)

    def hold(self, left: Callable[[], float]) -> None:
        """The process holds a GC lease that ends in `left()` seconds (as of its last write
        that succeeded, on the lease's own clock, CLOCK_BOOTTIME, which counts a suspend:
        `gc/lease.py` `Lease.left_s`): from then on no attempt is sent whose answer could
        come after it (its connect and read timeouts), stopped or not.
        Past it another round may take the store over and read this round back (its dead-
        round recovery): a write landing then is one that recovery did not see (newuser13
        Q6: a round wrote its END 5.5 minutes past its lease)."""
        self._lease_left[:] = [left]

    def attempt_s(self) -> float:
        """The longest an attempt of a bounded client waits: its connect timeout and its
        read timeout, each at most `timeout_s` (`s3.S3Store._new_client`)."""
        return 2 * self.timeout_s

    def refuse_past_lease(self) -> None:
        """Raises `StoppedNotSent` if an attempt sent now could be answered past the
        round's lease (`hold`). Run at `before-send` and again before each connect and each
        write of a write's attempt (`s3.S3Store._refuse_late` arms it in `connectcheck`:
        review rev38z14 finding 1, a dead first address or a slow name lookup after
        `before-send` sent a driver's PUT 100 s past its lease)."""
        for lease_left in self._lease_left:
            left = lease_left()
            if left < self.attempt_s():
                when = (f"expires in {left:.0f} s" if left > 0
                        else f"expired {-left:.0f} s ago")
                raise StoppedNotSent(
                    f"not sent: the round's GC lease {when} (as of its last renewal), "
                    f"sooner than this request's answer may take ({self.attempt_s():g} s): "
                    "another round may hold the store by then")

    def begin(self, thread: int) -> None:
        """A call of `thread` begins: its attempts counted afresh."""
        self._failed.pop(thread, None)

    def state(self, thread: int) -> str:
        """What the waiting line says of `thread`'s call."""
        from epochgc.impl.store.readretry import attempts_text

        n, refused = self._failed.get(thread, (0, False))
        return f"connection refused ({attempts_text(n)})" if refused else "no answer yet"

    def before_send(self, request: object = None, **_kwargs: object) -> None:
        """botocore's `before-send` handler: refuses any attempt whose answer could come
        past the round's lease (`hold`), a retry once stopping, and every request once the
        store was silent after the stop."""
        self.refuse_past_lease()
        if not self.stopping():
            return
        if self.silent.is_set():
            raise StoppedNotSent("not sent: the round is stopping and the store did not "
                                 f"answer since (no answer within {self.timeout_s:g} s)")
        if _attempt(request) > 1:
            raise StoppedNotSent("not retried: the round is stopping (one attempt after "
                                 "the stop)")

    def after_attempt(self, caught_exception: BaseException | None = None,
                      **_kwargs: object) -> None:
        """botocore's `needs-retry` event (after each attempt): notes a silent store once
        stopping. Returns None: botocore's own retry handler decides."""
        from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError

        from epochgc.impl.store.readretry import refused

        if caught_exception is not None:
            me = threading.get_ident()
            n, _ = self._failed.get(me, (0, False))
            self._failed[me] = (n + 1, refused(caught_exception))
        if self.stopping() and isinstance(caught_exception,
                                          ConnectTimeoutError | ReadTimeoutError):
            self.silent.set()


def _attempt(request: object) -> int:
    headers = getattr(request, "headers", None)
    value = headers.get("amz-sdk-request") if headers is not None else None
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    for part in str(value or "").split(";"):
        name, _, number = part.strip().partition("=")
        if name == "attempt" and number.isdigit():
            return int(number)
    return 1


_current: DriverBound | None = None


def current() -> DriverBound | None:
    """The bound installed in this process, if any."""
    return _current


@contextlib.contextmanager
def installed(bound: DriverBound) -> Iterator[DriverBound]:
    """Stores made while the block runs (in this process) take `bound`."""
    global _current
    previous, _current = _current, bound
    try:
        yield bound
    finally:
        _current = previous
