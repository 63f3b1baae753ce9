"""Which attempts of the current thread's DeleteObjects call may have been applied (review
rev38y findings 1, 3, 4).

botocore retries a request itself and tells only how often: `ResponseMetadata.RetryAttempts`
("num retries", set on every parsed response, an error's included: botocore `endpoint.py`
`_send_request`). That does not say whether an earlier attempt may have been applied: a 500
InternalError "might not have processed" (so may have:
https://docs.aws.amazon.com/AmazonS3/latest/userguide/ErrorBestPractices.html), a lost
connection or a timeout may too, while 503 SlowDown is S3's protection mechanism refusing
the request ("SlowDown errors can occur when a high request rate triggers one of these
mechanisms", same page) and a 4xx is a refusal. So each attempt is seen as it ends, through
botocore's `needs-retry` event: emitted after every attempt, the last included, with the
attempt's `response` ((http response, parsed)) or `caught_exception` (botocore `endpoint.py`
`_needs_retry`; "needs-retry ... emitted after each request to determine if a retry is
needed", https://docs.aws.amazon.com/botocore/latest/topics/events.html). A call runs on its
caller's thread, so the record is per thread, reset before each call (`begin`).
"""

from __future__ import annotations

import threading
from typing import Any

# Not sent: refused by our own `before-send` hooks (s3.py `SendDeadlinePassed`,
# driverbound.py `StoppedNotSent`), by name to avoid an import cycle.
_NOT_SENT = frozenset({"SendDeadlinePassed", "StoppedNotSent"})
# A refusal said with a 5xx: the request was not carried out.
_REFUSED_5XX = frozenset({"SlowDown"})
# A 4xx after which the request may still have been applied: S3's RequestTimeout ("Your
# socket connection to the server was not read from or written to within the timeout
# period", https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html).
_UNSURE_4XX = frozenset({"RequestTimeout"})


class _Record(threading.local):
    def __init__(self) -> None:
        self.seen = 0  # attempts that ended
        self.unsure = False  # one of them may have been applied


_RECORD = _Record()


def begin() -> None:
    """A new call on this thread."""
    _RECORD.seen = 0
    _RECORD.unsure = False


def note(response: Any = None, caught_exception: BaseException | None = None,
         **_kwargs: Any) -> None:
    """botocore's `needs-retry` handler: records one attempt. Returns None: botocore's own
    retry handler decides whether to retry."""
    _RECORD.seen += 1
    if may_have_applied(response, caught_exception):
        _RECORD.unsure = True


def may_have_applied(response: Any, caught_exception: BaseException | None) -> bool:
    """One attempt's outcome: could the server have carried it out?"""
    if caught_exception is not None:
        # No answer (a reset, a timeout): it may have reached the server.
        return type(caught_exception).__name__ not in _NOT_SENT
    if not isinstance(response, tuple) or len(response) != 2:
        return True  # nothing to tell by: take it as unsure
    http, parsed = response
    status = getattr(http, "status_code", None)
    code = str(parsed.get("Error", {}).get("Code", "")) if isinstance(parsed, dict) else ""
    if code in _REFUSED_5XX:
        return False
    if code in _UNSURE_4XX:
        return True
    return isinstance(status, int) and status >= 500


def unsure(retries: int | None) -> bool:
    """Whether an attempt of the call just made may have been applied. `retries`: the
    answer's RetryAttempts, if any; attempts this record did not see (a client without the
    handler) are taken as unsure."""
    missed = retries is not None and _RECORD.seen < retries + 1
    return _RECORD.unsure or missed
