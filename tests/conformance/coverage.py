"""Coverage of the design, not only steps: how often each rule ran and each interesting event
happened, counted into the harness's STATS (`event.*`) by an observer the harness calls once
per step, and a table where a rule or event that never happened is a WARNING.

The observer only reads what the harness already records (the fence and apply logs, the
brokers' leadership and seen windows): it changes nothing the checks see.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.conformance.harness import Harness

# Each interesting event of the design: (name, STATS keys summed, what it means).
EVENTS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("window slides at the fence", ("event.window_slide_fence",),
     "an above-window write admitted with the exclusive lock slid the seen window"),
    ("window slides at apply", ("event.window_slide_apply",),
     "an applied entry raised a replica's max applied epoch"),
    ("below-window rejections at the fence", ("event.rejected_below_window_fence",),
     "the fence refused a write below its window"),
    ("below-window rejections at apply", ("event.rejected_below_window_apply",),
     "a replicated placeholder was rejected at apply (landed below the window)"),
    ("replicates failed after a slide", ("event.replicate_failed_after_slide",),
     "a write's fence slid the window, then its replicate failed (F1's first half)"),
    ("leader changes with a stale seen window", ("event.leader_change_stale_seen",),
     "a new leader's applied window was below the seen window its predecessor had"),
    ("leader changes", ("event.leader_change",), "a partition got a leader in a new term"),
    ("GC rounds", ("gc.gc_rounds", "gc.sim_rounds", "gc.spark_rounds"),
     "GC rounds checked against the model (in process, simulator, Spark)"),
    ("GC rounds blocked", ("gc.gc_blocked", "gc.sim_blocked", "gc.spark_blocked"),
     "a GC round that computed no M (missing/stale report, unknown partition)"),
    ("GC refused on re-check", ("gc.refused_on_recheck",),
     "reports lowered after M, before the re-read: the delete phase refused"),
    ("GC blocked on re-check", ("gc.blocked_on_recheck",),
     "a partition created after M, before the re-read: the round came out blocked"),
    ("GC deletions", ("gc.gc_deleted", "gc.sim_deleted", "gc.spark_deleted"),
     "L0 objects deleted by GC rounds"),
    ("crashes", ("fault.crash",), "a node crashed"),
    ("power losses between write and fsync", ("fault.disk_crash_mid_write",),
     "a disk program's node lost power with a batch written and not synced"),
    ("restarts from disk", ("fault.disk_restart",),
     "a node recovered from its real disk log"),
    ("acknowledged produces", ("produce.acked_partitions",), "partitions acknowledged"),
    ("acknowledged records read back", ("check.readback",), "read-back checks"),
)


def rule_names() -> list[str]:
    """Every rule of the state machine (by its function name)."""
    from tests.conformance.machine import ConformanceMachine

    return sorted(r.function.__name__ for r in ConformanceMachine.setup_state().rules)


def table(stats: Mapping[str, int], rules: Iterable[str]) -> tuple[list[str], int]:
    """The coverage table's lines and how many WARNINGs (never happened) it holds."""
    lines, warnings = ["rules (times run):"], 0
    for name in rules:
        n = stats.get(f"rule.{name}", 0)
        warn = "  WARNING: never ran" if n == 0 else ""
        warnings += n == 0
        lines.append(f"  {name:<40} {n:>10}{warn}")
    lines.append("events (times happened):")
    for label, keys, _ in EVENTS:
        n = sum(stats.get(k, 0) for k in keys)
        warn = "  WARNING: never happened" if n == 0 else ""
        warnings += n == 0
        lines.append(f"  {label:<40} {n:>10}{warn}")
    return lines, warnings


def events(stats: Mapping[str, int]) -> dict[str, int]:
    return {label: sum(stats.get(k, 0) for k in keys) for label, keys, _ in EVENTS}


class Observer:
    """Per-harness state of the event counters (one per program)."""

    def __init__(self, stats: Counter[str]) -> None:
        self.stats = stats
        self.fence_seen = 0
        self.apply_seen = 0
        self.max_applied: dict[tuple[int, str], int | None] = {}
        self.leader_term: dict[str, int] = {}
        self.last_seen: dict[str, tuple[int, int]] = {}  # p -> (term, seen.max) of a leader

    def observe(self, h: Harness) -> None:
        st = self.stats
        log = h.c.fence_inputs
        while self.fence_seen < len(log):
            _, _, d, _ = log[self.fence_seen]
            self.fence_seen += 1
            if d.admitted and d.slid and d.kind == "above_window":
                st["event.window_slide_fence"] += 1
            elif not d.admitted and d.kind == "below_window":
                st["event.rejected_below_window_fence"] += 1
        alog = h.c.apply_log
        while self.apply_seen < len(alog):
            rec = alog[self.apply_seen]
            self.apply_seen += 1
            ev = rec.event
            if ev.result is not None and not ev.result.accepted:
                st["event.rejected_below_window_apply"] += 1
            k = (rec.node, rec.partition)
            mx = ev.state.max_applied_epoch
            old = self.max_applied.get(k)
            if mx is not None and old is not None and mx > old:
                st["event.window_slide_apply"] += 1
            self.max_applied[k] = mx
        self._leaders(h)

    def _leaders(self, h: Harness) -> None:
        for b in h.c.brokers.values():
            for p, rep in b.replicas.items():
                g = rep.info.group
                if g not in b.port.host.groups or not b.port.is_leader(g):
                    continue
                term = b.port.term(g)
                if term > self.leader_term.get(p, -1):
                    if p in self.leader_term:
                        self.stats["event.leader_change"] += 1
                        prev = self.last_seen.get(p)
                        mx = rep.sm.state.max_applied_epoch
                        if prev is not None and prev[0] < term and (mx is None or mx < prev[1]):
                            self.stats["event.leader_change_stale_seen"] += 1
                    self.leader_term[p] = term
                seen = rep.fence.seen
                if seen is not None and term == self.leader_term[p]:
                    self.last_seen[p] = (term, seen.max)

    def phantom_done(self, h: Harness, nid: int, p: str, consumed: bool) -> None:
        """After the phantom rule: did the injected failure hit a write whose fence slid?"""
        if not consumed:
            return
        for n, name, d, _ in reversed(h.c.fence_inputs):
            if (n, name) == (nid, p):
                if d.admitted and d.slid:
                    self.stats["event.replicate_failed_after_slide"] += 1
                return
