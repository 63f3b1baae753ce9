"""`attempts.unanswered_at`: which DeleteObjects attempts leave their keys without a
per-key answer (the server may still be carrying the request out: the read-back waits
`stage.SENT_APPLIED_S` from when the latest ended) and which do not (task s26a). The
parsed forms are botocore's: a 200 with an `<Error>` body becomes a 500 with that code
(`handlers.py` `_handle_200_error`); `deleteanswer.check` turns a 2xx without a whole
DeleteResult into a 500 parsed from its status (the code is the status's digits)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pytest
from botocore.exceptions import ConnectionClosedError, ReadTimeoutError

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
    (_answer(200, 200, None), None, False),  # a whole DeleteResult: per-key answers
    (_answer(503, 503, "SlowDown"), None, False),  # refused: not applied
    (_answer(403, 403, "AccessDenied"), None, False),
    (_answer(200, 500, "SlowDown"), None, True),  # throttled part-way: no per-key answer
    (_answer(500, 500, "InternalError"), None, True),  # "might not have processed"
    (_answer(200, 500, "500"), None, True),  # a body cut short (deleteanswer)
    (_answer(504, 504, "504"), None, True),  # a gateway gave up waiting upstream
    (None, ConnectionClosedError(endpoint_url="http://x"), True),
    (None, ReadTimeoutError(endpoint_url="http://x"), True),
], ids=["delete-result", "503-slowdown", "403", "200-slowdown", "500-internal-error",
        "body-lost", "504", "connection-closed", "read-timeout"])
def test_which_attempts_leave_their_keys_unanswered(response: Any, error: Any,
                                                    waits: bool) -> None:
    attempts.begin()
    before = time.monotonic()
    attempts.note(response, error)
    at = attempts.unanswered_at(0)
    assert (at is not None) is waits, at
    assert at is None or before <= at <= time.monotonic()
