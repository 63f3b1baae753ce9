"""The demo's and chaos's GC rounds (impl/cluster/demo_gc.py): a pause stops the round it
meets, not the rounds after the operator's `gc-admin start` (an outside tester's chaos run
on S3: a mid-round pause at 27 s, `gc-admin start` at 35 s, and every later round "not
started: paused"; the run said OK with nothing collected). A signal stops the running
round and every later one.

`run_gc` is replaced by a stand-in that stops its round the way the round's watch does on a
pause (`stop.request("paused")`): what is under test is DemoGc's handling of the stop
across rounds, not the Spark job (whose pause is pinned in tests/gc/test_admin_cli.py)."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from epochgc.impl.cluster import demo_gc
from epochgc.impl.gc.stop import RoundStop
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.url import StoreSpec


def _gc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pause_first: bool) -> demo_gc.DemoGc:
    gc = demo_gc.DemoGc(StoreSpec("file", str(tmp_path)), LocalStore(tmp_path, create=True),
                        60.0, "model")
    session: concurrent.futures.Future[Any] = concurrent.futures.Future()
    session.set_result(object())
    gc._session = session  # the Spark engine's path, without a JVM
    calls: list[RoundStop] = []

    def run_gc(_spark: object, _spec: object, _opts: object, *, clock: Any, stop: RoundStop
               ) -> SimpleNamespace:
        calls.append(stop)
        paused = pause_first and len(calls) == 1
        if paused:
            stop.request("paused")  # the watch saw `gc-admin pause` mid-round
        return SimpleNamespace(refused=None, errors=0, interrupted=stop.reason, M=7,
                               paused=None, blocked=None, deleted=0 if paused else 3,
                               safety_blocked=False)

    import epochgc.impl.gc.job as job

    monkeypatch.setattr(job, "run_gc", run_gc)
    gc.calls = calls  # type: ignore[attr-defined]
    return gc


def test_a_round_a_pause_stopped_does_not_stop_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gc = _gc(tmp_path, monkeypatch, pause_first=True)
    first = gc.run_round()
    assert first.stopped_by_pause and first.deleted == 0
    second = gc.run_round()  # after `gc-admin start`
    assert not second.stopped_by_pause and second.deleted == 3
    assert gc.calls[0] is not gc.calls[1]  # type: ignore[attr-defined]


def test_a_signal_stops_the_running_round_and_every_later_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gc = _gc(tmp_path, monkeypatch, pause_first=False)
    gc.run_round()
    gc._session = None  # interrupt() would stop a JVM still starting: there is none here
    gc.interrupt("SIGINT")
    session: concurrent.futures.Future[Any] = concurrent.futures.Future()
    session.set_result(object())
    gc._session = session
    with pytest.raises(RuntimeError, match="not started: SIGINT"):
        gc.run_round()
    assert len(gc.calls) == 1  # type: ignore[attr-defined]
