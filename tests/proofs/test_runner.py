"""The runner: a grid line per invariant with a mark per action, --only, the report's
scope and paths, readable counterexamples to induction."""

from __future__ import annotations

import json
from pathlib import Path

from model.system import ACTIONS
from model.variants import variant
from proofs import explain, obligations, runner, scenarios
from proofs.obligations import Outcome


def test_grid_marks_each_action_and_names_the_failure() -> None:
    acts = list(ACTIONS)
    rows = [Outcome(f"safety preserved by {a}", "invariant", "proved", paths=3) for a in acts]
    rows[2].status = "failed"
    rows += [Outcome(f"safety preserved by {a} (any size)", "invariant", "proved",
                     scope="any") for a in acts]
    lines = runner.grid(rows)
    one = next(ln for ln in lines if ln.strip().startswith("safety") and "paths" in ln)
    marks = one.split()[1]
    assert len(marks) == len(acts) and marks[2] in "✗X" and marks[0] in "✓+"
    assert f"{len(acts) - 1}/{len(acts)}" in one
    assert any(ln.startswith("\nany [reference]") for ln in lines)


def test_only_runs_the_matching_rows_and_the_report_has_scope_and_paths(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    code = runner.main(["--only", r"proofs\.contracts\.watermark \(all", "--jobs", "1",
                        "--report", str(report)])
    assert code == 0
    data = json.loads(report.read_text())
    assert [o["name"] for o in data["obligations"]] == [
        "contracts of proofs.contracts.watermark (all paths)"]
    assert {"scope", "paths", "name", "kind", "status", "seconds"} <= set(data["obligations"][0])


def test_counterexample_to_induction_names_the_conjunct_and_the_write() -> None:
    v = variant("fence-only")
    out = obligations.induction(scenarios.INDUCTION_TEMPLATE, v, ["land_write"])
    row = next(o for o in out if o.name == "floor preserved by land_write")
    text = explain.describe(row.name, row.trace, v)
    assert text.startswith("violated: floor, about write w0 (object o0, partition p0)"), text
    assert "writes[0].status" in text and "->" in text
