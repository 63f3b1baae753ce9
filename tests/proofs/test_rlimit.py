"""The proofs' limits are budgets of work, not of seconds: Z3's resource limit per solver
check (proofs.symsolver.RLIMIT) and a bound on the paths of a bounded search
(proofs.bmc.MAX_PATHS). A spent budget is `unknown`, and `unknown` fails the run."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import z3

from epochgc.model.variants import variant
from epochgc.proofs import bmc, runner, scenarios, symsolver


def _chain(n: int) -> z3.Solver:
    xs = z3.Ints(" ".join(f"c{i}" for i in range(n)))
    s = z3.Solver()
    for a, b in itertools.pairwise(xs):
        s.add(a < b)
    return s


def _costs(rlimit: int) -> list[int]:
    """What each of 20 checks of a fresh 60-constant chain in the one context cost (each
    is answered, sat); `rlimit` 0: no budget."""
    out = []
    for _ in range(20):
        s = _chain(60)
        if rlimit:
            s.set("rlimit", rlimit)
        before = symsolver._rlimit_count(s)
        r, _ = symsolver.check(s)
        out.append(symsolver._rlimit_count(s) - before)
        assert r == z3.sat, s.reason_unknown()
    return out


def test_the_budget_is_per_check_not_a_total_over_the_context() -> None:
    """Z3 counts the budget from where the context's counter stands at each check
    (reslimit::push, src/util/rlimit.cpp): checks that each cost less than the budget all
    answer, even when together they spend many budgets' worth of the context's counter."""
    s = _chain(60)
    s.set("rlimit", 1)
    assert symsolver.check(s)[0] == z3.unknown  # a budget of 1 is spent at once
    budget = 2 * max(_costs(0))
    spent = _costs(budget)  # every check answered under the budget
    assert sum(spent) > 5 * budget  # several budgets in all: the budget is not cumulative


def test_the_meter_keeps_the_largest_check_of_the_task() -> None:
    symsolver.METER.reset()
    small, big = _chain(3), _chain(80)
    symsolver.check(small)
    after_small = symsolver.METER.largest
    symsolver.check(big)
    after_big = symsolver.METER.largest
    symsolver.check(small)
    assert 0 < after_small < after_big == symsolver.METER.largest


def test_a_budget_of_one_makes_the_rows_unknown_and_the_run_fail(tmp_path: Path) -> None:
    """The seeded bug for the budget: with `--rlimit 1` the quantified proof of `mint` cannot
    answer, so its rows are `unknown` and the run exits 1; with the default budget the same
    run passes and reports the largest count a check spent, under the budget."""
    only = ["--only", "any task_action mint", "--jobs", "1"]
    report = tmp_path / "r.json"
    assert runner.main([*only, "--report", str(report)]) == 0
    data = json.loads(report.read_text())
    assert data["status"] == "passed"
    assert 0 < data["largest_query_rlimit"] < symsolver.RLIMIT
    assert runner.main([*only, "--rlimit", "1", "--report", str(report)]) == 1
    data = json.loads(report.read_text())
    assert data["status"] == "failed" and data["obligations"]
    assert {o["status"] for o in data["obligations"]} == {"unknown"}


def test_a_zero_budget_is_refused() -> None:
    """Z3 reads an rlimit of 0 as no limit at all: the option refuses it."""
    with pytest.raises(SystemExit, match="at least 1"):
        runner.main(["--rlimit", "0", "--only", "nothing"])


def test_a_search_past_its_path_bound_is_a_failure_not_an_absence() -> None:
    """The F1 counterexample takes more than one path to find: bounded to one path the
    search raises (an `unknown` row), it never answers "no trace"."""
    b = next(b for b in scenarios.BUGS if b.name == "F1")
    v = variant(b.variant)
    assert bmc.search(scenarios.TRACE_TEMPLATE, v, b.schedule, b.goal(v)) is not None
    with pytest.raises(bmc.SearchBudgetExhausted, match="within 1 paths"):
        bmc.search(scenarios.TRACE_TEMPLATE, v, b.schedule, b.goal(v), max_paths=1)
