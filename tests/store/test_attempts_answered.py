"""`attempts.answered`: which DeleteObjects attempts got the server's own whole answer (the
request is over: no wait at the read-back) and which did not (it may still be carried out:
`stage.SENT_APPLIED_S`). The parsed forms are botocore's: a 200 with an `<Error>` body
becomes a 500 with that code (`handlers.py` `_handle_200_error`); a body that is not XML
is parsed from the status (`parsers.py` `_parse_error_from_http_status`: the code is the
status's digits); `deleteanswer.check` turns a 2xx without a whole DeleteResult into a
500 parsed so."""

from __future__ import annotations

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


@pytest.mark.parametrize("response, answered", [
    (_answer(200, 200, None), True),  # a whole DeleteResult (per-key errors inside)
    (_answer(200, 500, "SlowDown"), True),  # an <Error> in a 200: S3's last word
    (_answer(500, 500, "InternalError"), True),
    (_answer(200, 500, "500"), False),  # a body cut short (deleteanswer)
    (_answer(502, 502, "502"), False),  # a gateway's page
    (_answer(504, 504, ""), False),
], ids=["delete-result", "200-slowdown", "500-internal-error", "body-lost", "502-page",
        "504-empty"])
def test_which_attempts_got_the_servers_whole_answer(response: Any, answered: bool) -> None:
    assert attempts.answered(response, None) is answered


def test_no_response_is_no_answer() -> None:
    for e in (ConnectionClosedError(endpoint_url="http://x"),
              ReadTimeoutError(endpoint_url="http://x")):
        assert not attempts.answered(None, e)
        assert attempts.may_have_applied(None, e)
