"""`tox -e prove-mutants`: every seeded model bug still applies to today's model (the
mutation run itself is `python -m epochgc.proofs.mutants`, too slow for the default run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochgc.proofs.mutants import MUTANTS, ROOT, killing_rows, patch


@pytest.mark.parametrize("m", MUTANTS, ids=[m.name for m in MUTANTS])
def test_every_mutant_patch_applies_once(m, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for path, _old, _new in m.edits():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text((ROOT / path).read_text())
    patch(tmp_path, m)
    for path, _, new in m.edits():
        assert new in (tmp_path / path).read_text() or not new


def test_at_least_the_issue_list() -> None:
    assert len({m.name for m in MUTANTS}) == len(MUTANTS) >= 10


def test_only_safety_transition_or_vacuity_rows_kill() -> None:
    rows = [{"name": "gc_delete is reachable", "kind": "witness", "status": "failed"},
            {"name": "contracts of x", "kind": "crosshair", "status": "failed"}]
    assert killing_rows(rows) == []
    rows.append({"name": "safety preserved by x", "kind": "invariant", "status": "failed"})
    assert len(killing_rows(rows)) == 1
    # issue 28: a correspondence row is a proof over every state of its shape
    rows.append({"name": "python = formula: x", "kind": "correspondence", "status": "failed"})
    assert len(killing_rows(rows)) == 2
