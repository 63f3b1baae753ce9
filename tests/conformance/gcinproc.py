"""One GC round in process with the functions the PySpark job runs, on the harness's store,
without Spark: the driver's decision (`impl.gc.reports.read_cluster_view`), the prefix split
(`impl.gc.scan.split_prefixes`), and each task's body (`impl.gc.stream.list_and_delete_task`:
listing, eligibility, the re-read of M before its first delete, and the deletes issued while
the listing continues). So every GC step of the conformance harness exercises the code that
deletes, not a re-implementation.

The eligible set is the listing's own (`impl.gc.stream.listed`, the rows the task deletes
from), read before the round so that a round whose re-read refuses still shows what it
listed. `between` runs once, after the driver's decision and before the first task starts:
the harness republishes reports lower there, as a node whose M(p) went backwards would, and
every task's re-read must see it. (A task starts its re-read beside its first list request,
`impl.gc.stream`; a lowering after the re-read began is, by design, not seen, as a lowering
after the re-read was not before: so the hook no longer waits for the first list request,
which made the harness race the task's re-read thread.)
`populated`: the prefixes that hold any entry (None: all 1000 are listed).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from epochgc.impl.gc.journal import JournalTarget, read_journal
from epochgc.impl.gc.pools import TaskPools
from epochgc.impl.gc.recheck import Blocked, Refused
from epochgc.impl.gc.reports import REPORT_READERS, read_cluster_view
from epochgc.impl.gc.scan import ELIGIBLE, ScanStats, split_prefixes
from epochgc.impl.gc.stream import TaskResult, list_and_delete_task, listed
from epochgc.impl.store.base import ObjectStore
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import PREFIXES

TASKS = 3  # listing tasks (uneven prefix ranges on purpose)
DELETERS = 2  # delete requests in flight per task
# The tasks' pools run each call in this thread when it is submitted (`TaskPools.inline`):
# a round is then a function of the store and the clock alone, not of thread timing, and it
# costs no thread handoffs (on real pools every store call of the listing let a waiting
# worker take the GIL: ~11% of a harness step went to the switches). The real pools run in
# the harness's Spark rounds, the GC job's tests (tests/gc) and `epochgc chaos`.
_POOLS = TaskPools.inline(REPORT_READERS, DELETERS)


@dataclass
class InProcessRound:
    M: int | None
    blocked: str | None  # the driver's decision
    refused: str | None = None
    blocked_on_recheck: str | None = None  # a task's re-read before its first delete...
    refused_on_recheck: str | None = None  # ...and M moved back there (also `refused`)
    eligible: set[str] = field(default_factory=set)
    deleted: set[str] = field(default_factory=set)
    errors: int = 0
    malformed: list[Any] = field(default_factory=list)


class _Unclosed:
    """The store as a task sees it: the harness's store outlives the round."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store

    def close(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


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
    # A prefix with no entry lists empty (one request each, 1000 per round); the harness
    # skips those so a round costs milliseconds, and lists every other one in full.
    todo = [[p for p in g if populated is None or p in populated] for g in groups]
    for group in todo:
        for row in listed(store, group, m, now, grace_s, page_size, ScanStats(), 1):
            if row[0] == ELIGIBLE:
                out.eligible.add(row[1])
    if between is not None:
        between()
    hooked = _Unclosed(store)
    stats_rows = 0
    # The tasks journal their deletes as the job's do; the round's deleted set is read back
    # from that journal (kept apart from the harness's store, whose `_cluster/` it checks).
    with tempfile.TemporaryDirectory(prefix="epochgc-journal-") as jdir:
        jstore = LocalStore(jdir)
        journal = JournalTarget("j/", lambda: _Unclosed(jstore))  # type: ignore[arg-type,return-value]
        for group in todo:
            rows: Iterator[TaskResult] = list_and_delete_task(
                lambda: hooked, m, now, grace_s, page_size, 2, DELETERS, 1,  # type: ignore[arg-type,return-value]
                clock, max_report_age_s, iter(group), journal=journal, pools=_POOLS)
            for r in rows:
                if isinstance(r.verdict, Blocked):
                    out.blocked_on_recheck = r.verdict.why
                elif isinstance(r.verdict, Refused):
                    out.refused = out.refused_on_recheck = r.verdict.why
                out.malformed.extend(r.malformed + r.refused)
                stats_rows += 1
        totals = read_journal(jstore, "j/", store)
    # every key gone now (gone unattributed: absent, its request's answer not journaled)
    out.deleted = set(totals.deleted) | set(totals.gone_unattributed) | totals.already_gone
    out.errors = len(totals.errors)
    assert stats_rows == TASKS
    if out.malformed and out.refused is None:  # R21a: the round fails, deletes stand
        out.refused = f"{len(out.malformed)} malformed or refused key(s): {out.malformed[:3]}"
    return out
