"""Task s28c: review rev38z9's findings fixed by one rule (`impl/store/s3.py`, THE RULE),
checked beyond the review's cases. The S3 cases run against moto in server mode on
loopback, through a front (`tests/store/forward.py`)."""

from __future__ import annotations

import gzip
import html
import json
import logging
import re
from pathlib import Path

import botocore
import pytest
from click.testing import CliRunner

from epochgc.impl.gc import stage
from epochgc.impl.gc.delete import delete_keys
from epochgc.impl.gc.journal import JournalTarget, JournalTotals, JournalWriter
from epochgc.impl.store.s3 import S3Store
from tests.store.forward import (
    FrontHandler,
    FrontServer,
    error_body,
    forward,
    no_key_retry,
    serving,
)
from tests.store.s3server import new_bucket
from tests.store.test_rev38z5 import _ATTEMPT, _PREFIX, _per_key_errors, _read_back
from tests.store.test_rev38z9 import _ResentDeleteServer


@pytest.mark.s3
def test_reset_says_a_lease_its_own_request_may_have_removed_is_gone(
    moto_endpoint: str
) -> None:
    """Finding 3's words: a reset whose conditional DeleteObject an intermediary carried
    out with its first copy, the second answered 404 NoSuchKey, says the lease is "gone:
    removed by this request or another" (it said "nothing to remove"), and names the
    round whose lease it was."""
    from epochgc.impl.cli import main
    from epochgc.impl.gc.lease import LEASE_KEY
    from tests.gc.helpers import simple_cluster

    direct = S3Store(new_bucket(moto_endpoint), "c", endpoint_url=moto_endpoint)
    simple_cluster(direct, 100)  # a cluster's store (`check_is_store`)
    direct.put(LEASE_KEY, b'{"round": "20270301T100000.000Z-s28c", "token": "t", '
                          b'"renewed_at": 1.0, "expires_at": 2.0}')
    with serving(_ResentDeleteServer(moto_endpoint, 404, "NoSuchKey")) as front:
        r = CliRunner().invoke(main, ["gc-admin", "reset", "--store",
                                      f"s3://{direct.bucket}/c", "--s3-endpoint",
                                      front.endpoint(), "--force"])
        assert front.forwarded == 1
    assert direct.head(LEASE_KEY) is None
    said = f"gc-admin: reset: {LEASE_KEY} gone: removed by this request or another"
    assert said in r.output, (r.exit_code, r.output)
    assert "20270301T100000.000Z-s28c" in r.output, r.output


def _s3_codes() -> dict[str, int]:
    """Every code of S3's list of error codes, as botocore's model of S3 carries it (the
    `Error` shape's `Code` documentation: the text of API_Error.html; `test_keycodes`
    reads the same), with the HTTP status the list gives it (400 where it gives none)."""
    model = Path(botocore.__file__).parent / "data" / "s3" / "2006-03-01" / "service-2.json.gz"
    shapes = json.loads(gzip.decompress(model.read_bytes()))["shapes"]
    doc = html.unescape(re.sub(r"<[^>]+>", " ", shapes["Error"]["members"]["Code"]
                               ["documentation"]))
    codes: dict[str, int] = {}
    for code, rest in re.findall(r"Code:\s*(\w+)\s+Description:(.*?)"
                                 r"(?=Code:\s*\w+\s+Description:|$)", doc, re.S):
        status = re.search(r"Code:\s*(\d{3})\b", rest)
        codes.setdefault(code, int(status.group(1)) if status else 400)
    return codes


_CODES = _s3_codes()
_MODES = ("whole", "per-key")
D = "level_zero/data/001/000000000000000005/"  # journaled keys are data keys (spec R20)


class _EveryCodeServer(FrontServer):
    """An intermediary that sent each DeleteObjects on (its first copy, forwarded to moto:
    carried out, the key deleted), lost that answer, sent it again, and relays the second
    copy's answer: the code the key's name gives, `<D><mode>.<code>`, for the whole
    request (its status in S3's list, S3's error body) or per key (a 200 DeleteResult)."""

    def __init__(self, upstream: str) -> None:
        self.forwarded: set[bytes] = set()  # keys whose first copy went on
        super().__init__(upstream, _EveryCode)


class _EveryCode(FrontHandler):
    server: _EveryCodeServer

    def answer_delete(self, body: bytes) -> None:
        keys = re.findall(rb"<Key>([^<]*)</Key>", body)
        with self.server.lock:
            first = not self.server.forwarded & set(keys)
            self.server.forwarded.update(keys)
        if first:
            forward(*self.server.upstream, self.command, self.path, self.headers, body)
        named = [k.decode().rpartition("/")[2].split(".", 1) for k in keys]
        if named[0][0] == "per-key":
            status = 200
            data = _per_key_errors(body, "", "m")
            for key, (_, code) in zip(keys, named, strict=True):  # each key its own code
                data = data.replace(b"<Key>" + key + b"</Key><Code></Code>",
                                    b"<Key>" + key + b"</Key><Code>" + code.encode()
                                    + b"</Code>")
        else:
            assert len(keys) == 1, keys  # a batch of its own: the whole answer is its
            code = named[0][1]
            status = _CODES[code]
            data = error_body(code, "m", "s28c")
        self.send_xml(status, data)


@pytest.fixture(scope="module")
def every_code_read_back(moto_endpoint: str) -> tuple[S3Store, JournalTotals, list[float]]:
    """One key per (mode, code) of S3's list, deleted through `_EveryCodeServer` by a
    task's client (no retry of its own), journaled: each "whole" key in a batch of its own,
    the "per-key" ones in one batch; then the live driver's read-back (its wait recorded,
    not slept: the first copies are in already). moto's request lines are not logged
    meanwhile (300 of them cost a second)."""
    quiet = logging.getLogger("werkzeug")
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    try:
        direct = S3Store(new_bucket(moto_endpoint), "c", endpoint_url=moto_endpoint)
        for mode in _MODES:
            for code in _CODES:
                direct.put(f"{D}{mode}.{code}", b"x")
        items = [(o.key, 1, 7200.0, o.version) for o in direct.list_all(D)]
        assert len(items) == 2 * len(_CODES)
        with serving(_EveryCodeServer(moto_endpoint)) as front:
            store = S3Store(direct.bucket, "c", endpoint_url=front.endpoint(),
                            max_attempts=0, key_retry=no_key_retry())
            try:
                writer = JournalWriter(direct, JournalTarget(_PREFIX), _ATTEMPT)
                for mode, batch_size in (("whole", 1), ("per-key", len(_CODES))):
                    delete_keys(store, [i for i in items if i[0].startswith(f"{D}{mode}.")],
                                batch_size=batch_size, concurrency=4, journal=writer)
            finally:
                store.close()
            assert len(front.forwarded) == len(items)
        with pytest.MonkeyPatch.context() as monkeypatch:
            totals, waited = _read_back(direct, writer, monkeypatch)
    finally:
        quiet.setLevel(level)
    return direct, totals, waited


@pytest.mark.s3
@pytest.mark.parametrize("mode", _MODES)
@pytest.mark.parametrize("code", sorted(_CODES))
def test_no_code_whole_or_per_key_records_a_key_the_rounds_request_deleted_not_deleted(
    every_code_read_back: tuple[S3Store, JournalTotals, list[float]], code: str, mode: str
) -> None:
    """THE RULE (`impl/store/s3.py`), seeded with every code of S3's list, answered for the
    whole request and per key by an intermediary's second copy after its first deleted the
    key: the round's record never says "not deleted" (an error, listed again next round)
    of the key, which is gone. Reviews rev38z7, z8 and z9 each found one more code an
    allow-list got wrong; this asks them all."""
    direct, totals, waited = every_code_read_back
    key = f"{D}{mode}.{code}"
    assert direct.head(key) is None  # the first copy deleted it
    assert key not in totals.errors and key not in totals.unknown, (
        f"{key}: the round's own request deleted it, yet the record says "
        f"{totals.errors.get(key) or totals.unknown.get(key)!r}")
    assert key in totals.deleted or key in totals.gone_unattributed, key
    assert len(waited) == 1 and 0 < waited[0] <= stage.SENT_APPLIED_S, waited
