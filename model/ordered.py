"""One partition's fence layer with Raft's order (spec section 6, "Production's rules"):
the transition system in which production's own safety property, "the apply-time window
check never fires", is decided for each fence rule.

`model.system` lets fenced writes land in any order (F3) and lets a placeholder of any
epoch land late: safety there comes from the apply-time check alone, which is our
design. Production's property is about the fence, so this system keeps what production
relies on, as stated assumptions:

- O1 (queue order is log order): a fence's placeholder is queued into Raft as part of its
  decision (no other fence decides in between), and entries apply in queue order. An
  entry of an earlier term that a new leader lacks is truncated (a suffix: `drop`).
- O2 (sync with the log): a leader fences only once no entry of an earlier term is still
  pending (it has committed and applied what its log holds from earlier terms, or those
  entries were truncated).
- O3 (the lock): a decision that moves the seen window takes the exclusive lock. With the
  lock held through the replicate it waits until every entry of this term the leader
  queued has applied; with release at enqueue (`Variant.release_at_enqueue`) it waits for
  nothing, since the units of the entries already queued were released at their enqueue.
- Epochs are any naturals the fence is handed (a cached epoch lags, A3).

Actions: `fence(epoch)` (decision + enqueue; a rejection changes nothing, so it is not an
action), `phantom(epoch)` (a fence whose replicate fails before the queue: only the seen
window moves, F1), `land` (the queue's head applies; every replica slides its seen window
when the variant has followers slide), `drop` (a new leader truncates the last pending
entry of an earlier term), `change_leader(r)` (a new term; the old leader's decisions not
yet queued fail), `restart(r)` (the node forgets its seen window; a restarted leader's term ends).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from epochgc.model.errors import ModelError, require_int
from epochgc.model.fence import SeenWindow, fence
from epochgc.model.partition import INITIAL, PartitionState, apply_placeholder
from epochgc.model.prodrules import follower_slide
from epochgc.model.variants import Variant


class NotEnabled(ModelError):
    """The action's precondition does not hold in this state."""


@dataclass(frozen=True)
class Entry:
    epoch: int
    term: int  # the term whose leader queued it


@dataclass(frozen=True)
class OState:
    applied: PartitionState = INITIAL
    log_end: int = 0
    term: int = 0
    leader: int = 0
    seen: tuple[SeenWindow | None, ...] = (None, None)
    queue: tuple[Entry, ...] = ()  # queued in Raft, not yet applied, in log order
    fired: int = 0  # ghost: placeholders that reached apply outside the window
    crashed: bool = False  # assert-at-apply: the replicas crashed on the queue's head


def _off(where: str, what: str) -> NotEnabled:
    return NotEnabled(where, "precondition", what)


def _decide(s: OState, v: Variant, epoch: int, where: str) -> OState:
    require_int(where, "epoch", epoch)
    if s.crashed:
        raise _off(where, "the replicas crash-loop on the log's next entry")
    if any(e.term < s.term for e in s.queue):
        raise _off(where, "entries of an earlier term are pending (O2: sync first)")
    r = fence(s.seen[s.leader], s.applied, s.term, epoch, v)
    if not r.admitted:
        raise _off(where, "the fence rejects it (nothing changes)")
    if r.exclusive and not v.release_at_enqueue and any(e.term == s.term for e in s.queue):
        raise _off(where, "the exclusive lock waits for this term's replicates (O3)")
    seen = (*s.seen[: s.leader], r.seen, *s.seen[s.leader + 1 :])
    return replace(s, seen=seen)


def fence_entry(s: OState, v: Variant, epoch: int) -> OState:
    """The leader admits `epoch` and queues its placeholder (O1)."""
    s2 = _decide(s, v, epoch, "fence")
    return replace(s2, queue=(*s2.queue, Entry(epoch, s.term)))


def phantom(s: OState, v: Variant, epoch: int) -> OState:
    """The leader admits `epoch`, then its replicate fails before the queue (F1)."""
    return _decide(s, v, epoch, "phantom")


def out_of_window(applied: PartitionState, epoch: int) -> bool:
    """Production's apply-time check: the placeholder lies below the applied window."""
    return applied.previous_applied_epoch is not None and epoch < applied.previous_applied_epoch


def land(s: OState, v: Variant) -> OState:
    """The queue's head applies at the log end. Outside the window the apply-time check
    fires: rejected (our design) or, with assert-at-apply, every replica crashes on it
    and again on each replay, so the log stops there."""
    if not s.queue or s.crashed:
        raise _off("land", "nothing to apply" if not s.queue else "the replicas crash-loop")
    head = s.queue[0]
    bad = out_of_window(s.applied, head.epoch)
    res = apply_placeholder(s.applied, head.epoch, s.log_end, v)
    if res.crashed:
        return replace(s, fired=s.fired + 1, crashed=True)
    seen = s.seen
    if v.followers_slide:
        seen = tuple(follower_slide(w, head.epoch) for w in s.seen)
    return replace(s, applied=res.state, log_end=s.log_end + 1, queue=s.queue[1:],
                   seen=seen, fired=s.fired + int(bad))


def replay_crash(s: OState, v: Variant) -> OState:
    """A crashed replica restarts from its snapshot and replays the log: it applies the
    same entry and crashes again (enabled only after a crash; changes nothing)."""
    if not s.crashed:
        raise _off("replay_crash", "no replica crashed")
    res = apply_placeholder(s.applied, s.queue[0].epoch, s.log_end, v)
    assert res.crashed
    return s


def drop(s: OState, v: Variant) -> OState:
    """A new leader truncates the last pending entry of an earlier term."""
    if not s.queue or s.queue[-1].term >= s.term:
        raise _off("drop", "no pending entry of an earlier term at the log's tail")
    return replace(s, queue=s.queue[:-1])


def change_leader(s: OState, v: Variant, r: int) -> OState:
    """Replica `r` leads a new term (it keeps whatever seen window it has)."""
    if not 0 <= r < len(s.seen):
        raise _off("change_leader", f"no replica {r}")
    return replace(s, term=s.term + 1, leader=r)


def restart(s: OState, v: Variant, r: int) -> OState:
    """Replica `r` restarts: its in-memory seen window is gone. A restarted leader comes
    back a follower, so leadership passes through an election: a new term (led by `r`
    again, or by another replica through `change_leader`)."""
    if not 0 <= r < len(s.seen):
        raise _off("restart", f"no replica {r}")
    if s.seen[r] is None:
        raise _off("restart", "nothing to forget")
    out = replace(s, seen=(*s.seen[:r], None, *s.seen[r + 1 :]))
    return replace(out, term=s.term + 1) if r == s.leader else out


def step(s: OState, v: Variant, action: str, **params: Any) -> OState:
    """Run one action by name (`ACTIONS`)."""
    if action not in ACTIONS:
        raise ModelError("ordered.step", "action", f"unknown action {action!r}")
    fn: Any = ACTIONS[action]
    return fn(s, v, **params)  # type: ignore[no-any-return]


ACTIONS: dict[str, Any] = {
    "fence": fence_entry,
    "phantom": phantom,
    "land": land,
    "drop": drop,
    "change_leader": change_leader,
    "restart": restart,
    "replay_crash": replay_crash,
}


def quiet(s: OState) -> bool:
    """Production's safety property: the apply-time window check never fired."""
    return s.fired == 0
