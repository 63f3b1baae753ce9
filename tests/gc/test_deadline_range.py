"""`gc --deadline` beyond 100 years (newuser5 G1): the timer overflowed time_t in a thread
(an OverflowError traceback), the deadline was silently not armed and the round ran on,
exit 0. Now a usage error naming the option, before any work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import simple_cluster


@pytest.mark.parametrize("deadline", ["200000d", "99999999999999d"])
def test_a_deadline_beyond_a_century_is_a_usage_error(tmp_path: Path, deadline: str) -> None:
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100)
    r = subprocess.run(
        [sys.executable, "-c", "from epochgc.impl.entry import main; main()", "gc",
         "--store", str(root), "--grace", "0s", "--i-know-grace-is-short",
         "--deadline", deadline, "--dry-run"],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 64 and "--deadline" in r.stderr, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr and "listing" not in r.stderr + r.stdout, r.stderr


@pytest.mark.parametrize("grace", ["36501d", "99999999999999999999d"])
def test_a_grace_beyond_a_century_is_a_usage_error(tmp_path: Path, grace: str) -> None:
    """newuser9 (notes): `--grace 99999999999999999999d` was accepted and a round ran with
    nothing old enough; bounded as --deadline is, 64 naming the option before any work."""
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100)
    r = subprocess.run(
        [sys.executable, "-c", "from epochgc.impl.entry import main; main()", "gc",
         "--store", str(root), "--grace", grace, "--dry-run"],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 64 and "--grace" in r.stderr, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr and "listing" not in r.stderr + r.stdout, r.stderr
