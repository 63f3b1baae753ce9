"""A node's Prometheus metrics count what happened, per partition and kind (the children are
cached per label values since issue 14's harness speed work: a cache keyed wrongly would
count one partition's events under another's labels)."""

from __future__ import annotations

import random
from collections import Counter

from epochgc.impl.broker.metrics import NodeMetrics
from epochgc.impl.partition import commands as c
from epochgc.impl.partition.fence import FenceDecision
from epochgc.impl.partition.statemachine import ApplyEvent, PlaceholderResult
from epochgc.model import partition as mp


def test_counts_and_gauges_per_partition_and_kind() -> None:
    m = NodeMetrics()
    rng = random.Random(5)
    fences: Counter[tuple[str, str]] = Counter()
    slides: Counter[str] = Counter()
    stale: Counter[str] = Counter()
    rejected: Counter[str] = Counter()
    last: dict[str, tuple[int, int]] = {}
    for i in range(400):
        p = rng.choice(["t/0", "t/1", "u/0"])
        if rng.random() < 0.5:
            kind = rng.choice(["in_window", "above_window", "below_window"])
            admitted = kind != "below_window"
            slid = rng.random() < 0.3
            d = FenceDecision(term=1, epoch=i, admitted=admitted, kind=kind,
                              window=None if admitted else (i + 1, i + 3),
                              seen_before=None, seen_after=(i, i) if slid else None)
            m.on_fence(p, d)
            fences[(p, kind)] += 1
            slides[p] += slid
            stale[p] += not admitted
        else:
            accepted = rng.random() < 0.7
            lb = rng.choice([None, i])
            st = mp.PartitionState(min_epoch_lower_bound=lb, last_reconciled_offset=i // 2)
            res = PlaceholderResult(accepted, base=i, window=None)
            m.on_apply(p, ApplyEvent(i, c.Barrier(), res, st), next_offset=i + 10)
            rejected[p] += not accepted
            last[p] = (-2 if lb is None else lb - 1, i + 10 - 1 - i // 2)
    get = m.registry.get_sample_value
    for (p, kind), n in fences.items():
        assert get("epochgc_fences_total", {"partition": p, "kind": kind}) == n
    for p in ("t/0", "t/1", "u/0"):
        assert (get("epochgc_window_slides_total", {"partition": p}) or 0) == slides[p]
        assert (get("epochgc_stale_rejections_total", {"partition": p, "at": "fence"})
                or 0) == stale[p]
        assert (get("epochgc_apply_rejections_total", {"partition": p}) or 0) == rejected[p]
        if p in last:
            assert get("epochgc_inactive_epoch", {"partition": p}) == last[p][0]
            assert get("epochgc_reconciler_lag_records", {"partition": p}) == last[p][1]
    assert len(fences) >= 6 and sum(rejected.values()) > 10
