"""`SwarmRuleStrategy`: the conformance machine's rule choice (issue 14). A disabled rule never
runs, a rule whose precondition is false never runs, every enabled valid rule can run, the
swarm really disables rules, and a machine with no valid rule still gets Hypothesis's error."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hseed
from hypothesis.errors import InvalidDefinition
from hypothesis.stateful import (
    RuleBasedStateMachine,
    get_state_machine_test,
    precondition,
    rule,
)
from hypothesis.strategies import integers

from tests.conformance.machine import ConformanceMachine
from tests.conformance.rulechoice import SwarmRuleStrategy, simplest_program

NAMES = [f"r{i}" for i in range(12)]
_CFG = settings(max_examples=60, stateful_step_count=40, deadline=None, database=None,
                phases=[Phase.generate], suppress_health_check=list(HealthCheck))


class _Probe(SwarmRuleStrategy):
    """Records each program's feature flags as Hypothesis drew them."""

    def do_draw(self, data: Any) -> Any:
        if self._enabled is None:
            flags = data.draw(self.enabled_rules_strategy)  # the program's shared flags
            self.machine.flags = {n: flags.is_enabled(n) for n in [*NAMES, "gated"]}
        return super().do_draw(data)


def _machine(log: list[tuple[str, dict[str, bool], bool]]) -> type[RuleBasedStateMachine]:
    """Twelve plain rules and `gated`, whose precondition is the machine's `open` flag
    (flipped by r0); each run rule is logged with the program's flags."""

    def make(name: str) -> Any:
        def body(self: Any, x: int) -> None:
            log.append((name, self.flags, self.open))
            if name == "r0":
                self.open = not self.open
        body.__name__ = name
        return rule(x=integers(0, 3))(body)

    ns: dict[str, Any] = {n: make(n) for n in NAMES}

    def gated(self: Any) -> None:
        log.append(("gated", self.flags, self.open))
    ns["gated"] = precondition(lambda self: self.open)(rule()(gated))

    def __init__(self: Any) -> None:
        RuleBasedStateMachine.__init__(self)
        self.open, self.flags = False, {}
        self._rules_strategy = _Probe(self)
    ns["__init__"] = __init__
    return type("Probe", (RuleBasedStateMachine,), ns)


def _run(seed: int) -> list[tuple[str, dict[str, bool], bool]]:
    log: list[tuple[str, dict[str, bool], bool]] = []
    hseed(seed)(get_state_machine_test(_machine(log), settings=_CFG))()
    return log


def test_only_enabled_rules_with_true_preconditions_run() -> None:
    log = _run(1)
    assert log
    for name, flags, is_open in log:
        assert flags[name], f"{name} ran although the program's flags disabled it"
        if name == "gated":
            assert is_open, "gated ran while its precondition was false"


def test_every_rule_runs_and_the_swarm_disables_some() -> None:
    log = _run(2)
    ran = Counter(name for name, _, _ in log)
    assert set(ran) == set(NAMES) | {"gated"}, f"never ran: {set(NAMES) - set(ran)}"
    enabled = {sum(f.values()) for _, f, _ in log}
    assert min(enabled) < len(NAMES) + 1, "no program had a rule disabled: no swarm"
    assert max(enabled) > len(NAMES) // 2


def test_no_valid_rule_is_still_hypothesis_s_error() -> None:
    class Stuck(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self._rules_strategy = SwarmRuleStrategy(self)

        @precondition(lambda self: False)
        @rule()
        def never(self) -> None:
            raise AssertionError("ran a rule whose precondition is false")

    with pytest.raises(InvalidDefinition, match="No progress can be made"):
        get_state_machine_test(Stuck, settings=_CFG)()


def test_the_conformance_machine_uses_it() -> None:
    assert isinstance(ConformanceMachine()._rules_strategy, SwarmRuleStrategy)


def test_simplest_program_is_seen_first_and_only_then() -> None:
    """Hypothesis runs its all-minimum example first; `simplest_program` names it (and fails
    here if a Hypothesis release changes the internals it reads)."""
    from hypothesis import given
    from hypothesis import strategies as hst

    seen: list[bool] = []

    @settings(max_examples=20, database=None, phases=[Phase.generate])
    @given(hst.integers(), hst.lists(hst.booleans()))
    def probe(x: int, xs: list[bool]) -> None:
        seen.append(simplest_program())

    probe()
    assert seen[0] is True, "Hypothesis's simplest example was not recognised"
    assert not any(seen[1:]) and len(seen) >= 20


def test_a_deep_chunk_runs_no_simplest_program() -> None:
    """Each deep-run chunk used to start with the same 199 x calm_network program; now every
    program counted is a generated one."""
    from tests.conformance.deep import run_chunk

    res = run_chunk(31, 3, 40, "step", shrink=False)
    assert res["failure"] is None
    stats = res["stats"]
    assert stats["examples"] == 3
    assert stats.get("rule.calm_network", 0) < 30, stats  # the simplest: 39 of 40
