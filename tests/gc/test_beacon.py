"""The tasks' progress counts reach the driver over real UDP on loopback (issue 41 item 10:
keys listed and deleted while a round runs, without a store request). The counts are
advisory; these pin how they add up: attempts' deletions add, a partition's listing counts
once (its highest attempt), late or reordered datagrams never lower a count, and anything
that is not a task's counts is ignored."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from epochgc.impl.gc.beacon import Beacon, BeaconListener


def _send(listener: BeaconListener, doc: object) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
        s.sendto(data, (listener.target.host, listener.target.port))


def test_a_tasks_final_counts_arrive_before_sync_returns() -> None:
    with BeaconListener() as listener:
        # A long interval: only the final send at the block's end carries the counts.
        with Beacon(listener.target, "p0003-s1-a0-t7", interval=3600) as tally:
            tally.add(listed=1000)
            tally.add(listed=234, deleted=800)
        listener.sync()
        assert listener.totals() == (1234, 800)


def test_attempts_deletions_add_and_a_partitions_listing_counts_once() -> None:
    with BeaconListener() as listener:
        _send(listener, {"task": "p0001-s1-a0-t1", "listed": 500, "deleted": 200})
        _send(listener, {"task": "p0001-s1-a1-t9", "listed": 450, "deleted": 100})  # retry
        _send(listener, {"task": "p0002-s1-a0-t2", "listed": 70, "deleted": 0})
        listener.sync()
        assert listener.totals() == (500 + 70, 300)


def test_a_late_datagram_never_lowers_a_count() -> None:
    with BeaconListener() as listener:
        _send(listener, {"task": "p0001-s1-a0-t1", "listed": 900, "deleted": 40})
        _send(listener, {"task": "p0001-s1-a0-t1", "listed": 300, "deleted": 10})
        listener.sync()
        assert listener.totals() == (900, 40)


def test_what_is_not_a_tasks_counts_is_ignored() -> None:
    with BeaconListener() as listener:
        for junk in (b"", b"\xff\xfe", b"[1, 2]", b"{}" , b"x" * 2000,
                     {"task": 3, "listed": 1, "deleted": 1},
                     {"task": "p1", "listed": True, "deleted": 0},
                     {"task": "p1", "listed": -5, "deleted": 0},
                     {"task": "p1", "listed": 1.5, "deleted": 0},
                     {"task": "p1", "listed": 1 << 70, "deleted": 0}):
            _send(listener, junk)
        _send(listener, {"task": "p0009-s1-a0-t1", "listed": 3, "deleted": 2})
        listener.sync()
        assert listener.totals() == (3, 2)


def test_no_target_sends_nothing_and_keeps_the_tally() -> None:
    with Beacon(None, "p0000-s0-a0-t0") as tally:
        tally.add(listed=5)
    assert tally.snapshot() == (5, 0)


def test_close_ends_the_listener_and_a_later_sync_returns() -> None:
    listener = BeaconListener().start()
    listener.close()
    listener.sync()  # the socket is closed: returns, never waits


def test_the_lister_threads_count_every_key_listed(tmp_path: Path) -> None:
    # S3 lists with lister threads, each with its own ScanStats: the tally must still see
    # every key the listing examined (an outside tester read "1/4 tasks done, 0 keys
    # listed" on moto as a lost count; it was a task whose keys were above M).
    from epochgc.impl.gc.beacon import Tally
    from epochgc.impl.gc.scan import ScanStats
    from epochgc.impl.gc.stream import listed
    from epochgc.impl.store.local import LocalStore
    from epochgc.model.keys import format_key
    from tests.gc.helpers import HOUR, NOW, put_local

    LocalStore(tmp_path, create=True)
    for p in range(8):
        for e in (5, 6, 7, 40):  # 40 is above M: the listing of the prefix stops there
            put_local(tmp_path, format_key(p, e, f"o{e}"), age=2 * HOUR)
    for threads in (1, 3):
        tally, stats = Tally(), ScanStats()
        rows = list(listed(LocalStore(tmp_path), range(8), 10, NOW, HOUR, 2, stats, threads,
                           tally))
        assert len(rows) == 8 * 3 and stats.listed == 8 * 4
        assert tally.snapshot() == (stats.listed, 0)


def test_sync_returns_when_its_marker_is_lost() -> None:
    # A full receive buffer drops the marker too: sync must not wait for it forever (it
    # runs before the round's journal read-back). Seeded loss: the marker is never sent.
    import epochgc.impl.gc.beacon as beacon

    with BeaconListener() as listener:
        real = beacon.socket.socket

        class Mute(real):  # type: ignore[misc,valid-type]
            def sendto(self, *a: object) -> int:  # type: ignore[override]
                return 0

        beacon.socket.socket = Mute  # type: ignore[misc]
        try:
            listener.sync(limit_s=0.3)
        finally:
            beacon.socket.socket = real  # type: ignore[misc]
        assert not listener._waiting


def test_the_counts_text_says_one_key_not_one_keys() -> None:
    from epochgc.impl.gc.progress import counts_text

    assert counts_text((1, 0), False, 1.0) == "1 key listed, 1 keys/s"
    assert counts_text((12000, 4000), True, 5.0) == "12,000 keys listed, 4,000 deleted, 800 keys/s"
