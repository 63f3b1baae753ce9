"""The re-check before deleting, as plain Python (every Spark task of a real round, the
dry-run driver and the conformance harness run this same function): M is read again right
before the first delete, and a round whose M went backwards, or that is blocked now,
deletes nothing. The verdict is a small typed value (`Go`, `Blocked`, `Refused`): callers
branch on its type, never on a message prefix (one such prefix once gave a wrong exit code).
"""

from __future__ import annotations

from dataclasses import dataclass

from epochgc.model.cluster import GcEpoch


@dataclass(frozen=True)
class Go:
    """The delete phase may go ahead."""


@dataclass(frozen=True)
class Blocked:
    """The round is blocked now (exit 2): nothing may be deleted."""

    why: str


@dataclass(frozen=True)
class Refused:
    """M moved backwards since the listing (exit 1): nothing may be deleted."""

    why: str


Verdict = Go | Blocked | Refused


def recheck_before_delete(m: int, again: GcEpoch) -> Verdict:
    """The verdict for a round that listed with `m` and re-read `again`."""
    if again.blocked is not None:
        return Blocked(f"on re-check before deleting: {again.blocked}")
    if again.M is None or m > again.M:
        return Refused(f"M moved backwards from {m} to {again.M} before the first delete")
    return Go()
