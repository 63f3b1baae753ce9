"""newuser16 S8: a node whose reconciler cannot write L1 objects (a full disk, a file-size
limit) holds GC back for good (no L1: LRO, M(p) and the cluster's M stay still) and said
it only at info, every round; `cluster status` exited 0. Now it is said at warning once it
fails `storefailing.ROUNDS` rounds in a row (again every REPEAT_S, and when it writes
again), and `cluster status` names the node and what fails, exit 1.

The node's test, on a real cluster, is in test_produce_large.py (its cluster shared: a
start costs ~4 s)."""

from __future__ import annotations

import logging

import pytest

from epochgc.impl.broker import storefailing
from epochgc.impl.broker.storefailing import ROUNDS, StoreFailing


def test_a_streak_is_said_at_warning_once_then_on_recovery(
        caplog: pytest.LogCaptureFixture) -> None:
    mono = [0.0]
    f = StoreFailing(wall=lambda: 1000.0, mono=lambda: mono[0])
    with caplog.at_level(logging.INFO, logger=storefailing.log.name):
        for _ in range(ROUNDS + 5):
            f.failed("_reconcile_tick", "cannot write 'level_one/x': File too large")
            mono[0] += 0.5
        assert f.failing()["_reconcile_tick"]["rounds"] == ROUNDS + 5
        mono[0] += storefailing.REPEAT_S
        f.failed("_reconcile_tick", "cannot write 'level_one/x': File too large")
        f.ok("_reconcile_tick")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["object store failing: L1 objects (reconciling; GC cannot advance "
                        "until it writes) cannot be written"] * 2 + ["object store writes again"]
    assert f.failing() == {}
