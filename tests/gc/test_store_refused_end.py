"""newuser13 Q2 (issue 41): a store gone mid-round that refuses connections (its server
stopped). The round failed on its journal's read-back and its END and record could not be
written: its last line was the read-back's error, and nothing said that its lease stays
held and what records the round. A real S3 client against a loopback port that refuses."""

from __future__ import annotations

import socket
from dataclasses import replace

import pytest

from epochgc.impl.gc.cli import failure_line
from epochgc.impl.gc.job import _write_record
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.gc.summary import GcSummary
from epochgc.impl.store.s3 import S3Store
from tests.store.s3server import set_dummy_aws_env

pytest.importorskip("boto3")

JOURNAL = "_cluster/gc/journal/20270115T060000.000Z-r3fused0/"
ADVICE = ("`epochgc gc-admin reset --force` (same --store) records it later from its "
          f"journal {JOURNAL} once the store answers, and removes its lease")


def _refused_store(port: socket.socket) -> S3Store:
    return S3Store("gcb", "p1", endpoint_url=f"http://127.0.0.1:{port.getsockname()[1]}",
                   max_attempts=1)


def test_a_round_whose_record_the_store_refused_ends_saying_what_records_it() -> None:
    set_dummy_aws_env()
    port = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    port.bind(("127.0.0.1", 0))  # bound, not listening: each connection refused
    s = GcSummary(M=7, round_id=JOURNAL.rstrip("/").rsplit("/", 1)[1], journal=JOURNAL,
                  deleted=2998, journal_read=False,
                  error=f"the deletion journal {JOURNAL} cannot be read back: list failed: "
                        "Could not connect to the endpoint URL")
    try:
        _write_record(lambda: _refused_store(port), s, GcOptions())
    finally:
        port.close()
    assert s.record is None and s.record_error is not None
    assert "Could not connect" in s.record_error, s.record_error
    assert s.record_advice == ADVICE, s.record_advice
    last = failure_line(s)
    assert last.startswith("epochgc gc: error: the deletion journal "), last
    assert last.endswith(f"; its record was not written: {ADVICE}"), last
    # A round that did not fail (its summary's lines) says it in its warning.
    done = replace(s, error=None, journal_read=True)
    assert any(ln.startswith("gc: warning: deletion record not written: ")
               and ln.endswith(ADVICE) for ln in done.lines()), done.lines()
