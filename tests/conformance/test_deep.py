"""The deep run's driver and coverage table (small: the million steps are `tox -e deep`)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.conformance import deep
from tests.conformance.coverage import EVENTS, rule_names, table
from tests.conformance.harness import STATS, Harness
from tests.conformance.shadow import Divergence


def test_table_warns_on_what_never_happened() -> None:
    lines, warnings = table({}, ["produce", "mint"])
    assert warnings == 2 + len(EVENTS)
    assert all("WARNING" in ln for ln in lines if ln.startswith("  "))
    stats = {"rule.produce": 3, "rule.mint": 1}
    for _, keys, _ in EVENTS:
        stats[keys[-1]] = 1
    lines, warnings = table(stats, ["produce", "mint"])
    assert warnings == 0 and not any("WARNING" in ln for ln in lines)


def test_rule_names_are_the_machines_rules() -> None:
    names = rule_names()
    assert {"produce", "crash", "power_loss_and_recover", "spark_gc", "gc"} <= set(names)


def test_directed_program_hits_the_design_events() -> None:
    """F1's shape (a slide whose replicate fails, then the leader dies), a below-window write,
    a write rejected at apply: each event happens and is counted once the harness checks."""
    before = Counter(STATS)
    h = Harness(0)
    try:
        h.mint()
        h.produce(["t/0"], 1, 1)
        h.check_step()
        h.mint()
        h.phantom("t/0", True)
        h.check_step()
        nid = h.c.leader("t/0")  # it dies with the slid window only it had seen
        assert nid is not None
        h.crash(nid)
        h.run(400)
        h.check_step()
        h.restart(nid)
        h.produce_below(["t/0"], 3)
        h.check_step()
        h.apply_rejects_held_write("t/0")  # slides around the fence's lock: rejected at apply
        h.check_step()
    finally:
        h.close()
    got = Counter(STATS)
    got.subtract(before)
    for key in ("event.window_slide_fence", "event.replicate_failed_after_slide",
                "event.rejected_below_window_fence", "event.rejected_below_window_apply",
                "event.window_slide_apply", "event.leader_change",
                "event.leader_change_stale_seen"):
        assert got[key] >= 1, key


def test_chunk_reports_a_seeded_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    """A check that fails (seeded) is reported with its message, not swallowed."""
    def broken(self: Harness) -> None:
        raise Divergence("seeded: the refinement check fails")

    monkeypatch.setattr(Harness, "_check_model_invariants", broken)
    res = deep.run_chunk(7, 1, 5, "step")
    assert res["failure"] is not None and "seeded: the refinement check fails" in res["failure"]
    # its own line first, whatever the length of the falsifying program after it
    assert res["failure"].startswith("Divergence: seeded: the refinement check fails\n")


def test_driver_end_to_end(tmp_path: Path) -> None:
    """One worker process, a few steps: total steps, rates, the coverage table, exit 0."""
    out = tmp_path / "deep.json"
    rc = deep.main(["--steps", "20", "--workers", "1", "--examples", "1", "--step-count", "10",
                    "--spark", "0", "--event-share", "2", "--json", str(out)])
    rep = json.loads(out.read_text())
    assert rc == 0 and rep["finished"] and rep["steps"] >= 20 and not rep["failures"]
    assert rep["steps_per_s"] > 0 and rep["steps_per_cpu_s"] > 0 and rep["wall_s"] > 0
    assert any(ln.startswith("rules") for ln in rep["coverage_table"])
    assert set(rep["events"]) == {label for label, _, _ in EVENTS}


def test_a_failing_chunk_counts_only_its_generated_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The deep run does not shrink: a shrink's steps once counted as harness steps (94,610
    in one failing chunk). Seeded: a check failing from a program's 4th step on."""
    orig = Harness._check_model_invariants

    def late(self: Harness) -> None:
        self._seeded_n = getattr(self, "_seeded_n", 0) + 1
        if self._seeded_n >= 4:
            raise Divergence("seeded: fails from the 4th step on")
        orig(self)

    monkeypatch.setattr(Harness, "_check_model_invariants", late)
    deep_run = deep.run_chunk(11, 2, 12, "step", shrink=False)
    replay = deep.run_chunk(11, 2, 12, "step")
    assert deep_run["failure"] and replay["failure"]
    # generated programs (at most 2 x 12 steps) and Hypothesis's one replay of the failure
    assert deep_run["stats"]["steps"] <= 3 * 12 < replay["stats"]["steps"]


def test_an_unknown_raft_check_mode_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """`--raft-check sometimes` once ran silently as per-step checks."""
    with pytest.raises(SystemExit) as e:
        deep.main(["--raft-check", "sometimes", "--replay", "1"])
    assert e.value.code == 2 and "invalid choice: 'sometimes'" in capsys.readouterr().err
