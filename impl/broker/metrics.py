"""Prometheus metrics of one node (one registry per node, so a simulated cluster can hold
several)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from epochgc.impl.partition.fence import FenceDecision
from epochgc.impl.partition.statemachine import ApplyEvent


class NodeMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry or CollectorRegistry()
        self.window_slides = Counter(
            "epochgc_window_slides", "seen-window slides at the fence", ["partition"], registry=r
        )
        self.fences = Counter(
            "epochgc_fences", "fence decisions by kind", ["partition", "kind"], registry=r
        )
        self.stale = Counter(
            "epochgc_stale_rejections", "stale rejections", ["partition", "at"], registry=r
        )
        self.stale_gap = Histogram(
            "epochgc_stale_window_gap",
            "how far below the window's lower bound a rejected epoch was",
            buckets=(1, 2, 5, 10, 20, 50, 100, 1000),
            registry=r,
        )
        self.apply_rejections = Counter(
            "epochgc_apply_rejections", "placeholders rejected at apply time", ["partition"],
            registry=r,
        )
        self.reconciler_lag = Gauge(
            "epochgc_reconciler_lag_records", "records above LRO", ["partition"], registry=r
        )
        self.inactive_epoch = Gauge(
            "epochgc_inactive_epoch", "M(p) of this replica (-2 when none)", ["partition"],
            registry=r,
        )
        self.leader_changes = Counter(
            "epochgc_leader_changes", "leadership gained by this node", ["group"], registry=r
        )
        # (metric, label values) -> its child: `labels()` validates and locks on every call,
        # and a fence and an apply each ask for several (children are never removed here).
        self._children: dict[tuple[Any, ...], Any] = {}
        self._gauge_values: dict[tuple[int, str], int] = {}  # what _set last set

    def _child(self, metric: Any, *values: str) -> Any:
        k = (id(metric), *values)
        child = self._children.get(k)
        if child is None:
            child = self._children[k] = metric.labels(*values)
        return child

    def on_fence(self, partition: str, d: FenceDecision) -> None:
        self._child(self.fences, partition, d.kind).inc()
        if d.slid:
            self._child(self.window_slides, partition).inc()
        if not d.admitted:
            self._child(self.stale, partition, "fence").inc()
            if d.window is not None:
                self.stale_gap.observe(d.window[0] - d.epoch)

    def on_apply(self, partition: str, ev: ApplyEvent, next_offset: int) -> None:
        if ev.result is not None and not ev.result.accepted:
            self._child(self.apply_rejections, partition).inc()
        m = ev.state.min_epoch_lower_bound
        self._set(self.inactive_epoch, partition, -2 if m is None else m - 1)
        self._set(self.reconciler_lag, partition, next_offset - 1 - ev.state.last_reconciled_offset)

    def _set(self, gauge: Gauge, partition: str, value: int) -> None:
        """Set a partition's gauge, skipping the locked write when it holds `value` already
        (every apply sets two, and most leave them as they were)."""
        k = (id(gauge), partition)
        if self._gauge_values.get(k) != value:
            self._child(gauge, partition).set(value)
            self._gauge_values[k] = value
