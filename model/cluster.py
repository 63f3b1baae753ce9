"""The cluster-wide safe epoch M (spec R15-R19)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from epochgc.model.errors import ModelError, require_int, require_opt_int
from epochgc.model.variants import REFERENCE, Variant


@dataclass(frozen=True)
class Report:
    """One replica's health report for one partition: its M(p), or None if it has none."""

    partition: str
    replica: str
    inactive_epoch: int | None


@dataclass(frozen=True)
class GcEpoch:
    """`M` is the inclusive safe epoch, None when nothing is collectible; `blocked` names
    the partitions that stopped the round (then M is None)."""

    M: int | None
    blocked: str | None


def _validate(snapshot_revision: int, partitions: Sequence[str], reports: Sequence[Report]) -> None:
    require_int("gc_epoch", "snapshot_revision", snapshot_revision)
    for i, pid in enumerate(partitions):
        if not isinstance(pid, str) or not pid:
            raise ModelError(
                "gc_epoch", f"partitions[{i}]", f"must be a non-empty string, got {pid!r}"
            )
    if len(set(partitions)) != len(partitions):
        raise ModelError("gc_epoch", "partitions", "snapshot lists a partition twice")
    seen: set[tuple[str, str]] = set()
    for i, r in enumerate(reports):
        where = f"gc_epoch reports[{i}]"
        if not isinstance(r.partition, str) or not r.partition:
            raise ModelError(where, "partition", f"must be a non-empty string, got {r.partition!r}")
        if not isinstance(r.replica, str) or not r.replica:
            raise ModelError(where, "replica", f"must be a non-empty string, got {r.replica!r}")
        require_opt_int(where, "inactive_epoch", r.inactive_epoch, minimum=-1)
        if (r.partition, r.replica) in seen:
            raise ModelError(
                where, "replica", f"{r.replica!r} reported {r.partition!r} twice in one round"
            )
        seen.add((r.partition, r.replica))


def partition_epochs(
    partitions: Sequence[str], reports: Iterable[Report]
) -> dict[str, int | None]:
    """Per snapshot partition, the max over its replicas that reported a value (R16)."""
    best: dict[str, int | None] = {p: None for p in partitions}
    for r in reports:
        if r.partition not in best or r.inactive_epoch is None:
            continue  # not in the snapshot, or nothing to say
        old = best[r.partition]
        best[r.partition] = r.inactive_epoch if old is None else max(old, r.inactive_epoch)
    return best


def gc_epoch(
    snapshot_revision: int,
    partitions: Sequence[str],
    reports: Iterable[Report],
    variant: Variant = REFERENCE,
) -> GcEpoch:
    """M = min(snapshot revision, min over partitions of max over replicas) (R15-R19).

    A snapshot partition with no reported value blocks the round (F4); an empty snapshot
    at revision R gives M = R (R19, changed: every later partition's creation revision,
    hence every epoch it accepts, is above R; variant `empty-is-nothing` is the old rule).
    Refuses malformed input (negative revision, duplicate
    partitions or replica reports, epochs below -1).

    raises: ModelError
    post: __return__.blocked is None or __return__.M is None
    post: __return__.M is None or not variant.cap_at_revision or __return__.M <= snapshot_revision
    """
    reports = list(reports)
    _validate(snapshot_revision, partitions, reports)
    return gc_epoch_of_valid(snapshot_revision, partitions, reports, variant)


def gc_epoch_of_valid(
    snapshot_revision: int,
    partitions: Sequence[str],
    reports: Iterable[Report],
    variant: Variant = REFERENCE,
) -> GcEpoch:
    """`gc_epoch` for input already known to be well formed (the system model's own)."""
    if not partitions and not variant.empty_is_nothing:
        # R19 (changed): nothing can still need an epoch <= R. The old "nothing
        # collectible" stranded every object of deleted partitions forever.
        return GcEpoch(snapshot_revision, None)
    best = partition_epochs(partitions, reports)
    missing = [p for p in partitions if best[p] is None]
    if missing and not variant.skip_missing:
        return GcEpoch(None, "no inactive epoch reported for: " + ", ".join(missing))
    values = [v for v in best.values() if v is not None]
    if not values:
        return GcEpoch(None, None)
    m = min(values)
    if variant.cap_at_revision:
        m = min(m, snapshot_revision)
    return GcEpoch(m, None)
