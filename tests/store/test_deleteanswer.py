"""`deleteanswer.incomplete`: which 200 DeleteObjects bodies are not a whole DeleteResult
(review rev38z finding 1; the lost body itself is `test_rev38z.py`'s, against real
servers). Pure functions: no server."""

from __future__ import annotations

import pytest

from epochgc.impl.store.deleteanswer import check, incomplete

_NS = b'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'
_WHOLE = (b'<?xml version="1.0" encoding="UTF-8"?>\n<DeleteResult ' + _NS + b">"
          + b"<Error><Key>k</Key><Code>InternalError</Code><Message>m</Message></Error>" * 50
          + b"</DeleteResult>")


def test_a_whole_delete_result_is_an_answer() -> None:
    assert incomplete(_WHOLE, {"content-length": str(len(_WHOLE))}) is None
    assert incomplete(b"<DeleteResult/>", {}) is None  # no Content-Length (chunked)


@pytest.mark.parametrize("body, headers, why", [
    (b"", {"content-length": "120"}, "an empty body"),  # the connection closed at once
    (_WHOLE[:300], {"content-length": str(len(_WHOLE))}, "300 of its"),  # cut short
    (b"<html><body>502 from a proxy</body></html>", {}, "'html'"),  # another's page
    (b"<Error><Code>SlowDown</Code></Error>", {}, "'Error'"),
    (b"not xml at all", {}, "None"),
])
def test_a_200_that_is_not_a_whole_delete_result_is_said_so(
    body: bytes, headers: dict[str, str], why: str
) -> None:
    got = incomplete(body, headers)
    assert got is not None and why in got, got


def test_a_content_encoded_body_is_not_measured_against_its_length() -> None:
    # Content-Length counts the encoded bytes (RFC 9110 8.6); the body here is decoded.
    assert incomplete(_WHOLE, {"content-length": "10", "content-encoding": "gzip"}) is None


def test_the_handler_turns_such_a_200_into_a_500_and_leaves_others() -> None:
    lost = {"status_code": 200, "body": b"", "headers": {"content-length": "90"}}
    check(response_dict=lost)
    assert lost["status_code"] == 500  # botocore retries it; attempts.note: unsure
    whole = {"status_code": 200, "body": _WHOLE, "headers": {}}
    check(response_dict=whole)
    assert whole["status_code"] == 200
    refused = {"status_code": 403, "body": b"", "headers": {}}
    check(response_dict=refused)
    assert refused["status_code"] == 403
