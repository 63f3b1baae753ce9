"""Prometheus metrics of one node (one registry per node, so a simulated cluster can hold
several)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from impl.partition.fence import FenceDecision
from impl.partition.statemachine import ApplyEvent


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

    def on_fence(self, partition: str, d: FenceDecision) -> None:
        self.fences.labels(partition, d.kind).inc()
        if d.slid:
            self.window_slides.labels(partition).inc()
        if not d.admitted:
            self.stale.labels(partition, "fence").inc()
            if d.window is not None:
                self.stale_gap.observe(d.window[0] - d.epoch)

    def on_apply(self, partition: str, ev: ApplyEvent, next_offset: int) -> None:
        if ev.result is not None and not ev.result.accepted:
            self.apply_rejections.labels(partition).inc()
        m = ev.state.min_epoch_lower_bound
        self.inactive_epoch.labels(partition).set(-2 if m is None else m - 1)
        self.reconciler_lag.labels(partition).set(
            next_offset - 1 - ev.state.last_reconciled_offset
        )
