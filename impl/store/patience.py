"""How long a control-plane read of an S3 store may go unanswered (issue 41, newuser8 I10).

An endpoint that accepts connections and never answers (a wrong port behind a proxy, a
stuck load balancer) held `epochgc gc` silent for 11 minutes on its first HEAD: botocore's
60 s read timeout times 11 attempts (`retries.max_attempts` counts retries, so 10 is 11
attempts: botocore's `Config` docs, "max_attempts -- ... the maximum number of retry
attempts", https://botocore.amazonaws.com/v1/documentation/api/latest/reference/
config.html). The small reads a command makes before any work (partitions.json, the pause
state, the reports, `gc-admin`'s reads) go through a client of their own, configured with
botocore's own `Config`: `read_timeout` (seconds to wait for the next bytes of an answer)
and `retries.total_max_attempts` 1 ("the maximum number of total attempts that will be made
on a single request. This includes the initial request", same page): the attempts are
`readretry.run`'s, which keeps a throttling store apart. The delete path keeps
`s3.CONNECT_TIMEOUT_S` / `READ_TIMEOUT_S`: the stop bound rests on them (`gc/bounds.py`).

A HEAD or a GET of a small JSON object answers in milliseconds; AWS advises retrying a
latency-sensitive request that has not answered in about 2 seconds ("Timeouts and Retries
for Latency-Sensitive Applications", https://docs.aws.amazon.com/AmazonS3/latest/userguide/
optimizing-performance-guidelines.html). 10 s per attempt is five times that, and 3
attempts end a silent endpoint's read within ~30 s (the backoff before retry n is random
up to 0.05 * 2**(n-1) s, botocore's own for a failure that is not a throttle).

A store that throttles (503 SlowDown, 429, ...) is given more attempts, with a longer
backoff (`throttled_attempts`, `throttled_base_s`; the rule and its sources:
`readretry.py`): it answers, and asks to be asked more slowly.

While such a read waits longer than `say_after_s`, `waiting` says so, so an operator is not
left with silence. Tests shorten the settings through the environment (`ENV`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from epochgc.impl.store.base import StoreError
from epochgc.impl.store.readretry import Backoff, Failure, Tries

# The environment's overrides (tests: a silent endpoint's wait is the configured timeout,
# made small, not a race against a sleep).
READ_TIMEOUT_ENV = "EPOCHGC_CONTROL_READ_TIMEOUT_S"
ATTEMPTS_ENV = "EPOCHGC_CONTROL_ATTEMPTS"
SAY_AFTER_ENV = "EPOCHGC_WAITING_LINE_AFTER_S"
THROTTLED_ATTEMPTS_ENV = "EPOCHGC_CONTROL_THROTTLED_ATTEMPTS"
THROTTLED_BASE_ENV = "EPOCHGC_CONTROL_THROTTLED_BASE_S"
ENV = (READ_TIMEOUT_ENV, ATTEMPTS_ENV, SAY_AFTER_ENV, THROTTLED_ATTEMPTS_ENV,
       THROTTLED_BASE_ENV)
# The most each setting takes (newuser13 Q5: 1e9 s per attempt was accepted, which turns
# every bounded wait the docs promise into a hang on a silent store). A wait (an attempt's
# read timeout, the time before the waiting line, the backoff base) at most the GC lease's
# 600 s (`gc.lease.DEFAULT_LEASE_S`; no option sets another): a driver whose one read
# could wait longer than the lease it holds outlives it, its round taken for dead. The
# attempts (the default 3 and 10) at most 1,000 each: past that a typo (1e9); a count does
# not bound the time (a silent store's attempts each take the read timeout), which the
# waiting line says as it goes, and a signal ends; the tests use 1,000 to keep a read
# retrying until their signal.
MOST_WAIT_S = 600.0
MOST_ATTEMPTS = 1000
MOST_THROTTLED_ATTEMPTS = 1000


class BadSetting(StoreError):
    """An environment setting that is not what it must be: a usage error (exit 64), said
    before any work (`check_settings`)."""


@dataclass(frozen=True)
class Patience:
    """A control-plane read's bounds: each attempt's read timeout, the attempts (the first
    included) of a read that fails or gets no answer, after how long a read still
    unanswered is said (`waiting`), and the attempts and backoff base of a read the store
    throttles (`readretry.py`)."""

    read_timeout_s: float = 10.0
    attempts: int = 3
    say_after_s: float = 10.0
    throttled_attempts: int = 10
    throttled_base_s: float = 1.0

    def __post_init__(self) -> None:
        if not (self.read_timeout_s > 0 and self.attempts >= 1 and self.say_after_s > 0
                and self.throttled_attempts >= 1 and self.throttled_base_s > 0):
            raise ValueError(f"invalid control-read bounds {self}")

    def backoff(self) -> Backoff:
        return Backoff(self.attempts, self.throttled_attempts,
                       throttled_base_s=self.throttled_base_s)

    @classmethod
    def from_env(cls) -> Patience:
        """The defaults, each replaced by its environment variable if set; StoreError
        naming the variable if one is not a positive number."""
        base = cls()
        return cls(_number(READ_TIMEOUT_ENV, base.read_timeout_s, MOST_WAIT_S),
                   int(_number(ATTEMPTS_ENV, base.attempts, MOST_ATTEMPTS, whole=True)),
                   _number(SAY_AFTER_ENV, base.say_after_s, MOST_WAIT_S),
                   int(_number(THROTTLED_ATTEMPTS_ENV, base.throttled_attempts,
                               MOST_THROTTLED_ATTEMPTS, whole=True)),
                   _number(THROTTLED_BASE_ENV, base.throttled_base_s, MOST_WAIT_S))

    def no_answer(self) -> str:
        """The end of the error line of a read that got no answer."""
        tries = f"{self.attempts} attempts" if self.attempts > 1 else "1 attempt"
        return f"no answer within {self.read_timeout_s:g} s ({tries})"

    def throttled(self, tries: Tries) -> str:
        """The end of the error line of a read the store kept throttling."""
        return (f"still throttled after {tries.count(Failure.THROTTLED)} attempts "
                f"({tries.waited_s:.1f} s of backoff)")


def _number(name: str, default: float, most: float, whole: bool = False) -> float:
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        value = -1
    if not 0 < value <= most:  # NaN and infinity fail it too
        kind = "a whole number" if whole else "a number of seconds"
        raise BadSetting(f"environment variable {name}={text!r} is not {kind} above 0 and "
                         f"at most {most:g}")
    return value


def waiting_line_after_s() -> float:
    """After how long a wait still unanswered is said (`waiting`): `say_after_s`, or its
    environment variable; BadSetting naming the variable if that is not a positive
    number, at most `MOST_WAIT_S`."""
    return _number(SAY_AFTER_ENV, Patience.say_after_s, MOST_WAIT_S)


def check_settings() -> None:
    """Every setting above read now: BadSetting names the first that is wrong. A command
    calls it before its work, so a bad one is a usage error (64) with nothing done
    (newuser13 Q5: `gc` found it at its first read, exit 1)."""
    Patience.from_env()


@contextlib.contextmanager
def waiting(say: Callable[[str], None] | None, endpoint: str, what: str,
            after_s: float, state: Callable[[], str] = lambda: "no answer yet",
            ) -> Iterator[None]:
    """Say "waiting for ENDPOINT: STATE (WHAT, N s)" each `after_s` seconds while the block
    runs (from a daemon thread; none at all if `say` is None); `state` says why (no answer
    yet; the store throttles)."""
    if say is None:
        yield
        return
    done = threading.Event()
    began = time.monotonic()

    def run() -> None:
        while not done.wait(after_s):
            say(f"waiting for {endpoint}: {state()} ({what}, "
                f"{time.monotonic() - began:.0f} s)")

    threading.Thread(target=run, name="epochgc-waiting", daemon=True).start()
    try:
        yield
    finally:
        done.set()
