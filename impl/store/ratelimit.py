"""botocore's adaptive retry mode with its rate limiter on the monotonic clock (review
rev38z2 finding 2).

botocore's adaptive mode is its standard mode plus a client rate limiter (botocore 1.44.8
`client.py` `_register_retries`: `elif retry_mode == 'adaptive':
self._register_v2_standard_retries(client); self._register_v2_adaptive_retries(client)`).
The limiter's `TokenBucket` refills from `bucket.Clock.current_time()`, which is
`time.time()`, the wall clock (`retries/bucket.py` `Clock`), and `register_retry_handler`
makes that clock itself, with no way to pass another (`retries/adaptive.py` lines 10-35).
After the wall clock is stepped back S seconds (NTP stepping a clock that ran fast, a VM
restored from a snapshot) a bucket that is on is S x rate tokens short, and every request
of the client (a stopping driver's STOP and lease release among them) waits about S in
`acquire`. So the client is made in standard mode and the limiter is registered here,
exactly as `register_retry_handler` does, but with a clock whose `current_time` is
`time.monotonic()` ("cannot go backward", https://docs.python.org/3/library/time.html#
time.monotonic). Every part of it (the bucket, the rate clocker, the cubic calculator's
start and timestamps) reads that one clock, so their differences stay consistent."""

from __future__ import annotations

import time
from typing import Any

ADAPTIVE = "adaptive"
"""The mode name callers ask for; `client_retries` turns it into standard + `register`."""


class MonotonicClock:
    """botocore's limiter clock (`bucket.Clock`'s one method), read from `time.monotonic`
    instead of `time.time`. Not a subclass: botocore is imported only when a client is made
    (the base install, without `[s3]`, imports this module and has no botocore)."""

    def current_time(self) -> float:
        return time.monotonic()


def client_retries(retries: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The retry config to make the client with, and whether `register` must then add the
    limiter: adaptive becomes standard (the same retry handler, `client.py`) plus ours."""
    if retries.get("mode") != ADAPTIVE:
        return retries, False
    return {**retries, "mode": "standard"}, True


def register(client: Any) -> Any:
    """botocore's `adaptive.register_retry_handler(client)` with a `MonotonicClock`: the
    same parts, the same events, registered in the same place (right after the client is
    made, as `ClientCreator._register_retries` does, so handler order is unchanged)."""
    from botocore.retries import adaptive, bucket, standard, throttling

    clock: Any = MonotonicClock()
    limiter = adaptive.ClientRateLimiter(
        rate_adjustor=throttling.CubicCalculator(starting_max_rate=0,
                                                 start_time=clock.current_time()),
        rate_clocker=adaptive.RateClocker(clock),
        token_bucket=bucket.TokenBucket(max_rate=1, clock=clock),
        throttling_detector=standard.ThrottlingErrorDetector(
            retry_event_adapter=standard.RetryEventAdapter()),
        clock=clock,
    )
    client.meta.events.register("before-send", limiter.on_sending_request)
    client.meta.events.register("needs-retry", limiter.on_receiving_response)
    return limiter
