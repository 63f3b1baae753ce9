"""The fence's reader/writer lock under every interleaving of a few tasks, with cancellation
at every await point (`tests.impl.lockexplore`), and each seeded lock bug caught."""

from __future__ import annotations

import re

import pytest

from epochgc.impl.partition.rwlock import RWLock
from tests.impl.lockexplore import SCENARIOS, LockViolation, explore
from tests.impl.lockmutants import LOCK_MUTANTS, load_mutant


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_interleaving_keeps_the_lock_invariants(scenario: str) -> None:
    e = explore(RWLock, SCENARIOS[scenario])
    # Thousands of leaves per scenario (counted in the report); a drop means the explorer
    # stopped branching (for instance cancellation no longer offered).
    assert e.interleavings >= 4000, e.interleavings


@pytest.mark.parametrize("mutant,expected", LOCK_MUTANTS,
                         ids=[m.name for m, _ in LOCK_MUTANTS])
def test_each_seeded_lock_bug_is_caught(mutant: object, expected: str) -> None:
    from epochgc.proofs.mutate import Mutant
    assert isinstance(mutant, Mutant)
    cls = load_mutant(mutant)
    caught: list[str] = []
    for name in sorted(SCENARIOS):
        try:
            explore(cls, SCENARIOS[name])
        except LockViolation as v:
            caught.append(str(v))
            break
    assert caught, f"{mutant.name} survives every interleaving"
    assert re.search(expected, caught[0]), caught[0]
