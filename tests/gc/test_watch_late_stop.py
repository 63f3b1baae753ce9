"""A round stopped `watch-late` (its watch has not HEADed STOP lately) writes its STOP
marker like every other stop (review rev38o finding 6): a task without the driver's gate,
which HEADs STOP before each batch, stops too. The stop is requested by the gate
(`watch.go_on`) and written by the marker the round arms (`stage.arm_stop_marker`)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from epochgc.impl.gc.bounds import LOOK_FRESH_S
from epochgc.impl.gc.journal import STOP, journal_prefix
from epochgc.impl.gc.stage import arm_stop_marker
from epochgc.impl.gc.stop import RoundStop
from epochgc.impl.gc.watch import RoundWatch, go_on
from epochgc.impl.store.local import LocalStore
from tests.gc.test_watch_slow_look import _cluster

ROUND = "20270115T060000.000Z-w4tchl8t"


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_watch_late_stop_writes_the_rounds_stop_marker(tmp_path: Path) -> None:
    root = tmp_path / "s"
    _cluster(root, 2)
    prefix = journal_prefix(ROUND)
    clock = _Clock()
    stop = RoundStop()
    notes: list[str] = []
    arm_stop_marker(stop, LocalStore(root), prefix, notes.append)
    watch = RoundWatch(lambda: LocalStore(root), stop, time.time, 3600.0, 2.0,
                       lambda _v: None, stop_key=prefix + STOP, monotonic=clock)
    is_open = go_on(stop, None, watch, LOOK_FRESH_S)
    assert watch.poll_once() is None and is_open()
    clock.t += LOOK_FRESH_S + 1  # no look since (the watch thread stalled)
    assert not is_open() and stop.reason == "watch-late"
    store = LocalStore(root)
    # the armed writer runs on its own thread once the stop is requested: wait for it
    # (no bound is asserted on how fast; the generous limit only ends a hung test)
    limit = time.monotonic() + 120
    while store.head(prefix + STOP) is None and not notes and time.monotonic() < limit:
        time.sleep(0.05)
    assert notes == [], notes
    assert json.loads(store.get(prefix + STOP)) == {"reason": "watch-late"}
