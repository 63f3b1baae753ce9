"""Issue 41, newuser11 M14: a store that goes silent mid-round. The round's watch (its looks
and its HEADs of STOP) used the delete path's client: botocore's adaptive retries, 11
attempts, so "health unknown" came ~146 s after the store stopped answering, with no line
meanwhile. Its requests are now a command's control reads (`watch.watch_store`): a few
attempts of the configured read timeout, and "waiting for ... no answer yet" while one
waits.

The endpoint is a real listening socket that never answers (`blackhole.py`); the timeouts
are the client's own, made small through the environment, as in a `gc` run (the driver's
bound installed, `driverbound.py`)."""

from __future__ import annotations

import time

import pytest

from epochgc.impl.gc.journal import STOP, journal_prefix
from epochgc.impl.gc.monitor import HealthVerdict
from epochgc.impl.gc.stop import RoundStop
from epochgc.impl.gc.watch import UNHEALTHY, RoundWatch, watch_store
from epochgc.impl.store.driverbound import DriverBound, installed
from epochgc.impl.store.patience import ATTEMPTS_ENV, READ_TIMEOUT_ENV, SAY_AFTER_ENV
from epochgc.impl.store.url import parse_store_url
from tests.store.blackhole import Blackhole

pytest.importorskip("boto3")

PREFIX = journal_prefix("20270115T070000.000Z-s1lent00")


def test_a_silent_store_is_an_unknown_health_within_the_control_reads_bound(
        hole: Blackhole, monkeypatch: pytest.MonkeyPatch) -> None:
    """Old code: the watch's HEAD went through the delete path's client (11 attempts with
    adaptive backoff); here 3 attempts of 0.3 s, said while they wait."""
    monkeypatch.setenv(READ_TIMEOUT_ENV, "0.3")
    monkeypatch.setenv(ATTEMPTS_ENV, "3")
    monkeypatch.setenv(SAY_AFTER_ENV, "0.1")
    spec = parse_store_url("s3://gcb/p1", hole.endpoint)
    lines: list[str] = []
    verdicts: list[HealthVerdict] = []
    stop = RoundStop()
    with installed(DriverBound(0.3, lambda: False)):  # as `gc` installs it (10 s there)
        watch = RoundWatch(watch_store(spec, lines.append), stop, time.time, 60.0, 2.0,
                           verdicts.append, stop_key=PREFIX + STOP)
        assert watch._look()  # a look, as the watch's thread makes it: it stopped the round
    assert stop.reason == UNHEALTHY
    assert hole.accepted == 3  # the control reads' attempts, not botocore's 11
    [verdict] = verdicts
    assert not verdict.healthy
    assert f"head '{PREFIX}{STOP}'" in verdict.why()
    assert "no answer within 0.3 s (3 attempts)" in verdict.why(), verdict.why()
    assert any(line.startswith(f"gc: waiting for {hole.endpoint}: no answer yet (head ")
               for line in lines), lines
