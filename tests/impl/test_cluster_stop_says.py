"""`cluster stop` says what it stopped, as `cluster kill` does (newuser13 Q7: it said
nothing, also when nothing was running)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.cluster.local import LocalCluster


def test_a_stop_with_nothing_running_says_so(tmp_path: Path) -> None:
    lc = LocalCluster(tmp_path / "c")
    lc.init(2, str(tmp_path / "store"), ["t/0"], 1.0)
    lc.meta["pids"]["1"] = 4_000_000  # above pid_max's ceiling (2^22): no such process
    lc.save()
    r = CliRunner().invoke(main, ["cluster", "stop", "--data-dir", str(lc.dir)])
    assert r.exit_code == 0, r.output
    assert r.stdout == "no node was running: nothing stopped\n", r.output
