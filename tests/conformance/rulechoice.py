"""A cheaper choice of the next rule for the conformance state machine (issue 14).

Hypothesis's `RuleStrategy` does swarm testing: each program draws a share of rules to
disable, and every step then tries random rules, asking the feature flags about each (a
recorded draw every time, even for a rule already decided), and after three misses walks
the rule list asking again. With most rules disabled that is dozens of draws per step: a
sixth to an eighth of the harness's CPU went to choosing rules.

`SwarmRuleStrategy` keeps the same swarm testing with fewer draws: the program's flags are
drawn by Hypothesis's own `FeatureStrategy` (same share, at least one rule enabled, shrinking
towards all enabled), every rule's flag is decided once at the program's first step, and each
step draws one index among the enabled rules whose preconditions hold. A rule that is
disabled is never run, an enabled one whose precondition fails is never run, and every
enabled, valid rule can be drawn. The programs differ from Hypothesis's own choice (a
different choice sequence); the deep run's coverage table is the check that they still
reach every rule and event (see the issue 14 note).
"""

from __future__ import annotations

from typing import Any

from hypothesis.stateful import RuleBasedStateMachine, RuleStrategy


class SwarmRuleStrategy(RuleStrategy):
    def __init__(self, machine: RuleBasedStateMachine) -> None:
        super().__init__(machine)
        self._enabled: list[Any] | None = None  # this program's enabled rules, in order

    def do_draw(self, data: Any) -> tuple[Any, dict[str, Any]]:
        enabled = self._enabled
        if enabled is None:
            flags = data.draw(self.enabled_rules_strategy)
            enabled = self._enabled = [r for r in self.rules
                                       if flags.is_enabled(r.function.__name__)]
        # is_valid for the gated rules only: it also counts each precondition's outcome
        # for Hypothesis's observability, as RuleStrategy does.
        allowed = [r for r in enabled
                   if not (r.preconditions or r.bundles) or self.is_valid(r)]
        if not allowed:
            if not any(self.is_valid(r) for r in self.rules):
                return super().do_draw(data)  # raises Hypothesis's own "no progress" error
            data.mark_invalid("every enabled rule's precondition is false")
        rule = allowed[data.draw_integer(0, len(allowed) - 1)]
        arguments = {k: data.draw(s) for k, s in rule.arguments_strategies.items()}
        return rule, arguments
