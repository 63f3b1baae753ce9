"""Every benchmark row says which way is better and, with a target, whether the target
bounds the ratio or the value (a row with both a ratio and an absolute target was
ambiguous: issue 26)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run_all():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("run_all", ROOT / "benchmarks" / "run_all.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_target_without_what_it_bounds_is_refused() -> None:
    problems = _run_all().row_problems
    ok = {"name": "a", "ratio": 1.2, "target": 0.8, "target_of": "ratio", "better": "higher"}
    assert problems([ok, {**ok, "target": None, "target_of": None}]) == []
    assert "target_of" in problems([{**ok, "target_of": None}])[0]
    assert "better" in problems([{**ok, "better": None}])[0]


def test_the_row_helpers_say_what_their_target_bounds() -> None:
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_gc
        import bench_raft
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert bench_raft.row("r", 2.0, "x", 1.0, 1.5)["target_of"] == "ratio"
    assert bench_raft.row("r", 2.0, "x", None, 10.0, higher=False)["target_of"] == "value"
    assert bench_gc.row("g", 2.0, "x", 1.0, 0.8)["target_of"] == "ratio"
    assert bench_gc.row("g", 2.0, "x", None, None)["target_of"] is None


def test_a_one_command_benchmarks_row_says_what_its_target_bounds() -> None:
    """s29a: bench_local_listing's linearity row had a target and no target_of, so
    `run_all.py` exited 1; `rowfile.row` refuses such a row where it is made."""
    import sys

    import pytest

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import rowfile
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    with pytest.raises(ValueError, match="target_of"):
        rowfile.row("r", 1.2, "x", "lower", target=1.5)
    made = rowfile.row("r", 1.2, "x", "lower", target=1.5, target_of="value")
    assert _run_all().row_problems([made]) == []
    assert rowfile.row("r", 1.2, "x", "lower")["target_of"] is None
