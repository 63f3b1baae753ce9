"""Bounded, jittered backoff for the per-key failures S3 reports inside a 200 reply.

botocore retries whole requests only; a DeleteObjects that returns 200 with `SlowDown` for
some keys is a success to it. The store retries just those keys, with "full jitter"
exponential backoff (each wait uniform in [0, min(cap, base * 2**retry)]), so that many
tasks throttled together do not retry in lockstep. Randomness and sleeping are injected.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

# Per-key codes that mean "try again later"; anything else (AccessDenied, ...) is final.
RETRYABLE_KEY_CODES = frozenset(
    {"SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout", "Throttling", "503"}
)


@dataclass(frozen=True)
class Backoff:
    attempts: int = 6  # tries per key, the first included
    base_s: float = 0.05
    cap_s: float = 5.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.base_s < 0 or self.cap_s < self.base_s:
            raise ValueError(f"invalid backoff {self}")

    def delay(self, retry: int, rng: random.Random) -> float:
        """The wait before retry number `retry` (0 for the first retry)."""
        return rng.uniform(0.0, min(self.cap_s, self.base_s * 2.0**retry))


@dataclass
class Retrier:
    """A backoff policy with its randomness and sleep (both picklable by default)."""

    policy: Backoff = field(default_factory=Backoff)
    rng: random.Random = field(default_factory=random.Random)
    sleep: Callable[[float], None] = time.sleep

    def wait(self, retry: int) -> None:
        self.sleep(self.policy.delay(retry, self.rng))
