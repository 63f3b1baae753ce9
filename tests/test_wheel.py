"""The wheel as a user installs it (.ci/wheel-smoke): built from this checkout, installed
with each extra set into a clean virtualenv, and run from outside the checkout: `--help`
of every command, a shipped vector replayed, `conform` against the model port, and a
dry-run GC round on a small local store. A wheel once checked 0 vectors and passed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_wheel_installs_and_runs_alone() -> None:
    p = subprocess.run(["bash", str(ROOT / ".ci" / "wheel-smoke")], cwd=ROOT,
                       capture_output=True, text=True, timeout=1800, check=False)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "wheel smoke: passed" in p.stdout
