"""The re-check before deleting, as plain Python (every Spark task of a real round, the
dry-run driver and the conformance harness run this same function): M is read again right
before the first delete, and a round whose M went backwards, or that is blocked now,
deletes nothing."""

from __future__ import annotations

from model.cluster import GcEpoch


def recheck_before_delete(m: int, again: GcEpoch) -> tuple[str | None, str | None]:
    """(blocked, refused) for a round that listed with `m` and re-read `again`; both None
    when the delete phase may go ahead."""
    if again.blocked is not None:
        return f"on re-check before deleting: {again.blocked}", None
    if again.M is None or m > again.M:
        return None, f"M moved backwards from {m} to {again.M} before the first delete"
    return None, None
