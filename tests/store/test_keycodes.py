"""`keycodes`: the per-key codes taken as "not applied" are S3's own refusals, and only
those (review rev38z5 finding 1)."""

from __future__ import annotations

import gzip
import html
import json
import re
from pathlib import Path

import botocore
import pytest

from epochgc.impl.store import keycodes


def _s3_error_codes() -> set[str]:
    """The codes of S3's list of error codes, as botocore's model of S3 carries it: the
    `Error` shape's `Code` documentation (the text of API_Error.html)."""
    model = Path(botocore.__file__).parent / "data" / "s3" / "2006-03-01" / "service-2.json.gz"
    shapes = json.loads(gzip.decompress(model.read_bytes()))["shapes"]
    doc = html.unescape(re.sub(r"<[^>]+>", " ", shapes["Error"]["members"]["Code"]
                               ["documentation"]))
    return set(re.findall(r"Code:\s*(\w+)", doc))


def test_every_refusal_is_a_code_of_s3s_list() -> None:
    """No code is taken as a refusal unless S3's list has it (a typo, or a code made up,
    would turn an unknown answer into "not deleted")."""
    listed = _s3_error_codes()
    assert len(listed) > 50, "the model's list was not read"
    assert listed >= keycodes.REFUSED, sorted(keycodes.REFUSED - listed)


@pytest.mark.parametrize("code", [
    "InternalError", "ServiceUnavailable", "RequestTimeout", "503",  # S3's retryable ones
    "SlowDownWrite", "SlowDownRead", "OperationTimedOut", "Throttling",  # not S3's
    "", "None", "accessdenied",  # empty, absent (`str(None)`), not S3's spelling
])
def test_a_code_not_known_as_a_refusal_may_have_been_applied(code: str) -> None:
    assert keycodes.may_have_applied(code)


@pytest.mark.parametrize("code", sorted(keycodes.REFUSED | keycodes.NOT_THERE
                                        | keycodes.CHANGED))
def test_a_refusal_absence_or_condition_was_not_applied(code: str) -> None:
    assert not keycodes.may_have_applied(code)
