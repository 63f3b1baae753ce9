"""`epochgc chaos` end to end on real processes: every fault kind at least once, and every
loss and divergence count 0. About 90 s (70 s of nemesis; Spark starts meanwhile).
EPOCHGC_CHAOS_SECONDS makes it longer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from impl.chaos.cli import FIELDS
from impl.chaos.schedule import KINDS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_chaos_every_fault_kind_nothing_lost(tmp_path: Path) -> None:
    seconds = os.environ.get("EPOCHGC_CHAOS_SECONDS", "70")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run(
        [sys.executable, "-m", "impl.cli", "chaos", "--seconds", seconds, "--seed", "3",
         "--json", "--out", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=float(seconds) + 240,
    )
    history = (tmp_path / "history.txt").read_text()
    assert p.returncode == 0, p.stderr[-2000:] + history[-4000:]
    out = json.loads(p.stdout)
    assert list(out)[: len(FIELDS)] == list(FIELDS)
    assert out == json.loads((tmp_path / "result.json").read_text())
    for k in ("lost", "in_use_deleted", "trace_divergences", "raft_divergences"):
        assert out[k] == 0, history[-4000:]
    missing = [k for k in KINDS if out["faults"].get(k, 0) < 1]
    assert not missing, f"fault kinds never injected: {missing}"
    assert out["acked"] > 0 and out["leader_changes"] >= 1
    assert out["objects_deleted"] >= 1 and out["survived_disk_faults"] == 0
    assert "nemesis SIGKILL" in history and "node stopped after disk_fail" in history
