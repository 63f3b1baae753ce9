"""The proof runner's row statuses (issue 42): what makes `tox -e prove` red must make it
red. A runner that reads `unknown` as proved, reports a vacuous "cannot break safety" row
as proved, drops a matching task's vacuity rows under --only or passes a crashed task
would turn every proof green; each fails here when it does. Their seeded bugs are in
tests/conformance/mutants.py (class `[proofs]`)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from epochgc.proofs import runner, scenarios
from epochgc.proofs.obligations import Outcome


def task_unknown() -> list[Outcome]:
    return [Outcome("safety preserved by mint", "invariant", "proved"),
            Outcome("floor preserved by mint", "invariant", "unknown",
                    detail="the solver said unknown (seeded)")]


def task_vacuous() -> list[Outcome]:
    """A task whose induction rows pass and whose vacuity row fails (its row names do not
    match an --only pattern over induction rows; the task's label does)."""
    return [Outcome("safety preserved by mint", "invariant", "proved"),
            Outcome("Inv satisfiable and mint enabled", "vacuity", "failed",
                    detail="mint never enabled under the invariants (seeded)")]


def _run(tmp_path: Path, monkeypatch: Any, task: Any, label: str,
         *extra: str) -> tuple[int, dict[str, Any]]:
    report = tmp_path / "r.json"
    monkeypatch.setattr(runner, "_tasks", lambda quick: [(task, (), label)])
    code = runner.main(["--jobs", "1", "--report", str(report), *extra])
    return code, json.loads(report.read_text())


def test_an_unknown_row_fails_the_run(tmp_path: Path, monkeypatch: Any) -> None:
    code, data = _run(tmp_path, monkeypatch, task_unknown, "mint")
    assert code == 1 and data["status"] == "failed", data
    assert [o["status"] for o in data["obligations"]] == ["proved", "unknown"]


def test_only_keeps_the_matching_tasks_vacuity_rows(tmp_path: Path, monkeypatch: Any) -> None:
    """`--only 'preserved by mint'` runs the mint task; its vacuity row (which the pattern
    does not match) is kept, and its failure fails the run."""
    code, data = _run(tmp_path, monkeypatch, task_vacuous, "induction of mint",
                      "--only", "preserved by mint|induction of mint")
    kinds = [o["kind"] for o in data["obligations"]]
    assert code == 1 and data["status"] == "failed" and "vacuity" in kinds, data


def test_a_reference_row_whose_deletion_is_never_enabled_is_vacuous_not_proved() -> None:
    """A "cannot break safety in reference" row is only worth something if the shape's
    final gc_delete can delete in reference: along a schedule with no object at all it
    never can, and the row must fail as vacuous (a real bounded search, not a stub)."""
    b = scenarios.BugScenario(
        "vacuous", "reference", "nothing to delete", [("create_partition", {"p": 0}),
                                                      *scenarios._gc_tail()], "safety")
    row = runner._with_deletion("vacuous shape cannot break safety in reference", b,
                                time.perf_counter())
    assert row.status == "failed" and "vacuous" in row.detail, row
    # and the other way: a shape that says it never deletes, but does, fails too
    f1 = scenarios.BUGS[0]
    claims_none = scenarios.BugScenario(f1.name, f1.variant, f1.title, f1.schedule,
                                        f1.invariant, reference_deletes=False,
                                        why_no_deletion="(seeded claim)")
    row = runner._with_deletion("F1 shape cannot break safety in reference", claims_none,
                                time.perf_counter())
    assert row.status == "failed" and "deletes here after all" in row.detail, row
