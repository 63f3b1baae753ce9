"""newuser16 S8: a node whose reconciler cannot write L1 objects (a full disk, a file-size
limit) holds GC back for good (no L1: LRO, M(p) and the cluster's M stay still) and said
it only at info, every round; `cluster status` exited 0. Now it is said at warning once it
fails `storefailing.ROUNDS` rounds in a row (again every REPEAT_S, and when it writes
again), and `cluster status` names the node and what fails, exit 1.

The node's test, on a real cluster, is in test_produce_large.py (its cluster shared: a
start costs ~4 s)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from epochgc.impl.broker import storefailing
from epochgc.impl.broker.storefailing import ROUNDS, StoreFailing
from epochgc.impl.cluster.cli import _stop_reason
from epochgc.impl.cluster.local import LocalCluster


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


def test_status_says_why_an_unreachable_node_stopped(tmp_path: Path) -> None:
    """newuser16 S12: `cluster status` said "node 2: unreachable" alone after node 2 had
    stopped on StorageFailed with a clear line in its log. Now that line is quoted (from
    the log's last lines only: an earlier run's stop is not this one's reason)."""
    lc = LocalCluster(tmp_path)
    (tmp_path / "n2.log").write_text(
        '{"level": "warning", "msg": "x"}\n'
        "stopping: Raft storage: storage failed: write failed: [Errno 27] File too large, "
        "in /d/g1001/0000000000000000.seg; the node must stop\n"
        '{"level": "warning", "msg": "transport did not close in 5 s; exiting anyway"}\n')
    assert _stop_reason(lc, 2) == (
        f" (its log {tmp_path / 'n2.log'} says: stopping: Raft storage: storage failed: "
        "write failed: [Errno 27] File too large, in /d/g1001/0000000000000000.seg; the "
        "node must stop)")
    (tmp_path / "n3.log").write_text("stopping: an old run's\n" + "serving\n" * 6)
    assert _stop_reason(lc, 3) == "" and _stop_reason(lc, 4) == ""
