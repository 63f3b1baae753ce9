"""F1-F6: the solver finds each production bug under its variant and nothing under
`reference`; the found traces replay as vectors."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from epochgc.model.replay import run
from epochgc.model.variants import REFERENCE, variant
from epochgc.proofs import bmc, scenarios, vectors
from epochgc.proofs.runner import task_bug, task_liveness


@pytest.mark.parametrize("index", range(len(scenarios.BUGS)), ids=[b.name for b in scenarios.BUGS])
def test_bug_found_under_variant_and_absent_under_reference(index: int, tmp_path: Path) -> None:
    out = task_bug(index)
    assert [o.status for o in out] == ["found", "proved"], [o.detail for o in out]
    b = scenarios.BUGS[index]
    f = tmp_path / out[0].trace["file"]
    f.write_text(out[0].trace["jsonl"])
    lines: list[str] = []
    assert run(str(f), None, lines.append, lines.append) == 0  # reproduces under its variant
    assert run(str(f), "reference", lines.append, lines.append) == 1  # reference differs
    assert b.variant in f.name


@pytest.mark.parametrize("index", range(len(scenarios.LIVENESS)))
def test_liveness_witness(index: int) -> None:
    (o,) = task_liveness(index)
    assert o.status == "found", o.detail


def test_trace_table_is_readable() -> None:
    b = scenarios.BUGS[0]
    v = variant(b.variant)
    tr = bmc.search(scenarios.TRACE_TEMPLATE, v, b.schedule, b.goal(v))
    assert tr is not None
    table = bmc.table(tr)
    assert "gc_delete" in table and "deleted" in table and "accepted" in table


def test_reference_schedule_has_no_violation() -> None:
    for b in scenarios.BUGS:
        assert bmc.search(scenarios.TRACE_TEMPLATE, REFERENCE, b.schedule,
                          b.goal(REFERENCE)) is None, b.name


def test_shipped_generated_vectors_match_a_fresh_run() -> None:
    shipped = Path(__file__).parents[2] / "spec" / "vectors" / "generated"
    for i, b in enumerate(scenarios.BUGS):
        (found, _) = task_bug(i)
        path = shipped / found.trace["file"]
        assert path.read_text() == found.trace["jsonl"], f"regenerate: tox -e vectors ({b.name})"
    assert vectors  # the module the runner writes them with


def test_a_shape_whose_final_deletion_is_never_enabled_is_vacuous(monkeypatch: Any) -> None:
    """Issue 28: F1's shape without the deletable object o1 (as it was) never lets the
    final gc_delete delete in reference, so "cannot break safety" held vacuously."""
    b = scenarios.BUGS[0]
    _, ref_now = task_bug(0)
    assert ref_now.status == "proved" and "deletes an object" in ref_now.detail
    old = [st for st in b.schedule if st not in scenarios.DELETABLE]
    monkeypatch.setattr(scenarios, "BUGS", (replace(b, schedule=old),))
    found, ref = task_bug(0)
    assert found.status == "found"
    assert ref.status == "failed" and ref.detail.startswith("vacuous: the final gc_delete")
