"""newuser13 Q6 without a signal (issue 41): the safety monitor stopped a round whose store
had gone silent, and each of the driver's writes after it (STOP, the lease's replace, END,
the journal's read-back) still got botocore's retries, ~150 s each: the round ran 15.5
minutes and outlived its 10-minute lease, so another round could take the store while it
still wrote. Here the bound the `gc` command installs (`stop.driver_bound`), a real S3
client, and an endpoint that accepts and never answers (`tests/store/blackhole.py`)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from epochgc.impl.gc.lease import Lease
from epochgc.impl.gc.stop import RoundStop, driver_bound
from epochgc.impl.store.base import StoreError
from epochgc.impl.store.driverbound import installed
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.patience import Patience
from epochgc.impl.store.s3 import S3Store
from tests.store.blackhole import Blackhole, hole  # noqa: F401  (the fixture)

# An attempt's wait, short for the test (the command's is 10 s, EPOCHGC_CONTROL_READ_TIMEOUT_S)
_SHORT = Patience(read_timeout_s=0.3)


@pytest.mark.parametrize("reason", ["unhealthy", "lease-unsure", "watch-late"])
def test_a_stop_of_the_monitor_bounds_the_drivers_requests_as_a_signal_does(
        hole: Blackhole, reason: str) -> None:  # noqa: F811
    stop = RoundStop()
    stop.request(reason)  # the safety monitor's stop (or the gate's): no signal, no deadline
    bound = driver_bound(stop, _SHORT)
    with installed(bound):
        store = S3Store("gcb", "p1", endpoint_url=hole.endpoint)
    try:
        with pytest.raises(StoreError):
            store.put("_cluster/gc/journal/r/STOP", b"{}")
        # One attempt, not botocore's 10 (old code: 10 attempts here, ~150 s a write at the
        # command's 10 s an attempt)
        assert hole.accepted == 1 and bound.silent.is_set()
        with pytest.raises(StoreError, match="not sent: the round is stopping"):
            store.put("_cluster/gc/lease.json", b"{}")
        assert hole.accepted == 1, "a request was sent after the store went unanswered"
    finally:
        store.close()


def test_no_driver_request_is_sent_once_its_lease_may_have_expired(
        hole: Blackhole, tmp_path: Path) -> None:  # noqa: F811
    """The general case: whatever stopped the round, or nothing, no request of its driver
    goes out when its answer could come after the round's lease expires (by the lease's
    own clock: from its last write that succeeded), since another round may hold the store
    by then. The lease here is short; the wait is for the condition, not a duration."""
    stop = RoundStop()  # nothing stopped the round
    bound = driver_bound(stop, _SHORT)
    with installed(bound):
        lease = Lease(lambda: LocalStore(tmp_path), "20261130T000000.000Z-00000001",
                      duration_s=1.0)
        lease.acquire()
        held = time.monotonic()  # the lease's document was made before this
        store = S3Store("gcb", "p1", endpoint_url=hole.endpoint)
    try:
        # Until its expiry, and one attempt's wait before it, a write would still be sent
        waited = threading.Event()
        while time.monotonic() < held + lease.duration_s:
            waited.wait(0.05)  # a poll of the clock, not a timing assumption
        with pytest.raises(StoreError, match="not sent: the round's GC lease"):
            store.put("_cluster/gc/journal/r/END.json", b"{}")
        assert hole.accepted == 0, "a request was sent past the round's lease"
    finally:
        store.close()
        lease.release()
