"""The experiments on a tiny grid (seconds): the invariants that must hold whatever the
figures are."""

from __future__ import annotations

import pytest

from epochgc.experiments import gccost, windows


@pytest.fixture(scope="module")
def window_results() -> dict[str, windows.Result]:
    cells = windows.cells(windows.TINY)
    return {c.variant: windows.run_cell(c) for c in cells}


def test_windows_zero_safety_violations(window_results: dict[str, windows.Result]) -> None:
    for v, r in window_results.items():
        assert r.violations == [], (v, r.violations[:5])
        assert r.acked > 0 and r.changes > 0, (v, r)  # the run exercised something


def test_windows_reference_rejects_no_more_than_strict(
    window_results: dict[str, windows.Result],
) -> None:
    ref, strict = window_results["reference"], window_results["strict"]
    assert strict.stale > 0  # the grid makes strict reject: otherwise the comparison is empty
    assert ref.rejected_rate <= strict.rejected_rate
    assert ref.stall_mean <= strict.stall_mean
    assert ref.retries_per_ack <= strict.retries_per_ack


def test_windows_stalls_are_measured_per_change(
    window_results: dict[str, windows.Result],
) -> None:
    for r in window_results.values():
        assert len(r.stalls) == r.changes
        assert all(s >= 0.0 for s in r.stalls)


def test_windows_same_seed_same_result() -> None:
    c = windows.Cell("reference", 1.0, 0.2, 1.0, 9, 5.0, 2.0)
    a, b = windows.run_cell(c), windows.run_cell(c)
    assert (a.requests, a.acked, a.stale, a.retries, a.stalls) == (
        b.requests, b.acked, b.stale, b.retries, b.stalls)


def test_gc_retained_garbage_at_least_ideal() -> None:
    (cell,) = gccost.cells(gccost.TINY)
    r = gccost.run_cell(cell)
    assert r.violations == [], r.violations[:5]
    assert r.deleted > 0  # GC collected something: the run is not vacuous
    for t, n_actual, b_actual, n_ideal, b_ideal in r.series:
        assert n_actual >= n_ideal and b_actual >= b_ideal, t
    assert r.stored_bytes_mean >= r.live_bytes_mean
    assert r.retention_mean >= 0 and r.garbage_objects_mean >= 0


# -- the epoch barrier (issue 30) ------------------------------------------------------------


def test_barrier_collects_idle_partitions_garbage_sooner_and_safely() -> None:
    from epochgc.experiments import barrier

    off, on = (barrier.run_cell(barrier.Cell("idle", b, 1, 16.0)) for b in (False, True))
    assert off.violations == [] and on.violations == []
    assert off.objects > 0 and off.objects == on.objects  # the same workload
    assert on.barrier_epochs >= 1 and off.barrier_epochs == 0
    # the idle partitions block GC until the housekeeper (15 s); the barrier moves them
    assert on.first_deletion is not None and (off.first_deletion or 99.0) > on.first_deletion
    assert on.delay_mean is not None and off.delay_mean is not None
    assert on.delay_mean < off.delay_mean
    assert barrier.run_cell(barrier.Cell("idle", True, 1, 16.0)) == on  # deterministic
