"""The deterministic loop's clock: a timer due between two simulator units still fires
(regression: a due time like 16.020000000000003 s once made `step` spin forever)."""

from __future__ import annotations

import math

from epochgc.impl.sim.cluster import SimCluster


def test_timer_due_between_units_fires() -> None:
    c = SimCluster(seed=1, partitions=("t/0",))
    fired: list[float] = []
    due = math.nextafter(16.02, math.inf)  # 16.020000000000003: just above unit 1602

    c.loop.call_at(due, lambda: fired.append(c.loop.time()))
    assert c.run_until(lambda: bool(fired), max_steps=50_000)
    assert fired[0] >= due
