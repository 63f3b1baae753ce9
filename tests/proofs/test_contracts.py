"""Contracts: the symbolic check proves them on every path and finds the two seeded breaks
CrossHair missed at its old budget (issue 11 item 6); CrossHair rows say `checked`."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

import epochgc.model.partition as mp
from epochgc import proofs
from epochgc.model.cluster import gc_epoch_of_valid
from epochgc.proofs import contracts_sym, crosshair_check


@pytest.mark.parametrize("target", contracts_sym.TARGETS)
def test_model_contracts_hold_on_every_path(target: str) -> None:
    o = contracts_sym.check_target(target)
    assert o.status == "proved", o.detail
    assert o.paths


def _broken_reconciled(state, lrlo, lro=None):  # type: ignore[no-untyped-def]
    """Seeded break: the floor rises to max_applied instead of previous_applied."""
    out = mp.apply_reconciled(state, lrlo, lro)
    if state.window_offset is not None and state.window_offset <= out.last_reconciled_log_offset:
        out = replace(out, min_epoch_lower_bound=state.max_applied_epoch)
    return out


_broken_reconciled.__doc__ = mp.apply_reconciled.__doc__
_broken_reconciled.__module__ = "epochgc.model.partition"
_broken_reconciled.__annotations__ = mp.apply_reconciled.__annotations__


def test_broken_well_formed_postcondition_of_apply_reconciled_is_found() -> None:
    o = contracts_sym.check(_broken_reconciled)
    assert o.status == "failed" and "well_formed" in o.detail, o.detail
    args = o.trace["args"]
    assert mp.well_formed(_broken_reconciled(**args)) is False  # replays concretely


def test_broken_revision_cap_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    def capped_plus_one(rev, parts, reps, variant=None):  # type: ignore[no-untyped-def]
        g = gc_epoch_of_valid(rev + 1, parts, reps)
        return g

    monkeypatch.setattr(proofs.contracts, "gc_epoch_of_valid", capped_plus_one)
    o = contracts_sym.check(proofs.contracts.capped)
    assert o.status == "failed" and "<= rev" in o.detail, o.detail
    g = proofs.contracts.capped(**o.trace["args"])
    assert g.M is not None and o.trace["args"]["rev"] < g.M


def test_crosshair_row_is_checked_never_proved() -> None:
    o = crosshair_check.check("epochgc.proofs.contracts.capped", iterations=5)
    assert o.status == "checked", o.detail
    assert "bounded search, 5 iterations per condition" in o.detail


def test_crosshair_in_one_process_gives_each_target_its_own_row() -> None:
    """Two targets in one CrossHair process: the rows (status, conditions) of checking
    each in its own process."""
    targets = ("epochgc.proofs.contracts.capped", "epochgc.model.keys.format_key")
    merged = crosshair_check.check_many(targets, iterations=5)
    alone = [crosshair_check.check(t, iterations=5) for t in targets]
    assert [(o.name, o.status, o.paths) for o in merged] == [
        (o.name, o.status, o.paths) for o in alone]
    assert all(o.status == "checked" and o.paths for o in merged)


def test_crosshair_lines_go_to_the_target_whose_source_holds_them() -> None:
    """format_key and gc_eligible share model/keys.py: an error inside format_key fails
    format_key alone; an error raised in a callee goes to the target it names, and a line
    no target can claim to all of them."""
    spans = {t: crosshair_check._span(t) for t in
             ("epochgc.model.keys.format_key", "epochgc.model.keys.gc_eligible",
              "epochgc.model.cluster.gc_epoch")}
    f, a, _ = spans["epochgc.model.keys.format_key"]
    out = "\n".join([
        f"{f}:{a + 1}: error: false when calling format_key(1)",
        "/elsewhere/x.py:3: error: ValueError when calling gc_epoch(2)",
        "/elsewhere/x.py:4: error: something",
    ])
    got = crosshair_check.distribute(out, spans)
    assert [len(v) for v in got.values()] == [2, 1, 2]
    assert "format_key(1)" in got["epochgc.model.keys.format_key"][0]
    assert "gc_epoch(2)" in got["epochgc.model.cluster.gc_epoch"][0]


def test_crosshair_finds_the_seeded_cap_break_through_the_flat_harness() -> None:
    # The cheap one of the two seeded breaks, at the default budget of the `prove` run:
    # the search is a number of iterations (found from 8 on; 7 miss it), not CPU seconds,
    # so it is found on any load.
    o = crosshair_check.seeded_break("cap-off-by-one", crosshair_check.ITERATIONS)
    assert o.status == "failed" and "capped(" in o.detail, o.detail


def test_too_few_iterations_miss_the_seeded_cap_break() -> None:
    """The budget is what finds it: 7 iterations per condition do not (the boundary of
    the test above; the same on any load, CrossHair's path choices being seeded)."""
    o = crosshair_check.seeded_break("cap-off-by-one", 7)
    assert o.status == "checked", o.detail


@pytest.mark.skipif(not os.environ.get("EPOCHGC_CROSSHAIR_DEEP"),
                    reason="minutes of CrossHair: tox -e crosshair sets EPOCHGC_CROSSHAIR_DEEP")
def test_crosshair_finds_both_seeded_breaks_at_the_deep_budget() -> None:
    for mutant, target in crosshair_check.SEEDED_BREAKS.items():
        o = crosshair_check.seeded_break(mutant)
        assert o.status == "failed", (mutant, o.detail)
        assert target.rsplit(".", 1)[1] + "(" in o.detail, o.detail
