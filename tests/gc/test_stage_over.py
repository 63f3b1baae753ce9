"""Review rev38q finding 3: a completed round wrote no STOP, and its read-back ran right
after `collect`: an attempt of its stage still running then (a speculative copy being
killed, an executor taken for lost) with no answer from the closed gate fell back to a
HEAD of STOP, found none, and deleted after the read-back, in no record. Now the stage
writes STOP ("stage over") once it ends, before the read-back, and a refused gate is a
"no" (`test_rev38q.py::test_an_attempt_that_first_asks_after_the_stage_ended_sends_nothing`)."""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.gc.delete import delete_keys
from epochgc.impl.gc.gate import GateTarget
from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.journal import STOP, Attempt, JournalTarget, JournalWriter
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.store.base import ObjectStore
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.url import StoreSpec
from epochgc.model.keys import format_key
from tests.gc.helpers import HOUR, NOW, _Delegating, all_keys, local_spec, put_local, simple_cluster


class _Logged(_Delegating):
    """Appends each PUT of a STOP marker and each listing of a round's journal to a file
    (the driver's and the tasks' processes alike)."""

    def __init__(self, inner: ObjectStore, log: str) -> None:
        super().__init__(inner)
        self.log = log

    def _say(self, what: list[str]) -> None:
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, (json.dumps(what) + "\n").encode())
        finally:
            os.close(fd)

    def put(self, key: str, data: bytes) -> None:
        super().put(key, data)
        if key.endswith("/" + STOP):
            self._say(["put", key, json.loads(data)["reason"]])

    def list_page(self, prefix: str, start_after: str | None = None, limit: int = 1000,
                  until: str | None = None) -> Any:
        if prefix.startswith("_cluster/gc/journal/") and prefix.count("/") == 4:
            self._say(["list", prefix, ""])
        return super().list_page(prefix, start_after, limit, until)


@dataclass(frozen=True)
class Logged:
    inner: StoreSpec
    log: str

    @property
    def kind(self) -> str:
        return self.inner.kind

    def __call__(self) -> ObjectStore:
        return _Logged(self.inner(), self.log)


@pytest.mark.spark
def test_a_completed_round_writes_stop_before_its_read_back(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100)
    keys = [format_key(p, 50, f"k{p}") for p in range(0, 200, 50)]
    for k in keys:
        put_local(root, k, age=13 * HOUR)
    log = str(tmp_path / "log")
    s = run_gc(spark, Logged(local_spec(root), log), GcOptions(tasks=1), clock=lambda: NOW)
    assert s.exit_code == 0 and s.deleted == len(keys), s
    seen = [json.loads(line) for line in Path(log).read_text().splitlines()]
    prefix = s.journal
    assert prefix is not None
    mine = [(what, reason) for what, key, reason in seen if key.startswith(prefix)]
    assert mine[:2] == [("put", "stage over"), ("list", "")], seen

    # An attempt of that stage still running, whose first ask gets no answer at all (UDP
    # filtered between its host and the driver's): it finds STOP and sends nothing.
    monkeypatch.setattr("epochgc.impl.gc.gate.ASK_TIMEOUT_S", 0.05)
    monkeypatch.setattr("epochgc.impl.gc.gate.ASK_TRIES", 2)
    late_key = format_key(7, 50, "late")
    put_local(root, late_key, age=13 * HOUR)
    store = LocalStore(root)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as mute:
        mute.bind(("127.0.0.1", 0))
        gate = GateTarget("127.0.0.1", mute.getsockname()[1], b"s" * 32)
        late = JournalWriter(store, JournalTarget(prefix, gate=gate), Attempt(0, 1, 0, 99))
        stats = delete_keys(store, [(late_key, 1, 13 * HOUR, "")], batch_size=1,
                            concurrency=1, journal=late)
    assert late_key in all_keys(store) and stats.stopped == 1, stats
