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
the server answered (`attempts.may_have_applied`: status >= 500).

And any status below 301 other than 200, whatever its body (review rev38z3 finding 1): S3
answers a DeleteObjects' success only as "HTTP/1.1 200" (API_DeleteObjects.html, "Response
Syntax"), and botocore's model of the operation names no other (`data/s3/2006-03-01/
service-2.json`: DeleteObjects' `http` has no `responseCode`, so the default, 200, where
DeleteObject has `"responseCode": 204`). Any other says the body is not that answer: a
202's request "might or might not eventually be acted upon" (RFC 9110 15.3.3), a 203's
content "has been modified from that of the origin server's 200 (OK) response by a
transforming proxy" (15.3.4), a 206 is a part of a representation (15.3.7). So such a
status is a 500 too.

The handler never raises (review rev38z3 finding 2): it runs after the answer came, outside
botocore's attempt loop (botocore `endpoint.py` `_do_get_response` catches exceptions only
around `before-send` and the send), so an exception from it would leave the call with the
attempt in no record. Whatever it cannot read is not a whole DeleteResult: a 500."""

from __future__ import annotations

import logging
from typing import Any
from xml.etree.ElementTree import XMLPullParser

_LOG = logging.getLogger(__name__)


def check(response_dict: Any = None, **_kwargs: Any) -> None:
    """botocore's `before-parse` handler for DeleteObjects."""
    status = _parsed_as_output(response_dict)
    if status is None:
        return
    why: str | None
    if status != _SUCCESS:
        why = "a status other than S3's 200"
    else:
        try:
            why = incomplete(response_dict.get("body"), response_dict.get("headers") or {})
        except Exception as e:  # never raised out of the handler: see the module's note
            why = f"a body that could not be read ({type(e).__name__}: {e})"
    if why is not None:
        _LOG.debug("DeleteObjects answered %d with %s: taken as a failed attempt", status,
                   why)
        response_dict["status_code"] = 500


_SUCCESS = 200
"""The one status S3 answers a DeleteObjects' success with (the module's note)."""


def check_single(response_dict: Any = None, **_kwargs: Any) -> None:
    """botocore's `before-parse` handler for a single DeleteObject (`delete_if_match`:
    the lease's reset, the probe's clean-up; review rev38z4 finding 3). S3 answers a
    DeleteObject's success with 204 (API_DeleteObject.html, "Response Syntax":
    "HTTP/1.1 204"; botocore's model, `data/s3/2006-03-01/service-2.json`: DeleteObject's
    `"responseCode": 204`). botocore parses any status below 301 as success, so a 202,
    whose request "might or might not eventually be acted upon" (RFC 9110 15.3.3), came
    back DELETED. Any other status below 301 becomes a 500, as `check` does for
    DeleteObjects: `attempts.note` marks the attempt unsure and botocore retries it. A 200
    too: RFC 9110 9.3.5 lets a DELETE answer 200 once "enacted", but S3 does not, so a 200
    here is not S3's answer (the cost, for a server that does answer 200: its deletes
    come back GONE or an error, never DELETED). Never raises (the module's note)."""
    status = _parsed_as_output(response_dict)
    if status is None or status == _NO_CONTENT:
        return
    _LOG.debug("DeleteObject answered %d, not S3's 204: taken as a failed attempt", status)
    response_dict["status_code"] = 500


_NO_CONTENT = 204
"""The one status S3 answers a DeleteObject's success with (`check_single`)."""

def _parsed_as_output(response_dict: Any) -> int | None:
    """The answer's status if botocore parses its body as the operation's output (below
    `_PARSED_AS_ERROR_FROM`); None if it parses it as an error itself, or it is no answer."""
    if not isinstance(response_dict, dict):
        return None
    status = response_dict.get("status_code")
    if not isinstance(status, int) or status >= _PARSED_AS_ERROR_FROM:
        return None
    return status


_PARSED_AS_ERROR_FROM = 301
"""botocore `parsers.py` `ResponseParser.parse`: `if response['status_code'] >= 301` the
body is parsed as an error; below it, as the operation's output."""


def incomplete(body: object, headers: Any) -> str | None:
    """Why a DeleteObjects success body is not a whole DeleteResult; None if it is one."""
    if not isinstance(body, bytes | bytearray) or not body:
        return "an empty body"
    length = headers.get("content-length")
    if length is not None and not _decimal(str(length)):
        # RFC 9112 6.3 item 5: a response "with an invalid Content-Length header field"
        # has invalid framing, and the user agent "MUST close the connection to the
        # server and discard the received response" (review rev38z3 finding 2: "²" passed
        # `str.isdigit` and `int()` raised out of the handler).
        return f"an invalid Content-Length {str(length)[:40]!r}"
    encoded = headers.get("content-encoding", "identity").lower() != "identity"
    if length is not None and not encoded and len(body) < int(length):
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
    except Exception:  # ParseError; LookupError, a declared encoding Python has no codec for
        return None
    return None


def _decimal(value: str) -> bool:
    """`Content-Length = 1*DIGIT` (RFC 9110 8.6), DIGIT being ASCII 0-9 (RFC 5234 B.1):
    not `str.isdigit`/`isdecimal`, true of other scripts' digits and of "²"."""
    return value.isascii() and value.isdigit()


_PIECE = 1024
