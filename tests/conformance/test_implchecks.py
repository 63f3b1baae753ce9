"""Issue 16's rules as short programs over `Harness` (each step followed by every check,
the new ones included): each program asserts that it reached the state its check is for,
so a rule that stops reaching it fails here instead of checking nothing."""

from __future__ import annotations

import pytest

from epochgc.impl.gc.recheck import Blocked, Go, Refused, recheck_before_delete
from epochgc.impl.gc.reports import PARTITIONS_KEY
from epochgc.model.cluster import GcEpoch
from epochgc.model.keys import DATA_PREFIX, parse_key
from tests.conformance.harness import STATS, Harness
from tests.conformance.implchecks import check_a3, check_a4, check_restore_roundtrip
from tests.conformance.shadow import Divergence
from tests.conformance.steps import step

P = "t/0"


def collect_ready(h: Harness) -> None:
    """Produce, reconcile, publish: a state where a GC round has an M and garbage."""
    for _ in range(3):
        step(h, h.produce, ["t/0", "t/1"], 2)
        step(h, h.service_round, True, False)
    step(h, h.service_round, True, False)


def test_restart_from_a_mid_window_snapshot(h: Harness) -> None:
    before = STATS["op.snapshot_mid_window"]
    for nid in (1, 2, 3):
        step(h, h.restart_mid_window, P, nid)
    assert STATS["op.snapshot_mid_window"] > before
    step(h, h.settle)


def test_create_a_partition_and_produce_at_once(h: Harness) -> None:
    before = STATS["check.landed_placeholders"]
    step(h, h.create_and_produce)
    step(h, h.settle)
    assert "t/2" in h.created() and h.expected["t/2"]
    assert STATS["check.landed_placeholders"] > before


def test_reelected_leader_does_not_land_a_write_of_its_old_term(h: Harness) -> None:
    before = STATS["fault.reelected_between_fence_and_propose"]
    for _ in range(3):
        step(h, h.reelected_between_fence_and_propose, P)
    assert STATS["fault.reelected_between_fence_and_propose"] > before


def test_gc_refuses_when_reports_go_lower_between_listing_and_deleting(h: Harness) -> None:
    collect_ready(h)
    before = STATS["gc.refused_on_recheck"]
    listed = {i.key for i in h.local.list_all(DATA_PREFIX)}
    step(h, h.gc, 0.0, True)
    assert STATS["gc.refused_on_recheck"] == before + 1
    assert {i.key for i in h.local.list_all(DATA_PREFIX)} == listed
    step(h, h.gc, 0.0, False)  # reports put back: the same round now deletes
    assert {i.key for i in h.local.list_all(DATA_PREFIX)} < listed


def test_gc_is_blocked_when_a_partition_is_created_between_listing_and_deleting(
    h: Harness,
) -> None:
    collect_ready(h)
    before = STATS["gc.blocked_on_recheck"], STATS["gc.refused_on_recheck"]
    listed = {i.key for i in h.local.list_all(DATA_PREFIX)}
    table = h.local.get(PARTITIONS_KEY)
    step(h, h.gc, 0.0, False, True)
    assert (STATS["gc.blocked_on_recheck"], STATS["gc.refused_on_recheck"]) == (
        before[0] + 1, before[1])
    assert {i.key for i in h.local.list_all(DATA_PREFIX)} == listed
    assert h.local.get(PARTITIONS_KEY) == table  # the created partition is gone again
    step(h, h.gc, 0.0, False)  # the same round without it deletes
    assert {i.key for i in h.local.list_all(DATA_PREFIX)} < listed


def test_young_and_old_keys_at_exactly_m(h: Harness) -> None:
    collect_ready(h)
    step(h, h.young_and_old_at_m)
    left = {i.key.rsplit("/", 1)[1].rsplit("-", 1)[0] for i in h.local.list_all(DATA_PREFIX)}
    assert "a-young" in left and "d-old-next" in left
    assert "b-old" not in left and "c-old" not in left


def test_recheck_before_delete() -> None:
    assert recheck_before_delete(5, GcEpoch(5, None)) == Go()
    assert recheck_before_delete(5, GcEpoch(6, None)) == Go()
    assert isinstance(recheck_before_delete(5, GcEpoch(4, None)), Refused)
    assert isinstance(recheck_before_delete(5, GcEpoch(None, None)), Refused)
    assert isinstance(recheck_before_delete(5, GcEpoch(None, "no report for t/0")), Blocked)


def test_the_state_checks_fail_on_bad_states(h: Harness) -> None:
    """The checks themselves: each raises on the state it exists for."""
    b = h.c.brokers[1]
    with pytest.raises(Divergence, match="A3"):
        check_a3(1, b.controller.epoch + 1, b.controller.epoch)
    collect_ready(h)
    step(h, h.produce, [P], 2)
    sm = h.c.brokers[h.c.leader(P) or 1].replicas[P].sm
    assert sm.unreconciled()
    orig = sm.state
    from dataclasses import replace

    sm.state = replace(orig, last_reconciled_log_offset=sm.unreconciled()[0].log_index)
    try:
        with pytest.raises(Divergence, match="A4"):
            check_a4("x", sm)
    finally:
        sm.state = orig
    check_restore_roundtrip("x", sm)


def test_housekeeping_with_unreconciled_placeholders(h: Harness) -> None:
    """Housekeeping while placeholders wait for the reconciler: LRLO may move over command
    entries only up to the first of them (A4 checks it after every step)."""
    for _ in range(3):
        step(h, h.mint)
        step(h, h.produce, [P], 1)
        step(h, h.housekeep, P)
    leader = h.c.leader(P)
    assert leader is not None and h.c.brokers[leader].replicas[P].sm.unreconciled()
    step(h, h.service_round)


def test_a_slide_waits_for_shared_holders(h: Harness) -> None:
    """A write admitted in window and held before its propose while an above-window write
    slides: the slide must wait for it (else the held write is rejected at apply in its
    fence's term: a divergence)."""
    mint_to(h, 8)
    leader = h.c.leader(P)
    assert leader is not None
    step(h, h.produce, [P], 1, leader, 6)
    step(h, h.produce, [P], 1, leader, 7)  # applied window [6, 7]
    mint_to(h, 10)
    before = STATS["fault.write_held_after_fence"]
    step(h, h.slow_write_overtaken, P, 4)  # held at 6, the other write at 10 slides
    assert STATS["fault.write_held_after_fence"] == before + 1
    assert h.expected[P]


def test_an_injected_apply_time_rejection_fails_the_producer(h: Harness) -> None:
    step(h, h.produce, [P], 1)
    before = (STATS["fault.window_slid_around_the_lock"], STATS["produce.failed"])
    rejected = STATS["apply.rejected_stale"]
    step(h, h.apply_rejects_held_write, P)
    assert STATS["fault.window_slid_around_the_lock"] == before[0] + 1
    assert STATS["apply.rejected_stale"] > rejected
    assert STATS["produce.failed"] == before[1] + 1


def test_an_injected_rejection_is_explained_for_the_write_held_not_the_last_admitted(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the deep run (seed 170, chunk replay; not shrunk): apply_rejects_held_write
    holds the first write through the leader's fence, which can be another write still in
    flight (there: an earlier step's, waiting out its leader's new-term barrier) rather than
    the step's own; the step's own write then passes unheld and is admitted after it. The
    harness explained the last admitted key (the step's own write, which landed) and so
    called the held write's rejection unexplained. Here the other write is started just
    before the step's own, so it reaches the fence first and is the one held."""
    step(h, h.produce, [P], 1)
    produce = h.produce
    others: list[int] = []

    def another_write_first(parts: list[str], n: int = 2, via: int = 1,
                            epoch: int | None = None, wait: bool = True) -> None:
        if not wait and not others:  # the step's own in-window write: another goes first
            others.append(via)
            produce(parts, n, via, epoch, wait=False)
        produce(parts, n, via, epoch, wait)

    monkeypatch.setattr(h, "produce", another_write_first)
    leader = h.c.leader(P)
    assert leader is not None
    n_adm, n_apply = len(h.c.admissions), len(h.c.apply_log)
    before = STATS["fault.window_slid_around_the_lock"]
    step(h, h.apply_rejects_held_write, P)
    monkeypatch.undo()
    assert STATS["fault.window_slid_around_the_lock"] == before + 1 and others
    held, own = (ph.key for _, name, ph, _ in h.c.admissions[n_adm:n_adm + 2])
    rejected = {r.event.command.key for r in h.c.apply_log[n_apply:]
                if r.partition == P and r.event.result is not None
                and not r.event.result.accepted}
    assert rejected == {held} and h.c.last_admitted[(leader, P)] == own  # the shape
    assert (P, held) in h.landed.explained and (P, own) not in h.landed.explained


def mint_to(h: Harness, epoch: int) -> None:
    while h.cluster_epoch() < epoch:
        step(h, h.mint)


# ---- found by the deep run (s5): an apply-time rejection after a phantom slide ----------


def test_found_apply_time_rejection_after_phantom_then_delete_while_writing() -> None:
    """Found by the deep run (`--replay 6 --raft-check event`), shrunk by Hypothesis (seed
    0). The phantom fences t/1 at 2 on a fresh log (seen window [2, 2]) and its replicate
    fails; delete_while_writing then fences 8 (t/0's re-creation revision: the seen window
    slides to [2, 8]) and 3 (in window) at once. 8 lands first and, being t/1's first
    placeholder, opens the applied window at [8, 8] (R2), so 3 is rejected at apply in its
    fence's term: F1's phantom, which the apply-time check exists for. The harness used to
    call that unexplained; the phantom's failed replicate now explains it."""
    h = Harness(seed=0)
    before = (STATS["apply.rejected_stale"], STATS["fault.admitted_under_phantom_slide"])
    try:
        step(h, h.calm)
        step(h, h.calm)
        step(h, h.delete_while_writing, "t/0", "t/0")
        step(h, h.publish_health, [1], False)
        step(h, h.create_and_produce)
        step(h, h.create_and_produce)
        step(h, h.recreate_with_old_write, "t/0")
        step(h, h.phantom, "t/1", False)
        step(h, h.delete_while_writing, "t/1", "t/0")
        h.settle()
        h.check_step()
        h.check_readback()
    finally:
        h.close()
    assert STATS["apply.rejected_stale"] > before[0]  # the program still reaches the shape
    assert STATS["fault.admitted_under_phantom_slide"] > before[1]


def test_a_phantom_slide_excuses_rejections_in_its_own_term_only(h: Harness) -> None:
    """F1's production shape with the in-window writes in flight together: fence 10 + apply;
    fence 14, replicate fails (seen window [10, 14]); 12, 13 and 11 fenced at once, all in
    window, land in that order: 12 and 13 slide the applied window to [12, 13] and 11 is
    rejected at apply in its fence's term (safe: the apply-time check). Only that leader's
    term of the group is excused: after a leadership round trip (a new term, the seen window
    forgotten) an admission is checked strictly again."""
    mint_to(h, 14)
    leader = h.c.leader(P)
    assert leader is not None
    g = h.c.group_of(P)
    step(h, h.produce, [P], 1, leader, 10)
    h.c.fail_next_replicate(P, leader)
    step(h, h.produce, [P], 1, leader, 14)
    term = h.c.brokers[leader].port.term(g)
    assert h.c.phantom_terms == {(leader, g, term)}
    rejected = STATS["apply.rejected_stale"]
    for e in (12, 13, 11):
        h.produce([P], 1, leader, e, wait=False)
    step(h, h.settle)
    assert STATS["apply.rejected_stale"] == rejected + 1
    other = next(n for n in h.live() if n != leader)
    for target in (other, leader):
        step(h, h.transfer, P, target)
        assert h.c.run_until(lambda t=target: h.c.leader(P) == t, 2_000)  # type: ignore[misc]
    assert h.c.brokers[leader].port.term(g) > term
    mint_to(h, 15)
    step(h, h.produce, [P], 1, leader, 15)
    step(h, h.produce, [P], 1, leader, 14)  # in window [14, 15] of the new term
    key = h.c.last_admitted[(leader, P)]
    assert parse_key(key).epoch == 14 and (P, key) not in h.landed.explained
