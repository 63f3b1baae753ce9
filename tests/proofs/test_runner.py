"""The runner: a grid line per invariant with a mark per action, --only, the report's
scope and paths, readable counterexamples to induction."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from epochgc.model.actions import ACTIONS
from epochgc.model.variants import variant
from epochgc.proofs import explain, obligations, runner, scenarios
from epochgc.proofs.obligations import Outcome


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
        "contracts of epochgc.proofs.contracts.watermark (all paths)"]
    assert {"scope", "paths", "name", "kind", "status", "seconds"} <= set(data["obligations"][0])


def test_counterexample_to_induction_names_the_conjunct_and_the_write() -> None:
    v = variant("fence-only")
    out = obligations.induction(scenarios.INDUCTION_TEMPLATE, v, ["land_write"])
    row = next(o for o in out if o.name == "floor preserved by land_write")
    text = explain.describe(row.name, row.trace, v)
    assert text.startswith("violated: floor, about write w0 (object o0, partition p0)"), text
    assert "writes[0].status" in text and "->" in text


def test_tasks_run_longest_first_from_the_last_report(tmp_path: Path) -> None:
    """The pool starts CrossHair, then the induction tasks by their last cost; every task
    is still there, and a missing or broken report only loses the hint."""
    report = tmp_path / "r.json"
    rows = [{"name": "[strict] safety preserved by upload", "seconds": 5.0},
            {"name": "Inv satisfiable and mint enabled", "seconds": 9.0},
            {"name": "safety preserved by housekeep", "seconds": 1.0}]
    report.write_text(json.dumps({"obligations": rows}))
    costs = runner._last_costs(str(report))
    assert costs["mint"] == 9.0 and costs["upload"] == 5.0 and costs["housekeep"] == 1.0
    tasks = runner._tasks(quick=True)
    ordered = runner._longest_first(tasks, costs)
    assert sorted(t[2] for t in ordered) == sorted(t[2] for t in tasks)
    n_ch = sum(t[0] is runner.task_crosshair for t in tasks)
    assert all(t[0] is runner.task_crosshair for t in ordered[:n_ch])
    firsts = [t[1][0] for t in ordered if t[0] is runner.task_induction_shared][:3]
    assert firsts == ["mint", "upload", "housekeep"]
    assert runner._last_costs(str(tmp_path / "missing.json")) == {}
    report.write_text("{not json")
    assert runner._last_costs(str(report)) == {}


def test_a_fresh_clone_runs_longest_first_from_the_hints() -> None:
    """No report (a fresh clone, CI): CrossHair longest first, then the correspondence
    shapes (most of the run since the induction's lazy replicas), largest first, and the
    longest other tasks before the short ones; every hint names a task that exists (a
    renamed task would silently lose its place); a hint may name a task function, for all
    of its tasks (one per correspondence shape)."""
    tasks = runner._tasks(quick=False)
    keys = {runner.hint_key(t) for t in tasks} | {t[0].__name__ for t in tasks}
    assert set(runner.HINT_S) <= keys, set(runner.HINT_S) - keys
    ordered = runner._longest_first(tasks, {})
    assert sorted(t[2] for t in ordered) == sorted(t[2] for t in tasks)
    names = [runner.hint_key(t) for t in ordered]
    assert names[0] == "task_crosshair"  # every CrossHair target, one process
    assert set(names[1:3]) == {"task_keys", "task_model_edges"}  # short, kill mutants
    shapes = [t[1][0] for t in ordered if t[0].__name__ == "task_exhaustive_shape"]
    assert all(n.startswith("task_exhaustive_shape ") for n in names[3:3 + len(shapes)])
    assert shapes[0] == "3p2r:012"  # the largest shape first
    assert names.index("task_bug 0") < names.index("task_induction_shared housekeep")
    assert names.index("task_contracts epochgc.model.fence.fence") < names.index("task_bug 1")
    hints = [runner.hint_of(t) for t in ordered[3:]]
    assert hints == sorted(hints, reverse=True)


# -- issue 28 item 8: a failing any-size row, the report of every run ----------------------


def _gc_delete_past_m(L: Any, s: Any, prm: dict[str, Any]) -> Any:
    """spec.gc_delete with its epoch check one too high (a seeded bug)."""
    from epochgc.model.system import DELETED, STORED
    from epochgc.proofs.param import spec

    o0 = prm["o"]
    guard = L.And(s.gc_set(), s.ostatus(o0) == STORED, s.oepoch(o0) <= s.gc_m() + 1)
    return guard, s.with_(ostatus=spec._at(L, o0, lambda: DELETED, s.ostatus))


def test_a_failing_any_size_row_prints_its_finite_model() -> None:
    """The runner used to crash here (`explain.describe` got the finite model's dicts:
    AttributeError: 'dict' object has no attribute 'writes')."""
    from epochgc.proofs.param import prove, spec

    acts = dict(spec.ACTIONS)
    acts["gc_delete"] = (*acts["gc_delete"][:2], _gc_delete_past_m)
    rows = prove.prove_action("gc_delete", actions=acts)
    row = next(o for o in rows if o.name == "safety preserved by gc_delete (any size)")
    assert row.status == "failed"
    text = runner.failure_text(row)
    assert "violated: a live write's object is not deleted for w0" in text, text
    assert "ostatus(o0): stored -> deleted" in text, text


def task_failing() -> list[Outcome]:
    return [Outcome("safety preserved by mint (any size)", "invariant", "failed",
                    scope="any", detail="seeded")]


def task_crashing() -> list[Outcome]:
    from epochgc.model.errors import ModelError

    raise ModelError("somewhere", "field", "seeded crash")


def _old_green(report: Path) -> None:
    report.write_text(json.dumps({"run_id": "old", "status": "passed", "obligations": [
        {"name": "x", "kind": "invariant", "status": "proved"}]}))


def test_a_failing_run_replaces_a_green_report(tmp_path: Path, monkeypatch: Any) -> None:
    report = tmp_path / "r.json"
    _old_green(report)
    monkeypatch.setattr(runner, "_tasks", lambda quick: [(task_failing, (), "failing")])
    code = runner.main(["--jobs", "1", "--report", str(report), "--run-id", "mine"])
    data = json.loads(report.read_text())
    assert code == 1 and data["run_id"] == "mine" and data["status"] == "failed"
    assert [o["status"] for o in data["obligations"]] == ["failed"]
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temp file left


def test_a_crashing_task_is_a_failed_row(tmp_path: Path, monkeypatch: Any) -> None:
    """A task that raises (here a ModelError, which did not even pickle back and broke the
    pool: BrokenProcessPool) fails the run with a `crash` row naming it."""
    report = tmp_path / "r.json"
    _old_green(report)
    monkeypatch.setattr(runner, "_tasks", lambda quick: [(task_crashing, (), "crashing")])
    code = runner.main(["--jobs", "1", "--report", str(report), "--run-id", "mine"])
    data = json.loads(report.read_text())
    assert code == 1 and data["run_id"] == "mine" and data["status"] == "failed"
    (row,) = data["obligations"]
    assert row["kind"] == "crash" and "crashing: the task crashed: ModelError" in row["name"]


def test_a_crashing_run_leaves_no_green_report(tmp_path: Path, monkeypatch: Any) -> None:
    report = tmp_path / "r.json"
    _old_green(report)
    monkeypatch.setattr(runner, "_tasks", lambda quick: [(task_failing, (), "failing")])

    def broken(results: Any) -> list[str]:
        raise RuntimeError("seeded crash")

    monkeypatch.setattr(runner, "grid", broken)
    with pytest.raises(RuntimeError, match="seeded crash"):
        runner.main(["--jobs", "1", "--report", str(report), "--run-id", "mine"])
    data = json.loads(report.read_text())
    assert data["run_id"] == "mine" and data["status"].startswith("crashed: RuntimeError")


def test_mutants_read_only_the_run_they_started(tmp_path: Path) -> None:
    from epochgc.proofs import mutants

    report = tmp_path / "r.json"
    _old_green(report)
    assert mutants.own_rows(report, "mine") == []  # an older file: not this run's rows
    report.write_text(json.dumps({"run_id": "mine", "status": "running", "obligations": []}))
    assert mutants.own_rows(report, "mine") == []
    rows = [{"name": "x", "kind": "invariant", "status": "failed"}]
    report.write_text(json.dumps({"run_id": "mine", "status": "failed", "obligations": rows}))
    assert mutants.own_rows(report, "mine") == rows
    assert mutants.own_rows(tmp_path / "missing.json", "mine") == []


def test_every_worker_runs_with_the_tuned_solver() -> None:
    """`_configure` is the pool's initializer: each worker's Z3 gets `symsolver.Z3_TUNING` (the
    settings the proof-time figures were measured with; verdicts do not depend on them)."""
    import z3

    from epochgc.proofs import symsolver

    before = {k: z3.get_param(k) for k in symsolver.Z3_TUNING}
    try:
        runner._configure(0, symsolver.RLIMIT)
        assert z3.get_param("smt.arith.solver") == "2"
        assert z3.get_param("model.compact") == "false"
    finally:
        for k, v in before.items():
            z3.set_param(k, v)
