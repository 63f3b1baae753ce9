"""A 200 DeleteObjects answer that is not a whole DeleteResult is a failed attempt (review
rev38z finding 1).

`S3Store._delete_once` sends `Quiet: True` and takes a key absent from the answer's
`Errors` as deleted ("In quiet mode the response includes only keys where the delete
operation encountered an error", https://docs.aws.amazon.com/AmazonS3/latest/API/
API_DeleteObjects.html). So an answer must be read whole before its silence means
anything. botocore does not check that: it reads bodies with
`enforce_content_length=False` (`httpsession.py`), and turns a 200 into a 500 only when a
NON-EMPTY body is not XML or is an <Error> (`handlers.py` `_looks_like_special_case_error`:
`if status_code == 200 and body`). A 200 whose connection closed after its headers (RFC
9112 6.3: a message shorter than its Content-Length "MUST" be taken as incomplete) came
back as `{}`: every key deleted, though the server may have refused some.

This handler, on `before-parse.s3.DeleteObjects` (botocore `endpoint.py`
`_do_get_response` emits it with the `response_dict` the parser then reads), does what
botocore's `_handle_200_error` does for an <Error> body: a 200 whose body is empty,
shorter than its Content-Length, or not rooted at `DeleteResult` becomes a 500. botocore
then retries it (`_update_status_code` carries the status to the HTTP response before the
retry handler looks) and `attempts.note` marks the attempt unsure: the server sent 200, so
the request may have been carried out (`attempts.served_status`).

Not only a 200 (review rev38z2 finding 1): botocore's parser takes every status below 301
as a success (`parsers.py` `ResponseParser.parse`: an error only `if
response['status_code'] >= 301`), so a 202 or 204 with an empty body parsed as `{}`: every
key deleted. S3 answers DeleteObjects only with 200 and a DeleteResult
(API_DeleteObjects.html); a 202 is "accepted for processing, but the processing has not
been completed. The request might or might not eventually be acted upon" (RFC 9110
15.3.3). So any such status without a whole DeleteResult becomes a 500 too: unsure, since
the server answered (`attempts.may_have_applied`: status >= 500)."""

from __future__ import annotations

import logging
from typing import Any
from xml.etree.ElementTree import ParseError, XMLPullParser

_LOG = logging.getLogger(__name__)


def check(response_dict: Any = None, **_kwargs: Any) -> None:
    """botocore's `before-parse` handler for DeleteObjects."""
    if not isinstance(response_dict, dict):
        return
    status = response_dict.get("status_code")
    if not isinstance(status, int) or status >= _PARSED_AS_ERROR_FROM:
        return  # botocore parses it as an error itself
    body = response_dict.get("body")
    why = incomplete(body, response_dict.get("headers") or {})
    if why is not None:
        _LOG.debug("DeleteObjects answered %d with %s: taken as a failed attempt", status,
                   why)
        response_dict["status_code"] = 500


_PARSED_AS_ERROR_FROM = 301
"""botocore `parsers.py` `ResponseParser.parse`: `if response['status_code'] >= 301` the
body is parsed as an error; below it, as the operation's output."""


def incomplete(body: object, headers: Any) -> str | None:
    """Why a DeleteObjects success body is not a whole DeleteResult; None if it is one."""
    if not isinstance(body, bytes | bytearray) or not body:
        return "an empty body"
    length = headers.get("content-length")
    encoded = headers.get("content-encoding", "identity").lower() != "identity"
    if not encoded and str(length or "").isdigit() and len(body) < int(length):
        return f"{len(body)} of its {int(length)} bytes"
    root = _root(bytes(body))
    if root != "DeleteResult":
        return f"a document rooted at {root!r}, not DeleteResult"
    return None


def _root(body: bytes) -> str | None:
    """The root element's local name (S3 qualifies it with its namespace); None if the
    body is not XML. Fed a piece at a time until the root opens: an answer of 1,000
    per-key errors is ~160 kB, parsed whole ~1.6 ms; botocore's own parser reads it all."""
    parser: XMLPullParser[Any] = XMLPullParser(events=("start",))
    try:
        for at in range(0, len(body), _PIECE):
            parser.feed(body[at:at + _PIECE])
            events: Any = parser.read_events()
            for _name, item in events:
                tag = getattr(item, "tag", None)  # a "start" event's item is the element
                return str(tag).rpartition("}")[2] if tag is not None else None
    except ParseError:
        return None
    return None


_PIECE = 1024
