"""newuser14 R4 (issue 41): `--deadline` passing while the stage-end STOP was retried on a
store gone silent: no line named the deadline; the STOP's failure was said twice ("warning:
the journal's STOP marker (stage over) not written" from the stage's end, "could not write
the STOP marker" from the stop's own STOP, armed for the stage and written for the
deadline); and the last line, the read-back's error, named neither the deadline nor the
stop. Now the stage's end disarms the stop's STOP (the stage writes its own), the deadline
is said when it passes, and a failure line names what had stopped the round."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.gc.cli import failure_line
from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.journal import STOP
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.gc.stop import RoundStop, announce
from epochgc.impl.gc.summary import GcSummary
from epochgc.impl.store.base import ObjectStore, StoreError
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.url import StoreSpec
from epochgc.model.keys import format_key
from tests.gc.helpers import HOUR, NOW, _Delegating, local_spec, put_local, simple_cluster

# Set in the test's (the driver's) process only: the tasks' processes see None.
_AT_STAGE_END: list[Callable[[], None]] = []
_SILENT = threading.Event()  # from the stage-end STOP on, every STOP PUT fails


class _SilentAtStageEnd(_Delegating):
    def put(self, key: str, data: bytes) -> None:
        if key.endswith("/" + STOP):
            if json.loads(data)["reason"] == "stage over" and _AT_STAGE_END:
                _AT_STAGE_END.pop()()
                _SILENT.set()
            if _SILENT.is_set():
                raise StoreError("no answer within 10 s (3 attempts)")
        super().put(key, data)


@dataclass(frozen=True)
class SilentAtStageEnd:
    inner: StoreSpec

    @property
    def kind(self) -> str:
        return self.inner.kind

    def __call__(self) -> ObjectStore:
        return _SilentAtStageEnd(self.inner())


@pytest.mark.spark
def test_the_deadline_during_the_stage_end_stop_says_its_failure_once(
        spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100)
    for p in range(0, 200, 50):
        put_local(root, format_key(p, 50, f"k{p}"), age=13 * HOUR)
    stop, lines = RoundStop(), []
    _AT_STAGE_END.append(lambda: stop.request("deadline"))  # as the deadline's timer does
    _SILENT.clear()
    try:
        s = run_gc(spark, SilentAtStageEnd(local_spec(root)), GcOptions(tasks=1),
                   clock=lambda: NOW, say=lines.append, stop=stop)
    finally:
        stop.close()  # the stop's helper threads (its armed STOP) have ended
        _AT_STAGE_END.clear()
        _SILENT.clear()
    said = [ln for ln in lines if "STOP marker" in ln]
    # Old code: also "gc: could not write the STOP marker: no answer ..." (the deadline's)
    assert len(said) == 1 and "(stage over) not written" in said[0], lines
    assert s.interrupted == "deadline" and s.deleted == 4, s


def test_the_deadline_is_said_when_it_passes() -> None:
    stop, said = RoundStop(), []
    announce(stop, said.append)
    stop.means = "the delete stage is over; writing its STOP marker, then reading ..."
    stop.request("deadline")
    stop.close()  # waits for `announce`'s thread
    # Old code: nothing (only signals were said)
    assert said == ["gc: the --deadline passed: stopping: the delete stage is over; writing "
                    "its STOP marker, then reading ......"], said


def test_the_last_line_names_the_deadline_that_stopped_a_round_that_then_failed() -> None:
    s = GcSummary(M=7, journal="_cluster/gc/journal/r/", interrupted="deadline",
                  journal_read=False,
                  error="the deletion journal _cluster/gc/journal/r/ cannot be read back: "
                        "no answer")
    line = failure_line(s)
    # Old code: "epochgc gc: error: the deletion journal ... cannot be read back: no answer; ..."
    assert line.startswith("epochgc gc: error: the deletion journal _cluster/gc/journal/r/ "
                           "cannot be read back: no answer (the round was stopping: its "
                           "--deadline had passed); "), line
