"""newuser14 R1(a) (issue 41, HIGH): `gc-admin pause` mid-round, then ONE Ctrl-C while the
round read its journal back (the first signal after a pause's stop ends the round at once,
`SignalAgain`): "SIGTERM again: stopped at once; no key was deleted", and the round's final
record (lease released: nothing corrects it) said listed 0, deleted 0, while 1,020 / 2,017 /
7,969 keys were gone. The read-back was cut short and its counts were left at 0 (and, cut in
the stage-end STOP's write, `journal_read` still said true). Now such a signal finishes the
read-back, without its waits, before the round ends: the record and the last line say what
was deleted. The real signal handlers, a real signal to this process at each point of the
read-back (the stage-end STOP, the journal's listing), real Spark, a local store."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.gc.cli import failure_line
from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.journal import STOP
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.gc.stop import RoundStop, SignalAgain, install_signal_handlers
from epochgc.impl.store.base import ObjectStore
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.url import StoreSpec
from epochgc.model.keys import format_key
from tests.gc.helpers import HOUR, NOW, _Delegating, all_keys, local_spec, put_local, simple_cluster

# Set in the test's (the driver's) process only: the tasks' processes see None.
_AT: dict[str, Callable[[], None]] = {}


class _Pausing(_Delegating):
    """Calls the trigger for `point` (once) when the driver reaches it: "stop" (the
    stage-end STOP's PUT) or "list" (the read-back's listing of the journal)."""

    def __init__(self, inner: ObjectStore, point: str) -> None:
        super().__init__(inner)
        self.point = point

    def _reach(self, point: str) -> None:
        if point == self.point and (fire := _AT.pop(point, None)) is not None:
            fire()

    def put(self, key: str, data: bytes) -> None:
        if key.endswith("/" + STOP) and json.loads(data)["reason"] == "stage over":
            self._reach("stop")
        super().put(key, data)

    def list_page(self, prefix: str, start_after: str | None = None, limit: int = 1000,
                  until: str | None = None) -> Any:
        if prefix.startswith("_cluster/gc/journal/") and prefix.count("/") == 4:
            self._reach("list")
        return super().list_page(prefix, start_after, limit, until)


@dataclass(frozen=True)
class Pausing:
    inner: StoreSpec
    point: str

    @property
    def kind(self) -> str:
        return self.inner.kind

    def __call__(self) -> ObjectStore:
        return _Pausing(self.inner(), self.point)


@pytest.mark.spark
@pytest.mark.parametrize("point", ["stop", "list"])
def test_a_signal_that_cuts_the_read_back_short_leaves_a_true_record(
    spark: Any, tmp_path: Path, point: str
) -> None:
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100)
    keys = [format_key(p, 50, f"k{p}") for p in range(0, 200, 50)]
    for k in keys:
        put_local(root, k, age=13 * HOUR)
    stop = RoundStop()

    def pause_then_signal() -> None:
        stop.request("paused")  # as the watch does when it finds the store paused
        os.kill(os.getpid(), signal.SIGINT)  # handled here, in the main thread

    _AT[point] = pause_then_signal
    restore = install_signal_handlers(stop)
    try:
        with pytest.raises(SignalAgain) as caught:
            run_gc(spark, Pausing(local_spec(root), point), GcOptions(tasks=1),
                   clock=lambda: NOW, stop=stop)
    finally:
        restore()
        _AT.clear()
    assert not _AT, "the signal was never sent"
    s = caught.value.summary  # type: ignore[attr-defined]
    gone = set(keys) - all_keys(LocalStore(root))
    assert gone == set(keys)
    assert s.record is not None, s
    rec = json.loads((root / s.record).read_bytes())
    # Old code: deleted 0, listed 0, journal_read false (or true), with 4 keys gone.
    counts = rec["counts"]
    assert (counts["deleted"], rec["journal_read"]) == (len(gone), True), rec
    assert rec["outcome"] == "interrupted" and rec["interrupted"] == "paused", rec
    assert counts["eligible"] >= len(gone) and counts["listed"] >= len(gone), rec
    line = failure_line(s)
    assert "no key was deleted" not in line and f"{len(gone)} key(s) were deleted" in line, line
