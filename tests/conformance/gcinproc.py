"""One GC round in process with the functions the PySpark job's tasks and driver run
(`impl.gc.scan.scan_task` over `split_prefixes`, `impl.gc.recheck.recheck_before_delete`,
`impl.gc.outcome.delete_with_outcome`), on the harness's store, without Spark: so every GC
step of the conformance harness exercises the code that deletes, not a re-implementation.

`between` runs after the listing and before the re-check (the harness republishes reports
lower there, as a node whose M(p) went backwards would). `populated`: the prefixes that hold
any entry (None: all 1000 are listed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from impl.gc.outcome import COUNTS, DELETED, delete_with_outcome, parse_counts
from impl.gc.recheck import recheck_before_delete
from impl.gc.reports import read_cluster_view
from impl.gc.scan import ELIGIBLE, MALFORMED, REFUSED, STATS, scan_task, split_prefixes
from impl.store.base import ObjectStore
from model.keys import PREFIXES

TASKS = 3  # listing tasks (uneven prefix ranges on purpose)


@dataclass
class InProcessRound:
    M: int | None
    blocked: str | None
    refused: str | None = None
    eligible: set[str] = field(default_factory=set)
    deleted: set[str] = field(default_factory=set)
    errors: int = 0


def inprocess_gc_round(
    store: ObjectStore,
    clock: Callable[[], float],
    grace_s: float,
    max_report_age_s: float,
    page_size: int = 3,
    between: Callable[[], None] | None = None,
    populated: set[int] | None = None,
) -> InProcessRound:
    now = clock()
    decision = read_cluster_view(store, now, max_report_age_s).gc_epoch()
    out = InProcessRound(decision.M, decision.blocked)
    if decision.blocked is not None or decision.M is None:
        return out
    m = decision.M
    groups = split_prefixes(PREFIXES, TASKS)
    if sorted(p for g in groups for p in g) != list(range(PREFIXES)):
        raise AssertionError(f"split_prefixes does not cover each prefix once: {groups}")
    rows = []
    for group in groups:
        # A prefix with no entry lists empty (one request each, 1000 per round); the harness
        # skips those so a round costs milliseconds, and lists every other one in full.
        todo = [p for p in group if populated is None or p in populated]
        rows.extend(scan_task(lambda: store, m, now, grace_s, page_size, iter(todo)))
    eligible = [r for r in rows if r[0] == ELIGIBLE]
    out.eligible = {r[1] for r in eligible}
    bad = [r for r in rows if r[0] in (MALFORMED, REFUSED)]
    if bad:  # the job refuses the whole round without --skip-malformed
        out.refused = f"{len(bad)} malformed or refused key(s): {bad[:3]}"
        return out
    assert sum(r[0] == STATS for r in rows) == TASKS
    if between is not None:
        between()
    if eligible:
        again = read_cluster_view(store, clock(), max_report_age_s).gc_epoch()
        out.blocked, out.refused = recheck_before_delete(m, again)
        if out.blocked is not None or out.refused is not None:
            return out
    for r in delete_with_outcome(lambda: store, 2, 2, True, iter(eligible)):
        if r[0] == DELETED:
            out.deleted.add(r[1])
        elif r[0] == COUNTS:
            out.errors += parse_counts(r)[0].errors
    return out
