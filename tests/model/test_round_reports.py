"""`round_epoch` reads only the reports that can change a round (the snapshot's values,
`model.actions._counted_reports`): its M and blocked must be those of `gc_epoch_of_valid`
over every report in the store (`reports_of`), on every combination of report states
(absent, null, a value) and snapshot membership of small clusters."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from epochgc.model.actions import partition_id, reports_of, round_epoch, step
from epochgc.model.cluster import Report, gc_epoch_of_valid
from epochgc.model.system import System, initial
from epochgc.model.variants import VARIANTS, variant

# A replica's report: absent, null, or one of two values (equal values and different ones).
REPORTS = ((None, False), (None, True), (3, False), (5, False))


def _store_round(s: System, v_name: str, foreign: tuple[int | None, ...], fresh: bool):
    """The round as it was defined before: over every report in the store."""
    v = variant(v_name)
    parts = [partition_id(p) for p, q in enumerate(s.partitions) if q.in_snapshot]
    reps = reports_of(s, fresh, v)
    for i, value in enumerate(foreign):
        parts.append(f"x{i}")
        reps.append(Report(f"x{i}", "r0", value))
    return gc_epoch_of_valid(s.snapshot_revision, parts, reps, v)


def _base(n_parts: int, n_reps: int, written: int) -> System:
    """Every partition created; the first `written` have a window (M(p) = 1), the others
    none (a fresh report of theirs is null)."""
    s = initial(n_parts, n_reps, [(0, p) for p in range(n_parts)], 1)
    for p in range(n_parts):
        s = step(s, variant("reference"), "create_partition", p=p)
    s = step(s, variant("reference"), "mint")
    for p in range(written):
        s = step(s, variant("reference"), "other_write", p=p, epoch=n_parts + 1)
    return s


@pytest.mark.parametrize("v_name", sorted(VARIANTS))
@pytest.mark.parametrize("shape", [(1, 2, 1), (2, 2, 2), (2, 2, 1), (3, 1, 2)])
def test_round_epoch_is_the_round_over_every_report(v_name: str,
                                                    shape: tuple[int, int, int]) -> None:
    n_parts, n_reps, written = shape
    base = _base(n_parts, n_reps, written)
    n = 0
    for snap in itertools.product((False, True), repeat=n_parts):
        for reps in itertools.product(REPORTS, repeat=n_parts * n_reps):
            parts = []
            for p, part in enumerate(base.partitions):
                rs = tuple(replace(part.replicas[r], reported=reps[p * n_reps + r][0],
                                   reported_null=reps[p * n_reps + r][1])
                           for r in range(n_reps))
                parts.append(replace(part, in_snapshot=snap[p], replicas=rs))
            s = replace(base, partitions=tuple(parts), snapshot_revision=4)
            for foreign in ((), (None,), (1,), (7,)):
                for fresh in (False, True):
                    got = round_epoch(s, variant(v_name), foreign, fresh)
                    assert got == _store_round(s, v_name, foreign, fresh), (s, foreign, fresh)
                    n += 1
    assert n > 0
