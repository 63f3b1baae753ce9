"""Every seeded bug of every mutation table still has its anchor: each edit's `old` text occurs
exactly once in the file the edit names. A module cut in two moves text between files; an
anchor left naming the old file would only show when that mutation run is started (minutes
to hours later, outside the default suite). Reads the tables and the files; runs nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from epochgc.proofs import mutants as proof_mutants
from tests.chaos import mutants as chaos_mutants
from tests.conformance import mutants as conformance_mutants
from tests.raft import crashexplore, disklog_mutants

ROOT = Path(__file__).resolve().parents[1]


def _edits() -> Iterator[tuple[str, str, str, str]]:
    """(table, mutant, path, old) of every edit of every table."""
    for m in proof_mutants.MUTANTS:
        for path, old, _ in m.edits():
            yield "proofs/mutants.py", m.name, path, old
    for m in conformance_mutants.MUTANTS + conformance_mutants.SURVIVORS:
        for path, old, _ in m.edits():
            yield "tests/conformance/mutants.py", m.name, path, old
    for m, _count in chaos_mutants.MUTANTS:
        for path, old, _ in m.edits():
            yield "tests/chaos/mutants.py", m.name, path, old
    for d in disklog_mutants.MUTANTS:
        yield "tests/raft/disklog_mutants.py", d.name, d.path, d.old
        if d.old2:
            yield "tests/raft/disklog_mutants.py", d.name, d.path2 or d.path, d.old2
    cx = [*crashexplore.MUTANTS, *crashexplore.REMOVAL_MUTANTS, crashexplore.F1_READ_THROUGH_CACHE,
          crashexplore.F2_DESCRIPTOR_PER_BARRIER, crashexplore.F3_ZERO_TRAILER,
          crashexplore.F4_NO_MARKER]
    for c in cx:
        for path, old, _ in c.edits():
            yield "tests/raft/crashexplore.py", c.name, path, old


EDITS = list(_edits())


def test_the_tables_are_read() -> None:
    # (a table renamed or emptied would make every check below vacuous)
    tables = {t for t, *_ in EDITS}
    assert len(tables) == 5 and len(EDITS) > 150, (tables, len(EDITS))


@pytest.mark.parametrize("table", sorted({t for t, *_ in EDITS}))
def test_each_anchor_is_once_in_its_file(table: str) -> None:
    texts: dict[str, str] = {}
    wrong = []
    for t, name, path, old in EDITS:
        if t != table:
            continue
        f = ROOT / path
        if path not in texts:
            texts[path] = f.read_text(encoding="utf-8") if f.is_file() else ""
        n = texts[path].count(old)
        if n != 1:
            wrong.append(f"{name}: {n} matches in {path} for {old[:60]!r}")
    assert not wrong, "\n".join(wrong)
