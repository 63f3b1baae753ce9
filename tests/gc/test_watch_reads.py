"""Issue 38 (S3 at the limit), the in-round watch's cost: a look HEADs the round's STOP,
reads the pause state, and lists the reports and the snapshot in one request, reading only
what changed since the previous look (`reports.SeenDocs`). Issue 30's guarantees stay: a
pause is read every look, a changed report is read again, anything unreadable is an
unknown health. On a local store, moto and SeaweedFS (their listings' versions differ)."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from epochgc.impl.gc.admin import ADMIN_KEY
from epochgc.impl.gc.bounds import LOOK_FRESH_S, STOP_LOOK_EVERY_S
from epochgc.impl.gc.journal import STOP, journal_prefix, write_marker
from epochgc.impl.gc.monitor import HealthVerdict
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.gc.reports import PARTITIONS_KEY
from epochgc.impl.gc.stop import RoundStop
from epochgc.impl.gc.watch import PAUSED, STOPPED, UNHEALTHY, RoundWatch
from epochgc.impl.store.base import ListPage, ObjectInfo, ObjectStore
from tests.gc.helpers import _Delegating, write_health, write_partitions
from tests.store.backends import Opener

PREFIX = journal_prefix("20270115T070000.000Z-w4tchr0d")


class _Tally(_Delegating):
    """Counts the requests of each kind by key (a listing by its prefix)."""

    def __init__(self, inner: ObjectStore, tally: Counter[tuple[str, str]]) -> None:
        super().__init__(inner)
        self.tally = tally

    def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        self.tally["get", key] += 1
        return self.inner.get(key, start, end)

    def get_versioned(self, key: str, limit: int) -> Any:
        self.tally["get", key] += 1
        return self.inner.get_versioned(key, limit)

    def head(self, key: str) -> ObjectInfo | None:
        self.tally["head", key] += 1
        return self.inner.head(key)

    def list_page(self, prefix: str, start_after: str | None = None, limit: int = 1000,
                  until: str | None = None) -> ListPage:
        self.tally["list", prefix] += 1
        return self.inner.list_page(prefix, start_after, limit, until)


def _cluster(store: ObjectStore, m: int = 100) -> None:
    write_partitions(store, 7, ["t/0", "t/1"])
    write_health(store, "n1", time.time(), [("t/0", m), ("t/1", m + 5)])
    write_health(store, "n2", time.time(), [("t/0", m - 3), ("t/1", m)])


def _watch(open_store: Opener, tally: Counter[tuple[str, str]],
           verdicts: list[HealthVerdict], monotonic: Any = time.monotonic) -> RoundWatch:
    # the default interval (an interval past MAX_WATCH_INTERVAL_S, which the options
    # refuse, makes every look end with a HEAD of STOP: review rev38o finding 6)
    return RoundWatch(lambda: _Tally(open_store(), tally), RoundStop(), time.time, 3600.0,
                      GcOptions().watch_interval_s, verdicts.append, stop_key=PREFIX + STOP,
                      monotonic=monotonic)


def test_a_look_reads_only_what_changed(open_store: Opener) -> None:
    """Three looks over an unchanged cluster, 10 s apart: each reads the pause state and
    lists once; the snapshot and each report are read at the first look only (before: 1
    GET of the snapshot, 1 listing and 1 GET per report at every look); STOP is HEADed at
    the first look, then once the last HEAD is 30 s old. A report rewritten is read again
    at the next look."""
    store = open_store()
    _cluster(store)
    tally: Counter[tuple[str, str]] = Counter()
    verdicts: list[HealthVerdict] = []
    now = [0.0]
    watch = _watch(open_store, tally, verdicts, lambda: now[0])
    for _ in range(3):
        assert watch.poll_once() is None, verdicts
        assert watch.fresh(LOOK_FRESH_S)
        now[0] += 10.0
    n1, n2 = "_cluster/health/n1.json", "_cluster/health/n2.json"
    assert tally["head", PREFIX + STOP] == 1  # at 0 s; 10 s and 20 s: not yet
    assert watch.poll_once() is None  # 30 s: again
    assert tally["head", PREFIX + STOP] == 2 and watch.fresh(0.0)
    assert tally["get", ADMIN_KEY] + tally["head", ADMIN_KEY] >= 4  # the pause, every look
    assert tally["get", PARTITIONS_KEY] == 1 and tally["get", n1] == 1 and tally["get", n2] == 1
    assert sum(n for (kind, _), n in tally.items() if kind == "list") == 4, tally
    # n2 rewritten: read again (and only it)
    time.sleep(0.01)
    write_health(store, "n2", time.time(), [("t/0", 97), ("t/1", 100)])
    assert watch.poll_once() is None
    assert tally["get", n2] == 2 and tally["get", n1] == 1 and tally["get", PARTITIONS_KEY] == 1
    now[0] += 100.0  # no look for 100 s: the gate's "go" is no longer backed by a HEAD
    assert not watch.fresh(LOOK_FRESH_S)


def test_a_report_rewritten_bad_is_seen_at_the_next_look(open_store: Opener) -> None:
    """The boundary of the cache: a report a node rewrites as unhealthy (a replica lost) is
    read again and stops the round; a seeded cache by key alone keeps the old verdict."""
    store = open_store()
    _cluster(store)
    tally: Counter[tuple[str, str]] = Counter()
    verdicts: list[HealthVerdict] = []
    watch = _watch(open_store, tally, verdicts)
    assert watch.poll_once() is None
    time.sleep(0.01)
    write_health(store, "n2", time.time(), [("t/0", 97)])  # t/1 gone from n2
    store.put("_cluster/health/n1.json", b"{not json")
    assert watch.poll_once() == UNHEALTHY
    assert "n1.json" in verdicts[-1].why()


def test_a_pause_a_stop_and_a_lost_snapshot_are_seen_at_the_next_look(
    open_store: Opener,
) -> None:
    """Issue 30: the pause state is read every look; the STOP marker too; a snapshot that
    disappears is an unknown health (not the copy of the previous look)."""
    store = open_store()
    _cluster(store)
    tally: Counter[tuple[str, str]] = Counter()
    verdicts: list[HealthVerdict] = []
    now = [0.0]
    watch = _watch(open_store, tally, verdicts, lambda: now[0])
    assert watch.poll_once() is None
    store.delete_batch([PARTITIONS_KEY])
    assert watch.poll_once() == UNHEALTHY and "partitions.json" in verdicts[-1].why()
    write_partitions(store, 8, ["t/0", "t/1"])
    assert watch.poll_once() is None
    store.put(ADMIN_KEY, b'{"paused": true, "by": "ops", "reason": "test"}')
    assert watch.poll_once() == PAUSED
    store.delete_batch([ADMIN_KEY])
    write_marker(store, PREFIX, STOP, {"reason": "killed", "by": "gc-admin reset"})
    assert watch.poll_once() is None  # its last HEAD is not yet STOP_LOOK_EVERY_S old
    now[0] += STOP_LOOK_EVERY_S
    assert watch.poll_once() == STOPPED
