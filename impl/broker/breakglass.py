"""Break-glass advance-epoch (issue 30): an operator makes the leader of a partition write
`advance_epoch(its cached cluster epoch)` now, idle or not, as the housekeeper does for idle
partitions, so a stuck partition's M(p) can move.

Its known race (production's, REFERENCE §7): the call uses the *admin node's cached*
cluster epoch. While that cache is at or below the epochs the partition already accepted
(objects written through brokers with newer caches), advancing to it cannot raise M(p) past
those objects: it is a no-op however often it is called. So the call is refused there,
naming both epochs, instead of reporting a success that changes nothing. It also cannot
help a partition whose M(p) is held by an unreconciled placeholder (M(p) stays below its
epoch until the reconciler moves); that is what the epoch barrier (in `impl/controller`)
and the reconciler are for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from epochgc.impl.partition.fence import NotLeaderError

if TYPE_CHECKING:
    from epochgc.impl.broker.broker import Broker


class BreakGlassRefused(Exception):
    """The advance cannot help (see the module docstring); the message says why."""


class NothingToAdvance(BreakGlassRefused):
    """The partition already applies the epoch the advance would write (this node's
    cached cluster epoch): on a healthy cluster, every partition follows each epoch
    minted, so there is nothing to break glass for (newuser12 P6: it was refused with
    advice to wait and retry, which an operator followed in a loop). Not a failure: the
    command says so and exits 0."""


@dataclass(frozen=True)
class BreakGlassResult:
    partition: str
    cached_epoch: int
    advanced_to: int | None  # None: the fence turned it away (a newer window meanwhile)
    inactive_epoch: int | None  # M(p) after it


def check_can_help(partition: str, cached_epoch: int, creation_revision: int,
                   max_applied: int | None) -> int:
    """The epoch to advance to, or BreakGlassRefused when it is not above the partition's
    applied epoch (the admin node's cache lags the objects: the race)."""
    target = max(cached_epoch, creation_revision)
    if max_applied is not None and target == max_applied:
        raise NothingToAdvance(
            f"{partition} already applies epoch {max_applied}, the epoch an advance would "
            f"write now (this node's cached cluster epoch {cached_epoch}): nothing to advance "
            "(its M(p) follows the next epoch the cluster mints)")
    if max_applied is not None and target < max_applied:
        raise BreakGlassRefused(
            f"{partition}: this node's cached cluster epoch {cached_epoch} is not above the "
            f"partition's applied epoch {max_applied}; advancing to it cannot move M(p) past "
            "the objects already written (the cache lags the brokers that wrote them). "
            "Wait for the cache to refresh, then retry")
    return target


async def break_glass_advance(broker: Broker, name: str) -> BreakGlassResult:
    """Advance partition `name`, which this broker must lead, to the broker's cached
    cluster epoch. Raises NotLeaderError elsewhere, BreakGlassRefused where it cannot
    help."""
    rep = broker.replica(name)
    if not broker.leads(name):
        raise NotLeaderError(broker.port.leader(rep.info.group) or 0)
    cached = broker.cluster_epoch()
    target = check_can_help(name, cached, rep.info.creation_revision,
                            rep.sm.state.max_applied_epoch)
    seen = rep.fence.seen
    if seen is not None and target <= seen.max:
        # A newer placeholder is admitted but not applied yet (issue 30 review): the advance would
        # land inside or below the window it slides, a no-op reported as a success.
        raise BreakGlassRefused(
            f"{name}: epoch {seen.max} is already admitted at the fence (not applied yet); "
            f"advancing to this node's cached cluster epoch {cached} cannot move M(p) past "
            "it. Retry once it has applied")
    result = await broker.housekeep(name)
    st = rep.sm.state
    if result.advanced_to is None or target not in (st.max_applied_epoch,
                                                    st.previous_applied_epoch):
        # Turned away by the fence, or applied after a newer epoch: nothing moved for it.
        raise BreakGlassRefused(
            f"{name}: the advance to {target} changed nothing (the partition's applied window "
            f"is [{st.previous_applied_epoch}, {st.max_applied_epoch}]: a newer epoch was "
            "admitted meanwhile); retry")
    return BreakGlassResult(name, cached, result.advanced_to, rep.sm.inactive_epoch())
