"""`LocalCluster.kill` forgets a node's pid only once the node is known gone (s25d, seen
and left: it removed the pid from cluster.json before signalling, so a Ctrl-C of
`cluster stop` in between left a running node that no later `stop` knew of)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from epochgc.impl.cluster.local import LocalCluster


def test_a_kill_cut_short_leaves_the_node_in_the_cluster_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lc = LocalCluster(tmp_path / "c")
    lc.init(1, str(tmp_path / "store"), ["t/0"], 1.0)
    lc.meta["pids"]["1"] = 4_000_000  # above pid_max's ceiling (2^22): no such process
    lc.save()

    def interrupted(*_: object) -> bool:
        raise KeyboardInterrupt  # Ctrl-C as the node is looked at, before it is signalled

    monkeypatch.setattr(LocalCluster, "is_node", interrupted)
    with pytest.raises(KeyboardInterrupt):
        lc.kill(1, signal.SIGTERM)
    assert json.loads((tmp_path / "c" / "cluster.json").read_text())["pids"] == {"1": 4_000_000}


def test_a_kill_that_ends_forgets_the_node(tmp_path: Path) -> None:
    lc = LocalCluster(tmp_path / "c")
    lc.init(1, str(tmp_path / "store"), ["t/0"], 1.0)
    lc.meta["pids"]["1"] = 4_000_000
    lc.save()
    ended = lc.kill(1, signal.SIGTERM)
    assert (ended.pid, ended.how) == (4_000_000, "not running")
    assert json.loads((tmp_path / "c" / "cluster.json").read_text())["pids"] == {}
