"""Issue 41, newuser4 F5: one number format per line ("listed 8,000 keys, 8,000 eligible,
8000 deleted"), and no ETA once a stage is done (the last progress line of a round that
had deleted all 8,000 keys said "ETA 16s"). The clock is injected: no sleeps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.gc.progress import StageProgress, eta_text
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key
from tests.gc.helpers import HOUR, NOW, local_spec, put_local, simple_cluster

GRACE = 12 * HOUR


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_no_eta_once_every_task_is_done() -> None:
    """Old code: `eta_text((8, 8), 5.0)` was "ETA 0s (by tasks)"."""
    assert eta_text((8, 8), 5.0) is None and eta_text((7, 8), 7.0) == "ETA 1s (by tasks)"


def test_a_stage_that_ended_says_so_without_an_eta() -> None:
    """Old code: the last line of a stage was its last periodic one, up to 10 s old, with
    the ETA of then ("1/4 tasks done, ETA 30s" for a stage that had finished)."""
    clock = _Clock()
    p = StageProgress(None, "gc: listing and deleting", None, deletes=True, clock=clock)
    p._t0 = clock.t
    assert p.last_line() is None  # no line written: nothing to close
    clock.t += 10
    assert p.poll((1, 4)) == "gc: listing and deleting: 1/4 tasks done, ETA 30s (by tasks)"
    clock.t += 2
    assert p.last_line() == "gc: listing and deleting: 4/4 tasks done"


def make_store(root: Path, n: int) -> set[str]:
    simple_cluster(LocalStore(root, create=True), 100)
    eligible = {format_key(p, 50, f"obj-{i}") for p in (0, 1, 500, 999)
                for i in range(n // 4)}
    for key in eligible:
        put_local(root, key, age=GRACE + 5)
    return eligible


@pytest.mark.spark
def test_the_rounds_count_line_has_one_number_format(spark: Any, tmp_path: Path) -> None:
    """Old code: "gc: listed 1,0xx keys, 1,000 eligible, 1000 deleted (journal ...)"."""
    eligible = make_store(tmp_path, 1000)
    lines: list[str] = []
    s = run_gc(spark, local_spec(tmp_path), GcOptions(grace_s=GRACE, tasks=2),
               clock=lambda: NOW, say=lines.append)
    assert s.deleted == len(eligible) == 1000
    line = next(ln for ln in lines if ln.startswith("gc: listed "))
    assert ", 1,000 eligible, 1,000 deleted (journal " in line, line
