"""Text for people: keys and other store-supplied strings escaped before they are printed
(issue 38 item 7).

A local store's file name that is not UTF-8 arrives as a string with lone surrogates
(`os.fsdecode`, PEP 383), and a malformed key may hold any character: printed as is, the
first raised `UnicodeEncodeError` on a strict UTF-8 stdout and lost the rest of the summary,
and a control character could rewrite the operator's terminal. `printable` makes any string
ASCII, one way round: an undecodable byte as `\\xNN`, other characters outside printable
ASCII as `\\xNN`/`\\uNNNN`/`\\UNNNNNNNN`, a backslash as `\\\\` (so an escape is never
ambiguous). Keys are ASCII by grammar (SPEC R20), so every well-formed key prints unchanged.
"""

from __future__ import annotations

import re
import sys
from typing import IO, Any

import click

# Where the keys counted `gone_unattributed` left the store (review rev38v finding 3): a
# batch whose answer was lost (its task attempt killed mid-group) or ambiguous (a 5xx or a
# timeout: "might not have processed"; review rev38x findings 1 and 2), or an S3 answer
# "not there", which cannot tell another writer's delete from a copy of the round's own
# request an intermediary sent again (review rev38z5 finding 4). One wording for the
# summary, the metrics, the record's readers and `gc-admin`.
GONE_WHERE = ("in delete batches with no answer saying the round deleted them (the answer "
              "was lost with a killed task attempt, was ambiguous: a 5xx or a timeout, or "
              "said the key was not there, on S3, where the round's own request may have "
              "been sent twice)")
GONE_WHERE_SHORT = "in batches with no answer saying the round deleted them"

_ESCAPE = re.compile(r"[^\x20-\x5b\x5d-\x7e]")  # all but printable ASCII other than "\"


def _one(m: re.Match[str]) -> str:
    c = m.group(0)
    n = ord(c)
    if c == "\\":
        return "\\\\"
    if 0xDC80 <= n <= 0xDCFF:  # a byte os.fsdecode could not decode (surrogateescape)
        return f"\\x{n - 0xDC00:02x}"
    if n < 0x100:
        return f"\\x{n:02x}"
    return f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


# Characters of a free text (a store's error, a reason) copied into a round record at most
# (review rev38z10 finding 4: a 2 MB error text in a journal outcome made the recovered
# record larger than `recordread.MAX_RECORD`, a record `gc-admin show` calls damaged).
MAX_TEXT = 300


def cut(text: str, limit: int = MAX_TEXT) -> str:
    """`text` at most `limit` characters and a few more saying what was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... (cut: {len(text):,} characters)"


def printable(text: str) -> str:
    """`text` as printable ASCII (see the module docstring); linear in its length."""
    return _ESCAPE.sub(_one, text)


def echo_safe(line: str, err: bool = False, file: IO[Any] | None = None) -> None:
    """`click.echo` that never raises for the text: what the stream's encoding cannot hold
    (a lone surrogate, any character on an ASCII stream) is written as a backslash escape.
    Keys should already have gone through `printable`; this guards the rest of the line."""
    stream = file if file is not None else (sys.stderr if err else sys.stdout)
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        safe = line.encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:  # an encoding name Python does not know: plain ASCII then
        safe = line.encode("ascii", "backslashreplace").decode("ascii")
    click.echo(safe, file=stream)


def keys(n: int) -> str:
    """"1 key", "2,000 keys" (newuser3 N11: "gc: listed 1 keys")."""
    return f"{n:,} key" if n == 1 else f"{n:,} keys"


def json_kind(v: object) -> str:
    """What JSON calls a parsed value (RFC 8259 section 3: object, array, number, string,
    and the literal names false, null, true), never a Python type name (issue 41 F5:
    "a JSON NoneType")."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"
