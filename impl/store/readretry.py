"""How a control-plane read of an S3 store is retried: a throttling answer longer than any
other failure (issue 41: with 30 % of answers 503 SlowDown, 1 of 12 `gc-admin show` failed;
a burst of three 503s on the first read failed a round at once).

What is throttling, from the primary sources:
- S3 answers 503 `SlowDown` "Please reduce your request rate" (and 503 `ServiceUnavailable`
  "Reduce your request rate"; AWS S3 API Reference, "Error responses",
  https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html). "SlowDown errors can
  occur when a high request rate triggers one of these mechanisms. Reducing your request
  rate will decrease or eliminate errors of this type" (Amazon S3 error best practices,
  https://docs.aws.amazon.com/AmazonS3/latest/userguide/ErrorBestPractices.html). A HEAD's
  answer has no body, so its code is only the status: every 503 is taken as throttling.
- botocore's standard retry mode names throttling by code (`ThrottledRetryableChecker`:
  Throttling, ThrottlingException, ..., RequestLimitExceeded, SlowDown, ...) and by status
  429 (`ThrottlingStatusCodeChecker`), and backs off from a base of 1 s for throttling and
  50 ms otherwise, each wait `rand(0, 1) * min(base * 2**i, 20 s)` ("truncated binary
  exponential backoff with jitter", `ExponentialBackoff.delay_amount`): boto/botocore
  1.44.8, botocore/retries/standard.py. The AWS SDKs' retry behaviour ("Retry behavior",
  https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html): transient
  errors and throttling are retried with exponential backoff and jitter.

Why not botocore's own `Config(retries=...)`: it has ONE bound on attempts for every
retryable failure (`total_max_attempts`), so a store that throttles could only be given more
attempts by giving an endpoint that answers 500 to everything (newuser9 K4: 0.7 s) or never
answers (I10: ~33 s) as many; and its sleep cannot be injected (tests would sleep for real).
So the control client makes one attempt per call (`total_max_attempts` 1) and `run` retries:

- throttled (any 503, 429, a throttling code): up to `Patience.throttled_attempts` (10)
  attempts, the first included, waits `rand * min(1 s * 2**i, 20 s)`: at most 111 s of
  waiting in all, about half that expected; a 30 % throttled store fails a read with
  probability 0.3**10 (6e-6);
- transient (500, 502, 504, RequestTimeout, a dropped connection, no answer): up to
  `Patience.attempts` (3), waits `rand * min(50 ms * 2**i, 20 s)` (at most 0.15 s in all);
- anything else (403, 404, ...): at once, to the caller.
The two counts are kept apart: a read ends when either bound is reached.
"""

from __future__ import annotations

import enum
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")

# botocore 1.44.8, retries/standard.py `ThrottledRetryableChecker._THROTTLED_ERROR_CODES`
# (PriorRequestNotComplete is also listed there as transient; a throttle here), plus S3's
# 503 codes (ErrorResponses, above).
THROTTLED_CODES = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException",
    "TooManyRequestsException", "ProvisionedThroughputExceededException",
    "TransactionInProgressException", "RequestLimitExceeded", "BandwidthLimitExceeded",
    "LimitExceededException", "RequestThrottled", "SlowDown", "PriorRequestNotComplete",
    "EC2ThrottledException", "ServiceUnavailable",
})
THROTTLED_STATUS = frozenset({429, 503})
# botocore's `TransientRetryableChecker`: codes, and statuses 500, 502, 503 (a throttle
# here), 504; its exception classes are `ConnectionError` and `HTTPClientError` (`classify`).
TRANSIENT_CODES = frozenset({"RequestTimeout", "RequestTimeoutException"})
TRANSIENT_STATUS = frozenset({500, 502, 504})
MAX_BACKOFF_S = 20.0  # botocore's ExponentialBackoff._MAX_BACKOFF


class Failure(enum.Enum):
    THROTTLED = "throttled"
    TRANSIENT = "transient"
    FINAL = "final"


def classify(e: Exception) -> Failure:
    """What kind of failure `e` (raised by a botocore call) is."""
    from botocore.exceptions import ConnectionError as BotoConnectionError
    from botocore.exceptions import HTTPClientError

    if isinstance(e, BotoConnectionError | HTTPClientError):
        return Failure.TRANSIENT
    response = getattr(e, "response", None)
    if not isinstance(response, dict):
        return Failure.FINAL
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if code in THROTTLED_CODES or status in THROTTLED_STATUS:
        return Failure.THROTTLED
    if code in TRANSIENT_CODES or status in TRANSIENT_STATUS:
        return Failure.TRANSIENT
    return Failure.FINAL


@dataclass(frozen=True)
class Backoff:
    """Each bound's attempts (the first included) and the base of its waits."""

    attempts: int
    throttled_attempts: int
    transient_base_s: float = 0.05
    throttled_base_s: float = 1.0

    def bound(self, failure: Failure) -> int:
        return self.throttled_attempts if failure is Failure.THROTTLED else self.attempts

    def delay(self, failure: Failure, retry: int, rng: random.Random) -> float:
        """The wait before retry number `retry` (0: the first) after a `failure`."""
        base = self.throttled_base_s if failure is Failure.THROTTLED else self.transient_base_s
        return rng.random() * min(base * 2.0**retry, MAX_BACKOFF_S)


def refused(e: BaseException) -> bool:
    """Whether `e` (a failed attempt) is a connection the endpoint refused at once
    (ECONNREFUSED: nothing listens there): botocore's EndpointConnectionError is raised
    while handling urllib3's NewConnectionError, itself raised from the socket's
    ConnectionRefusedError (botocore/httpsession.py, urllib3/connection.py)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [e]
    while todo:
        x = todo.pop()
        if x is None or id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, ConnectionRefusedError):
            return True
        kwargs = getattr(x, "kwargs", None)
        inner = kwargs.get("error") if isinstance(kwargs, dict) else None
        todo += [x.__cause__, x.__context__,
                 inner if isinstance(inner, BaseException) else None]
    return False


def attempts_text(n: int) -> str:
    return f"{n} attempt{'s' if n != 1 else ''} so far"


@dataclass
class Tries:
    """One read's failures so far, by kind (what its waiting and error lines say)."""

    counts: dict[Failure, int] = field(default_factory=dict)
    last: Failure | None = None
    waited_s: float = 0.0
    # The last failure was a connection refused (`refused`): said as such, not as "no
    # answer yet" (newuser13 Q2: a store whose port refused at once).
    last_refused: bool = False

    def count(self, failure: Failure) -> int:
        return self.counts.get(failure, 0)

    def say(self) -> str:
        """The state for a waiting line: "no answer yet", or the store's throttling."""
        n = self.count(Failure.THROTTLED)
        if self.last is Failure.THROTTLED:
            return f"throttled ({attempts_text(n)}), backing off"
        if self.last_refused:
            return f"connection refused ({attempts_text(self.count(Failure.TRANSIENT))})"
        return "no answer yet"


@dataclass
class Waiter:
    """The randomness and the sleep of the backoff (injected by tests)."""

    rng: random.Random = field(default_factory=random.Random)
    sleep: Callable[[float], None] = time.sleep


def run(call: Callable[[], T], backoff: Backoff, waiter: Waiter, tries: Tries) -> T:
    """`call()`, retried as the module says; the last failure is raised as it came."""
    while True:
        try:
            return call()
        except Exception as e:  # botocore raises many types; `classify` sorts them
            failure = classify(e)
            if failure is Failure.FINAL:
                raise
            tries.counts[failure] = tries.count(failure) + 1
            tries.last = failure
            tries.last_refused = refused(e)
            if tries.count(failure) >= backoff.bound(failure):
                raise
            wait = backoff.delay(failure, tries.count(failure) - 1, waiter.rng)
            tries.waited_s += wait
            waiter.sleep(wait)
