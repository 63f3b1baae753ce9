"""Which attempts of the current thread's DeleteObjects call may have reached the server and
may have been applied (review rev38y findings 1, 3, 4; rev38z9: `sent_at`). A conditional
DeleteObject needs no record since review rev38z9 finding 3: any "absent" after it is
"removed by this request or another" (`S3Store.delete_if_match`).

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
import time
from typing import Any

# Not sent: refused by our own `before-send` hooks (s3.py `SendDeadlinePassed`,
# driverbound.py `StoppedNotSent`), by name to avoid an import cycle; and a connection
# never made (review rev38z finding 4), botocore's names for urllib3's errors raised before
# a connection exists (botocore `httpsession.py` `send`): `EndpointConnectionError`
# (urllib3 `NewConnectionError`, `socket.gaierror`: refused, unroutable, unknown host),
# `ConnectTimeoutError` (urllib3's, raised while connecting). urllib3 raises
# `NameResolutionError`, `ConnectTimeoutError` and `NewConnectionError` only in
# `HTTPConnection._new_conn` (urllib3 2.8.0 `connection.py` lines 246-254), before any byte
# is written. A reused connection that fails after the request was written is
# `ConnectionClosedError` or `ReadTimeoutError`: unsure, as any other exception.
_NOT_SENT = frozenset({"SendDeadlinePassed", "StoppedNotSent", "EndpointConnectionError",
                       "ConnectTimeoutError"})
# NOT `ProxyConnectionError` as such (review rev38z2 finding 4): urllib3 wraps an error as
# `ProxyError` when `conn.proxy and not conn.has_connected_to_proxy` (urllib3 2.8.0
# `connectionpool.py` `urlopen`, lines 833-843), and that flag is no record of what was
# sent: `HTTPConnection.close()` resets it ("Reset all stateful properties",
# `connection.py` line 451), and http.client's `getresponse` closes the connection on a
# ConnectionError while reading the status line (`except ConnectionError: self.close();
# raise`). So a request written whole, forwarded, applied and then reset comes out as
# `ProxyError("Unable to connect to proxy", ConnectionResetError)`, which botocore raises
# as `ProxyConnectionError` (botocore 1.44.8 `httpsession.py` lines 541-544). It is "not
# sent" only when the error urllib3 wrapped (`ProxyError.original_error`) is one raised
# before a connection exists (`never_connected`).


# A refusal said with a 503: the request was not carried out. Only with the server's own
# 503: S3 answers a DeleteObjects it throttles part-way with HTTP 200 and an <Error>
# SlowDown body (awslabs/aws-sdk-rust#873, apache/arrow-rs-object-store#733), after the
# work began (aws/aws-sdk-java#2705: such a request "does end up" deleting), which botocore
# rewrites to 500 (`handlers.py` `_handle_200_error`, `_update_status_code`): review
# rev38z finding 5.
_REFUSED_503 = frozenset({"SlowDown"})
# A 4xx after which the request may still have been applied: S3's RequestTimeout ("Your
# socket connection to the server was not read from or written to within the timeout
# period", https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html).
_UNSURE_4XX = frozenset({"RequestTimeout"})


class _Record(threading.local):
    def __init__(self) -> None:
        self.started = 0  # attempts that went to the send (`starting`)
        self.seen = 0  # attempts that ended
        self.unsure = False  # one of them may have been applied
        self.unsure_unthrottled = False  # one such was not a 200 SlowDown (`throttled`)
        # When (monotonic) the latest attempt that may have reached the server ended (any
        # attempt but one `not_sent`): the wait of `s3.py`'s rule is from then (`sent_at`).
        self.sent_at: float | None = None


_RECORD = _Record()


def begin() -> None:
    """A new call on this thread."""
    _RECORD.started = 0
    _RECORD.seen = 0
    _RECORD.unsure = False
    _RECORD.unsure_unthrottled = False
    _RECORD.sent_at = None


def starting(**_kwargs: Any) -> None:
    """botocore's `before-send` handler: an attempt goes to the send (review rev38z3 finding
    2). botocore ends every attempt that reached `before-send` in `needs-retry` (`note`)
    unless its handling raised after the answer came: `_do_get_response` catches every
    exception from the `before-send` handlers through the send (a refusal by a later
    `before-send` handler, a lost connection) and returns it as the attempt's outcome, but
    not those of the `before-parse` handlers or of the parser, which leave `_send_request`
    at once, with no `needs-retry` and no retry (botocore 1.44.8 `endpoint.py`
    `_do_get_response`, `_send_request`). So an attempt started and never ended
    (`unended`) was answered, and the answer could not be read: it may have been applied."""
    _RECORD.started += 1


def unended() -> bool:
    """An attempt of this thread's current call went to the send and never ended
    (`starting`): unsure."""
    return _RECORD.started > _RECORD.seen


class AnswerUnread(Exception):
    """How `finish` ends an attempt that never ended (`unended`): its answer came and
    reading it raised. Not a name of `_NOT_SENT`: the attempt may have been applied."""


def finish(error: BaseException) -> None:
    """The call raised `error`: an attempt that went to the send and never ended (`unended`)
    ended with it, and is noted as botocore's `needs-retry` would have noted it (`note`),
    unsure, so every view of the record (`unsure`, `only_throttled`, `seen`) counts it."""
    while unended():
        note(caught_exception=AnswerUnread(f"its answer could not be read: {error!r}"[:300]))


def note(response: Any = None, caught_exception: BaseException | None = None,
         **_kwargs: Any) -> None:
    """botocore's `needs-retry` handler: records one attempt. Returns None: botocore's own
    retry handler decides whether to retry."""
    _RECORD.seen += 1
    if caught_exception is None or not not_sent(caught_exception):
        # It ended now (`needs-retry`), and it may have reached the server: answered
        # (whatever the answer: it may be an intermediary's second copy's, `s3.py`'s rule)
        # or not.
        _RECORD.sent_at = time.monotonic()
    if may_have_applied(response, caught_exception):
        _RECORD.unsure = True
        if caught_exception is not None or not throttled(response):
            _RECORD.unsure_unthrottled = True


def may_have_applied(response: Any, caught_exception: BaseException | None) -> bool:
    """One attempt's outcome: could the server have carried it out?"""
    if caught_exception is not None:
        # No answer (a reset, a timeout): it may have reached the server, unless it was
        # never sent (`_NOT_SENT`, by class name and its bases').
        return not not_sent(caught_exception)
    if not isinstance(response, tuple) or len(response) != 2:
        return True  # nothing to tell by: take it as unsure
    http, parsed = response
    status = getattr(http, "status_code", None)
    sent = served_status(http)
    code = str(parsed.get("Error", {}).get("Code", "")) if isinstance(parsed, dict) else ""
    if sent == 200 and status != 200:
        return True  # an error in a 200 (`_REFUSED_503` says why), or a lost body (s3.py)
    if code in _REFUSED_503 and sent == 503:
        return False
    if code in _UNSURE_4XX:
        return True
    return isinstance(status, int) and status >= 500


def not_sent(e: BaseException) -> bool:
    """An attempt that failed this way never reached the server: refused by our own hooks,
    or no connection was made (`_NOT_SENT`, by class name and its bases'), or a proxy that
    was never reached (`never_connected`)."""
    names = {c.__name__ for c in type(e).__mro__}
    if names & _NOT_SENT:
        return True
    if "HTTPClientError" in names:
        # botocore's wrapper of what urllib3 did not handle: our own refusal before a
        # connect (`connectcheck`, review rev38z2 finding 3) among them.
        wrapped = getattr(e, "kwargs", {}).get("error")
        return isinstance(wrapped, BaseException) and type(wrapped).__name__ in _NOT_SENT
    return "ProxyConnectionError" in names and never_connected(e)


def never_connected(e: BaseException) -> bool:
    """A botocore `ProxyConnectionError` whose urllib3 `ProxyError` wraps an error raised
    only while connecting (urllib3 `ConnectTimeoutError`, and its subclasses
    `NewConnectionError`, `NameResolutionError`): nothing was written. Any other (a reset,
    a read timeout, an HTTP error) may follow a request written whole."""
    from urllib3.exceptions import ConnectTimeoutError

    proxy_error = getattr(e, "kwargs", {}).get("error")
    original = getattr(proxy_error, "original_error", None)
    return isinstance(original, ConnectTimeoutError)


def throttled(response: Any) -> bool:
    """A 200 whose body is a throttle's <Error> (`_REFUSED_503`: S3's SlowDown to a
    DeleteObjects it throttles part-way): unsure, but its keys are most likely still there,
    so asking the store right away (through the client the throttle slowed) decides
    little (review rev38z2 finding 5; `S3Store._settle`)."""
    if not isinstance(response, tuple) or len(response) != 2:
        return False
    http, parsed = response
    code = str(parsed.get("Error", {}).get("Code", "")) if isinstance(parsed, dict) else ""
    return served_status(http) == 200 and code in _REFUSED_503


def served_status(http: Any) -> int | None:
    """The status line the server sent: botocore may rewrite `status_code` (a 200 with an
    <Error> body becomes 500), the urllib3 response it wraps (`raw`) keeps the server's."""
    raw = getattr(getattr(http, "raw", None), "status", None)
    if isinstance(raw, int):
        return raw
    status = getattr(http, "status_code", None)
    return status if isinstance(status, int) else None


def seen() -> int:
    """Attempts of this thread's current call the record saw end."""
    return _RECORD.seen


def unsure(retries: int | None) -> bool:
    """Whether an attempt of the call just made may have been applied. `retries`: the
    answer's RetryAttempts, if any; attempts this record did not see (a client without the
    handler) are taken as unsure."""
    return _RECORD.unsure or _missed(retries) or unended()


def sent_at(retries: int | None) -> float | None:
    """When (monotonic) the latest attempt of the call just made that may have reached the
    server ended: any attempt but one never sent (`not_sent`: our own hooks' refusals, a
    connection never made); None if every attempt was never sent. An answered attempt
    counts whatever it said: the answer may be a copy's an intermediary sent again, while
    an earlier copy is still at the server (`s3.py`'s rule, review rev38z9). Attempts the
    record did not see (`unsure`) are taken as ending now."""
    return time.monotonic() if _missed(retries) else _RECORD.sent_at


def only_throttled(retries: int | None) -> bool:
    """Whether every attempt of the call just made that may have been applied was a 200
    SlowDown (`throttled`), and the record saw every attempt."""
    return (_RECORD.unsure and not _RECORD.unsure_unthrottled and not _missed(retries)
            and not unended())


def _missed(retries: int | None) -> bool:
    """Whether the call's answer (its RetryAttempts, `retries`) counts attempts this record
    did not see (a client without the handler)."""
    return retries is not None and _RECORD.seen < retries + 1
