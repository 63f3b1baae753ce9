"""How long a control-plane read of an S3 store may go unanswered (issue 41, newuser8 I10).

An endpoint that accepts connections and never answers (a wrong port behind a proxy, a
stuck load balancer) held `epochgc gc` silent for 11 minutes on its first HEAD: botocore's
60 s read timeout times 11 attempts (`retries.max_attempts` counts retries, so 10 is 11
attempts: botocore's `Config` docs, "max_attempts -- ... the maximum number of retry
attempts", https://botocore.amazonaws.com/v1/documentation/api/latest/reference/
config.html). The small reads a command makes before any work (partitions.json, the pause
state, the reports, `gc-admin`'s reads) go through a client of their own, configured with
botocore's own `Config`: `read_timeout` (seconds to wait for the next bytes of an answer)
and `retries.total_max_attempts` ("the maximum number of total attempts that will be made
on a single request. This includes the initial request", same page). The delete path keeps
`s3.CONNECT_TIMEOUT_S` / `READ_TIMEOUT_S`: the stop bound rests on them (`gc/bounds.py`).

A HEAD or a GET of a small JSON object answers in milliseconds; AWS advises retrying a
latency-sensitive request that has not answered in about 2 seconds ("Timeouts and Retries
for Latency-Sensitive Applications", https://docs.aws.amazon.com/AmazonS3/latest/userguide/
optimizing-performance-guidelines.html). 10 s per attempt is five times that, and 3
attempts end a silent endpoint's read within ~33 s (botocore's backoff before retry n is
random up to 2**(n-1) s: at most 1 + 2 s here).

While such a read waits longer than `say_after_s`, `waiting` says so, so an operator is not
left with silence. Tests shorten the three settings through the environment (`ENV`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from epochgc.impl.store.base import StoreError

# The environment's overrides (tests: a silent endpoint's wait is the configured timeout,
# made small, not a race against a sleep).
READ_TIMEOUT_ENV = "EPOCHGC_CONTROL_READ_TIMEOUT_S"
ATTEMPTS_ENV = "EPOCHGC_CONTROL_ATTEMPTS"
SAY_AFTER_ENV = "EPOCHGC_WAITING_LINE_AFTER_S"
ENV = (READ_TIMEOUT_ENV, ATTEMPTS_ENV, SAY_AFTER_ENV)


@dataclass(frozen=True)
class Patience:
    """A control-plane read's bounds: each attempt's read timeout, the attempts (the first
    included), and after how long a read still unanswered is said (`waiting`)."""

    read_timeout_s: float = 10.0
    attempts: int = 3
    say_after_s: float = 10.0

    def __post_init__(self) -> None:
        if not (self.read_timeout_s > 0 and self.attempts >= 1 and self.say_after_s > 0):
            raise ValueError(f"invalid control-read bounds {self}")

    @classmethod
    def from_env(cls) -> Patience:
        """The defaults, each replaced by its environment variable if set; StoreError
        naming the variable if one is not a positive number."""
        base = cls()
        return cls(_number(READ_TIMEOUT_ENV, base.read_timeout_s),
                   int(_number(ATTEMPTS_ENV, base.attempts, whole=True)),
                   _number(SAY_AFTER_ENV, base.say_after_s))

    def no_answer(self) -> str:
        """The end of the error line of a read that got no answer."""
        tries = f"{self.attempts} attempts" if self.attempts > 1 else "1 attempt"
        return f"no answer within {self.read_timeout_s:g} s ({tries})"


def _number(name: str, default: float, whole: bool = False) -> float:
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        value = -1
    if not value > 0 or value != value or value == float("inf"):
        kind = "a whole number" if whole else "a number of seconds"
        raise StoreError(f"environment variable {name}={text!r} is not {kind} above 0")
    return value


@contextlib.contextmanager
def waiting(say: Callable[[str], None] | None, endpoint: str, what: str,
            after_s: float) -> Iterator[None]:
    """Say "waiting for ENDPOINT: no answer yet (WHAT, N s)" each `after_s` seconds while
    the block runs (from a daemon thread; none at all if `say` is None)."""
    if say is None:
        yield
        return
    done = threading.Event()
    began = time.monotonic()

    def run() -> None:
        while not done.wait(after_s):
            say(f"waiting for {endpoint}: no answer yet ({what}, "
                f"{time.monotonic() - began:.0f} s)")

    threading.Thread(target=run, name="epochgc-waiting", daemon=True).start()
    try:
        yield
    finally:
        done.set()
