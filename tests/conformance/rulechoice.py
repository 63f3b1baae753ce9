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

from hypothesis.control import current_build_context
from hypothesis.errors import InvalidArgument
from hypothesis.internal.conjecture.choice import ChoiceTemplate
from hypothesis.stateful import RuleBasedStateMachine, RuleStrategy


def simplest_program() -> bool:
    """Is the running example Hypothesis's "simplest" one (every choice at its minimum)?

    Hypothesis runs it first in every run of a test (`generate_new_examples`: the
    all-`ChoiceTemplate("simplest")` prefix). For the conformance machine it is one fixed
    program, 199 steps of `calm_network` on a calm network, the same in every deep-run
    chunk: a fifth of the deep run's steps were that program again (the issue 14 note of
    the ninth session). The machine rejects it; Hypothesis then generates a real program in
    its place (a rejected example does not count towards `max_examples`). Relies on
    Hypothesis internals (`ConjectureData.prefix`, `ChoiceTemplate`): test_rulechoice.py
    fails if a release changes them."""
    try:
        data = current_build_context().data
    except InvalidArgument:  # a program driven by hand (the pinned regressions)
        return False
    prefix = getattr(data, "prefix", None)
    return (bool(prefix) and len(prefix) == 1 and isinstance(prefix[0], ChoiceTemplate)
            and prefix[0].type == "simplest")


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
