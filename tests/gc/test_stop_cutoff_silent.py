"""newuser10 L5 (its first half): a round stopped while its store is silent. The stage's
cutoff ("up to 20s, then the tasks are cancelled") started only once the STOP marker's PUT
had returned: on a store that accepts and never answers it was retried for minutes
(botocore: 10 attempts of 60 s), and a PUT that failed never started it at all, so the
tasks were never cancelled (330 s after Ctrl-C the round still printed the same progress
line). Now the cutoff starts once STOP is durable, once its write has failed, or at the
latest `at_latest_s` after the request.

Real parts: `RoundStop`, `arm_stop_marker`, an `S3Store` against a real listening socket
that never answers (`blackhole.py`), a local store whose STOP key is a directory. The
waits are bounds on an Event, not sleeps."""

from __future__ import annotations

import threading
from pathlib import Path

from epochgc.impl.gc.journal import STOP, journal_prefix
from epochgc.impl.gc.stage import arm_stop_marker
from epochgc.impl.gc.stop import RoundStop
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.s3 import S3Store
from tests.store.blackhole import Blackhole

BOUND_S = 120.0  # the old code never started the cutoff: the test fails at this bound
PREFIX = journal_prefix("20270115T060000.000Z-stopcut0")


def test_the_cutoff_starts_though_the_stop_write_does_not_answer(hole: Blackhole) -> None:
    """Old code: `after` (the cutoff's start) not called within the bound: the STOP PUT
    was still waiting for its answer."""
    store = S3Store("gcb", "p1", endpoint_url=hole.endpoint)
    started = threading.Event()
    stop = RoundStop()
    arm_stop_marker(stop, store, PREFIX, lambda _line: None, after=started.set,
                    at_latest_s=0.5)
    stop.request("SIGINT")
    assert hole.requested.wait(BOUND_S)  # the STOP PUT reached the silent endpoint
    assert started.wait(BOUND_S), "the cutoff never started: STOP's write holds it"


def test_the_cutoff_starts_when_the_stop_write_fails(tmp_path: Path) -> None:
    """Old code: the failure was said and `after` never called."""
    store = LocalStore(tmp_path / "s", create=True)
    (tmp_path / "s" / PREFIX / STOP).mkdir(parents=True)  # no file can be written there
    started = threading.Event()
    said: list[str] = []
    stop = RoundStop()
    arm_stop_marker(stop, store, PREFIX, said.append, after=started.set,
                    at_latest_s=BOUND_S * 10)  # not this bound: the failure starts it
    stop.request("SIGINT")
    assert started.wait(BOUND_S), f"the cutoff never started; said: {said}"
    assert said and said[0].startswith("gc: could not write the STOP marker: "), said
