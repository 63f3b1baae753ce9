"""`attempts.sent_at`: which DeleteObjects attempts may have reached the server, so that
the keys they named wait `stage.SENT_APPLIED_S` from when the latest ended before the
read-back asks them (review rev38z9, `s3.py`'s rule): every attempt, answered or not,
whatever the answer (it may be an intermediary's second copy's, while the first is still
at the server), but one never sent. The parsed forms are botocore's: a 200 with an
`<Error>` body becomes a 500 with that code (`handlers.py` `_handle_200_error`);
`deleteanswer.check` turns a 2xx without a whole DeleteResult into a 500 parsed from its
status (the code is the status's digits)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pytest
from botocore.exceptions import (
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from epochgc.impl.store import attempts


@dataclass(frozen=True)
class _Raw:
    status: int


@dataclass(frozen=True)
class _Http:
    status_code: int
    raw: _Raw


def _answer(sent: int, status: int, code: str | None) -> tuple[_Http, dict[str, Any]]:
    parsed: dict[str, Any] = {} if code is None else {"Error": {"Code": code}}
    return _Http(status, _Raw(sent)), parsed


@pytest.mark.parametrize("response, error, waits", [
    (_answer(200, 200, None), None, True),  # a whole DeleteResult: this copy's answers
    (_answer(503, 503, "SlowDown"), None, True),  # this copy refused; an earlier one?
    (_answer(403, 403, "AccessDenied"), None, True),
    (_answer(403, 403, "RequestTimeTooSkewed"), None, True),
    (_answer(200, 500, "SlowDown"), None, True),  # throttled part-way
    (_answer(500, 500, "InternalError"), None, True),  # "might not have processed"
    (_answer(200, 500, "500"), None, True),  # a body cut short (deleteanswer)
    (_answer(504, 504, "504"), None, True),  # a gateway gave up waiting upstream
    (None, ConnectionClosedError(endpoint_url="http://x"), True),
    (None, ReadTimeoutError(endpoint_url="http://x"), True),
    (None, EndpointConnectionError(endpoint_url="http://x"), False),  # never connected
    (None, ConnectTimeoutError(endpoint_url="http://x"), False),
], ids=["delete-result", "503-slowdown", "403", "403-skewed", "200-slowdown",
        "500-internal-error", "body-lost", "504", "connection-closed", "read-timeout",
        "connection-refused", "connect-timeout"])
def test_which_attempts_may_have_reached_the_server(response: Any, error: Any,
                                                   waits: bool) -> None:
    attempts.begin()
    before = time.monotonic()
    attempts.note(response, error)
    at = attempts.sent_at(0)
    assert (at is not None) is waits, at
    assert at is None or before <= at <= time.monotonic()


def test_a_later_attempt_never_sent_keeps_the_earlier_attempts_end() -> None:
    """A 500 then a retry our own hook refused before the wire (`SendDeadlinePassed`): the
    wait is from the 500's end, the latest attempt that may have reached the server."""
    attempts.begin()
    attempts.note(_answer(500, 500, "InternalError"), None)
    first = attempts.sent_at(0)

    class SendDeadlinePassed(Exception):  # attempts matches our hooks' errors by name
        pass

    attempts.note(None, SendDeadlinePassed("not sent"))
    assert first is not None and attempts.sent_at(1) == first
