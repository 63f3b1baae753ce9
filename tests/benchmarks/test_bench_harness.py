"""`benchmarks/bench_harness.py` runs as `tox -e bench` runs it: against its default baseline.

The ninth session's rejection of Hypothesis's simplest program imported the measured tree's
`tests.conformance.rulechoice`, which the default baseline (7a0457b) does not have: every
run without `--baseline-ref` died in the baseline's worker, `tox -e bench` with it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "bench_harness.py"
sys.path.insert(0, str(BENCH.parent))
from bench_harness import BASELINE_REF, TARGET  # noqa: E402

sys.path.remove(str(BENCH.parent))


def _has_ref(ref: str) -> bool:
    return subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{ref}^{{commit}}"],
                          capture_output=True, check=False).returncode == 0


@pytest.mark.skipif(not _has_ref(BASELINE_REF),
                    reason=f"the baseline is git commit {BASELINE_REF}: not in this checkout")
@pytest.mark.parametrize("mode", [[], ["--concurrent"]], ids=["alternating", "concurrent"])
def test_quick_run_against_the_default_baseline(tmp_path: Path, mode: list[str]) -> None:
    out = tmp_path / "rows.json"
    proc = subprocess.run([sys.executable, str(BENCH), "--quick", *mode, "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    rows = {r["name"]: r for r in json.loads(out.read_text())}
    side = " (side by side: both workers at once)" if mode else ""
    main = rows[f"harness steps/s/core (deep config: Raft checks after every event){side}"]
    assert main["value"] > 0 and main["baseline"] > 0
    assert main["target"] == TARGET and main["better"] == "higher"
    assert all(r.get("better") in ("higher", "lower") for r in rows.values())
    # Both trees measured work: the same chunk seeds, their programs of full length.
    measured = rows["harness steps measured per configuration"]
    assert measured["value"] > 0 and measured["baseline"] > 0
