"""The epoch barrier (issue 30, SPEC R36-R38) stepped through the conformance harness
beside the model: every check of `Harness.check_step` runs after each step (the shadow's
replay of advance_gc_epoch, every replica's state against it, the model's invariants and
transition invariants on the abstraction)."""

from __future__ import annotations

from tests.conformance.barrier import run_barrier
from tests.conformance.harness import STATS, Harness
from tests.conformance.steps import step


def test_barrier_pending_then_promoted_beside_the_model(h: Harness) -> None:
    written = STATS["barrier.written"]
    for _ in range(2):
        step(h, h.produce, ["t/0", "t/1"], 2)
    step(h, run_barrier, h)
    assert STATS["barrier.written"] >= written + 2
    shadows = {p: h.shadows[p] for p in ("t/0", "t/1")}
    cand = h.committed_controller().barrier_candidate
    assert cand > 0
    for sh in shadows.values():  # applied, and pending behind unreconciled placeholders
        assert sh.state.barrier_epoch == cand and sh.state.gc_safe_epoch == -1
    step(h, h.produce, ["t/0"], 1)  # a write after the barrier: stamped above it
    step(h, h.service_round, True, False)  # the reconciler passes the command: promoted
    step(h, run_barrier, h, False)  # a second barrier, left to the services' rounds
    step(h, h.service_round, True, False)
    for sh in shadows.values():
        assert sh.state.gc_safe_epoch >= cand
