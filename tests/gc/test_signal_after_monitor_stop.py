"""newuser13 Q6 (issue 41): the safety monitor stopped a round whose store had gone silent;
the round then wrote its STOP, lease and END on that store, each retried by botocore for
150 s, past its own 10-minute lease. SIGINT, SIGINT, SIGTERM were each said as "again"
(or not at all) and did not shorten it: the driver's requests were cut short only for a
stop by a signal or the deadline, and a signal after the monitor's stop was not one.
Here: the real handlers, a real signal to this process, the round finishing after the
monitor's stop, and a real S3 client on an endpoint that never answers."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from epochgc.impl.gc.stop import RoundStop, announce, install_signal_handlers
from epochgc.impl.store.base import StoreError
from epochgc.impl.store.driverbound import DriverBound, installed
from epochgc.impl.store.s3 import S3Store
from tests.store.blackhole import Blackhole, hole  # noqa: F401  (the fixture)


def test_a_signal_after_the_monitors_stop_cuts_the_drivers_requests_short(
        hole: Blackhole) -> None:  # noqa: F811
    stop = RoundStop()
    said: list[str] = []
    heard = threading.Event()

    def say(line: str) -> None:
        said.append(line)
        if "SIGINT" in line:
            heard.set()

    restore = install_signal_handlers(stop)
    try:
        announce(stop, say)
        stop.request("unhealthy")  # the safety monitor: not the operator's stop
        assert not stop.operator_stops()  # not the operator's (its requests are bounded
        # as for one since s27a: tests/gc/test_monitor_stop_bounds.py)
        with stop.finishing():  # writing its record and releasing its lease
            os.kill(os.getpid(), signal.SIGINT)
            assert heard.wait(60), said  # a bound for a hang, not a timing assumption
            assert stop.operator_stops()
    finally:
        restore()
    line = next(ln for ln in said if "SIGINT" in ln)
    # Not "again": it is the first signal (old code: "gc: SIGINT again: already stopping")
    assert line.startswith("gc: SIGINT: already stopping (unhealthy): writing the round's "
                           "record"), said
    # The driver's next write to the silent store: one attempt, then none at all.
    bound = DriverBound(0.3, stop.operator_stops)
    with installed(bound):
        store = S3Store("gcb", "p1", endpoint_url=hole.endpoint)
    try:
        with pytest.raises(StoreError):
            store.put("_cluster/gc/journal/r/END.json", b"{}")
        assert hole.accepted == 1 and bound.silent.is_set()
        with pytest.raises(StoreError, match="not sent: the round is stopping"):
            store.put("_cluster/gc/lease.json", b"{}")
        assert hole.accepted == 1, "a request was sent after the store went unanswered"
    finally:
        store.close()


def test_a_deadline_after_the_monitors_stop_cuts_the_drivers_requests_short() -> None:
    """newuser13 Q6: `--deadline 90s` did not bound the round either: its request, after
    the monitor's, was not the stop's reason."""
    from epochgc.impl.gc.stop import deadline_timer

    stop = RoundStop()
    said: list[str] = []
    heard = threading.Event()

    def say(line: str) -> None:
        said.append(line)
        if "deadline" in line:
            heard.set()

    announce(stop, say)
    stop.request("unhealthy")
    assert not stop.operator_stops()
    timer = deadline_timer(stop, 0.01)
    try:
        assert stop.wait_further(60, True)  # the deadline's request came (a bound for a hang)
        assert heard.wait(60), said  # and is said (old: "no line ever mentions the deadline")
    finally:
        timer.cancel()
        stop.close()
    assert stop.reason == "unhealthy" and stop.operator_stops()
    assert any(ln.startswith("gc: deadline: already stopping (unhealthy): ") for ln in said), \
        said
