"""Unit tests of the cluster GC epoch (spec R15-R19)."""

from __future__ import annotations

import pytest

from epochgc.model.cluster import GcEpoch, Report, gc_epoch, partition_epochs
from epochgc.model.errors import ModelError
from epochgc.model.variants import variant


def R(p: str, r: str, e: int | None) -> Report:
    return Report(p, r, e)


def test_max_over_replicas_min_over_partitions() -> None:
    reps = [R("a", "r0", 3), R("a", "r1", 8), R("b", "r0", 9), R("b", "r1", None)]
    assert partition_epochs(["a", "b"], reps) == {"a": 8, "b": 9}
    assert gc_epoch(100, ["a", "b"], reps) == GcEpoch(8, None)


def test_missing_partition_blocks_and_is_named() -> None:
    g = gc_epoch(100, ["a", "late"], [R("a", "r0", 3)])
    assert g.M is None and g.blocked is not None and "late" in g.blocked


def test_all_null_reports_block() -> None:
    g = gc_epoch(100, ["a"], [R("a", "r0", None)])
    assert g.M is None and g.blocked is not None and "a" in g.blocked


def test_empty_snapshot_gives_its_revision() -> None:
    """R19 (changed): an empty snapshot at revision R gives M = R; a deleted partition's
    leftover report is ignored. The old rule stranded deleted topics' objects forever."""
    assert gc_epoch(100, [], [R("x", "r0", 5)]) == GcEpoch(100, None)
    assert gc_epoch(0, [], []) == GcEpoch(0, None)


def test_empty_is_nothing_variant_is_the_old_rule() -> None:
    old = variant("empty-is-nothing")
    assert gc_epoch(100, [], [R("x", "r0", 5)], old) == GcEpoch(None, None)
    assert gc_epoch(100, ["a"], [R("a", "r0", 9)], old) == GcEpoch(9, None)


def test_capped_at_snapshot_revision() -> None:
    assert gc_epoch(6, ["a"], [R("a", "r0", 50)]).M == 6


def test_reports_outside_snapshot_are_ignored() -> None:
    assert gc_epoch(100, ["a"], [R("a", "r0", 9), R("new", "r0", 1)]).M == 9


@pytest.mark.parametrize(
    ("rev", "parts", "reps", "field"),
    [
        (-1, ["a"], [], "snapshot_revision"),
        (True, ["a"], [], "snapshot_revision"),
        (1, ["a", "a"], [], "partitions"),
        (1, ["a"], [R("a", "r0", -2)], "inactive_epoch"),
        (1, ["a"], [R("a", "r0", 1), R("a", "r0", 2)], "replica"),
        (1, ["a"], [R("", "r0", 1)], "partition"),
    ],
)
def test_bad_input_names_the_field(
    rev: int, parts: list[str], reps: list[Report], field: str
) -> None:
    with pytest.raises(ModelError) as e:
        gc_epoch(rev, parts, reps)
    assert e.value.field == field
