"""Scenario shapes the conformance harness lacked (issue 31), each an operation on `Harness`
with the check that belongs to it:

- topics whose names share a prefix (`t`, `t2`, `t-2`): creating or deleting a topic
  changes exactly its own partitions, and a create of an existing topic is refused;
- duplicate and retried creates of one partition (two creates racing at the controller
  leader, and a create entry reaching the log after the partition exists): the live
  partition keeps its incarnation;
- a producer's retry across a delete and re-create of its partition: never acknowledged
  into the new incarnation (checked on every ack by `Harness._check_acks`);
- a write held between its fence and its propose while an above-window write, a
  housekeeper and a low write queue on the fence's lock, with or without a re-election:
  every one of them finishes and the lock ends free (the liveness checks);
- the housekeeper's advance_epoch in flight (the fence's lock held) when its leader is
  cut off and deposed: its replicate fails, and the lock must end free all the same.

A GC round whose re-read fails is `Harness.gc(fail_reread=True)`; the controller's
restore(snapshot()) check includes the deleted incarnations (`implchecks`).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from epochgc.impl.controller.statemachine import encode_create
from epochgc.impl.controller.topics import TopicError
from epochgc.impl.partition.commands import AdvanceEpoch
from epochgc.impl.partition.fence import NotLeaderError, ReplicateFailed
from tests.conformance.shadow import Divergence

if TYPE_CHECKING:
    from tests.conformance.harness import Harness

TOPICS = ("t", "t2", "t-2")


def topic_of(partition: str) -> str:
    """`t2` of `t2/0`: everything before the last '/'."""
    return partition.rpartition("/")[0]


def _controller(h: Harness) -> Any:
    """The controller leader's broker, or None."""
    nid = h._leader_of(h.c.controller_leader)
    return None if nid is None else h.c.brokers[nid]


def _stats(name: str) -> None:
    from tests.conformance.harness import STATS
    STATS[name] += 1


def create_topic(h: Harness, topic: str, n: int) -> None:
    """Create `topic` with `n` partitions at the controller leader: refused (TopicError,
    nothing proposed) iff the topic has a partition; otherwise exactly TOPIC/0..n-1 appear
    and every other partition keeps its incarnation."""
    from tests.conformance.harness import ALL_PARTITIONS

    b = _controller(h)
    if b is None:
        return
    n = min(n, sum(1 for p in ALL_PARTITIONS if topic_of(p) == topic))
    before = dict(b.controller.partitions)
    exists = any(topic_of(p) == topic for p in before)
    try:
        got = h.wait(b.create_topic(topic, n))
    except TopicError as e:
        if not exists:
            raise Divergence(f"create of new topic {topic!r} refused: {e}") from e
        _stats("topic.duplicate_create_refused")
        return
    except Exception:  # leadership moved: the create's fate is a retry's business
        return
    h.c.run(50)
    if got is None:
        return
    if exists:
        raise Divergence(f"create of existing topic {topic!r} was accepted: {got}")
    if set(got) != {f"{topic}/{i}" for i in range(n)}:
        raise Divergence(f"create_topic({topic!r}, {n}) created {sorted(got)}")
    _same_elsewhere(b.controller.partitions, before, topic, "create")
    _stats("topic.created")


def delete_topic(h: Harness, topic: str) -> None:
    """Delete `topic` at the controller leader: exactly its partitions go (not those of a
    topic whose name merely starts the same), or TopicError iff it has none."""
    b = _controller(h)
    if b is None:
        return
    before = dict(b.controller.partitions)
    mine = {p for p in before if topic_of(p) == topic}
    try:
        got = h.wait(b.delete_topic(topic))
    except TopicError as e:
        if mine:
            raise Divergence(f"delete of topic {topic!r} refused though it has"
                             f" {sorted(mine)}: {e}") from e
        return
    except Exception:
        return
    h.c.run(50)
    if got is None:
        return
    if set(got) != mine:
        raise Divergence(f"delete_topic({topic!r}) deleted {sorted(got)}; its partitions were"
                         f" {sorted(mine)}")
    _same_elsewhere(b.controller.partitions, before, topic, "delete")
    _stats("topic.deleted")


def _same_elsewhere(now: dict[str, Any], before: dict[str, Any], topic: str,
                    what: str) -> None:
    for p, info in sorted(before.items()):
        if topic_of(p) != topic and now.get(p) != info:
            raise Divergence(f"{what} of topic {topic!r} changed {p}: {info} -> {now.get(p)}")


def duplicate_create(h: Harness, p: str) -> None:
    """Two creates of `p` racing at the controller leader (both pass the leader's 'exists?'
    test before either applies), then a create entry proposed straight to the controller
    log once `p` exists (a retried create whose first attempt committed): `p` keeps the
    incarnation the first create made, and both racing creates answer its revision."""
    b = _controller(h)
    if b is None:
        return
    existed = b.controller.partitions.get(p)
    tasks = [h.c.spawn(b.create_partition(p)) for _ in range(2)]
    h.c.run_until(lambda: all(t.done() for t in tasks), 5_000)
    got = {t.result() for t in tasks if t.done() and t.exception() is None}
    h.tasks.extend(t for t in tasks if not t.done())
    info = b.controller.partitions.get(p)
    if existed is not None and info is not None and info != existed:
        raise Divergence(f"a duplicate create replaced live {p}: {existed} -> {info}")
    if len(got) > 1:
        raise Divergence(f"racing creates of {p} answered different revisions {sorted(got)}")
    if info is None or not b.port.is_leader(1):
        return
    with contextlib.suppress(Exception):  # refused, or lost with the leadership
        h.wait(_awaited(b.port.propose(1, encode_create(p), expected_term=b.port.term(1))))
    again = b.controller.partitions.get(p)
    if again != info:
        raise Divergence(f"a retried create entry replaced live {p}: {info} -> {again}")
    h.c.run(50)
    _stats("lifecycle.duplicate_create")


def retry_across_recreate(h: Harness, p: str) -> None:
    """A write to `p` whose first attempt is held after its fence and then fails (an
    injected replicate failure: retryable) while `p` is deleted and created again; its
    producer's retry must be refused (R35), never acknowledged into the new incarnation
    (`Harness._check_acks` compares every ack with its first attempt's incarnation)."""
    nid = h.c.leader(p)  # no wait for an election: a rule without a leader is a no-op
    if nid is None or p not in h.c.brokers[nid].replicas:
        return
    b = h.c.brokers[nid]
    fence = b.replicas[p].fence
    old = b.replicas[p].info.creation_revision
    h.c.fail_next_replicate(p, nid)
    with h._held_at_propose(fence) as held:
        h._run_until_held(held, lambda: h.produce([p], 1, nid, None, wait=False), 500)
        if held:
            h.delete_partition(p)
            ctl = _controller(h)
            if ctl is not None and h._creation(p) is None:
                with contextlib.suppress(Exception):
                    h.wait(ctl.create_partition(p))
            # The retry reads p's creation revision at the producer's broker: let it learn.
            h.c.run_until(lambda: nid in h.c.brokers and (
                (info := h.c.brokers[nid].controller.partitions.get(p)) is not None
                and info.creation_revision != old), 500)
            if h._creation(p) not in (None, old):
                _stats("lifecycle.retry_across_recreate")
    h.settle()  # the released write fails (the injected fault) and its producer retries
    fence.fail_replicate = None  # one-shot; cleared if the write never reached it


def held_write_with_queue(h: Harness, p: str, reelect: bool) -> None:
    """A write at the window's lower edge is held after its fence (holding the shared
    lock) while, queued on the lock: a write above the window (exclusive, it slides), the
    housekeeper (exclusive) and a second write at the lower edge (shared, behind them: once
    the slide is done its epoch is below the window). With `reelect`, leadership goes away
    and back meanwhile, so every waiter wakes in a new term. All of them must finish and
    the lock end free (the liveness checks); the held write must not land in the new term."""
    nid = h.c.leader(p)
    if nid is None or p not in h.c.brokers[nid].replicas:
        return
    b = h.c.brokers[nid]
    rep = b.replicas[p]
    low = rep.sm.state.previous_applied_epoch
    if low is None:
        return
    h.mint()
    top = h.cluster_epoch()
    with h._held_at_propose(rep.fence, low) as held:
        h._run_until_held(held, lambda: h.produce([p], 1, nid, low, wait=False), 1_000)
        if not held:
            return
        # The housekeeper first: it must wait for the held write (exclusive), not slide
        # the window under it.
        h.tasks.append(h.c.spawn(_quiet(b.housekeep(p))))
        h.produce([p], 1, nid, top, wait=False)
        h.produce([p], 1, nid, low, wait=False)
        h.c.run(100)
        if rep.fence.lock.writer or len(rep.fence.lock._waiters) >= 2:
            _stats("fault.lock_queue_behind_held_write")
        if reelect:
            others = [n for n in h.live() if n != nid]
            for target in [*others[:1], nid] if others else []:
                h.transfer(p, target)
                h.c.run_until(lambda t=target: h.c.leader(p) == t, 800)  # type: ignore[misc]
            _stats("fault.reelected_with_lock_queue")
    h.settle()


def housekeep_deposed_mid_replicate(h: Harness, p: str) -> None:
    """The housekeeper of p's leader proposes advance_epoch (holding the fence's lock, taken
    by `admit`), then its leader is isolated before the entry commits: the other nodes
    elect a leader, the network heals, the old leader learns the new term and its pending
    proposals fail (`LeadershipLost`), so the housekeeper's replicate fails while it holds
    the lock. The lock must be released all the same (the liveness checks: every lock
    free); counted when the replicate did fail there."""
    nid = h.c.leader(p)
    if nid is None or p not in h.c.brokers[nid].replicas or len(h.c.brokers) < 3:
        return
    b = h.c.brokers[nid]
    fence = b.replicas[p].fence
    h.mint()  # an epoch above the partition's for the housekeeper to advance to
    proposed: list[int] = []
    replicate = fence.replicate_command

    async def observed(cmd: Any) -> Any:  # an observer: the command goes through unchanged
        if isinstance(cmd, AdvanceEpoch):
            proposed.append(cmd.epoch)
        return await replicate(cmd)

    failed: list[BaseException] = []

    async def housekeep() -> None:
        try:
            await b.housekeep(p)
        except Exception as e:  # expected here: its leadership is lost under it
            failed.append(e)

    fence.replicate_command = observed  # type: ignore[method-assign]
    try:
        task = h.c.spawn(housekeep())
        h.tasks.append(task)
        h.c.run_until(lambda: bool(proposed) or task.done(), 2_000)
    finally:
        del fence.replicate_command  # the instance's wrapper: the class's method again
    if task.done():
        return
    h.isolate(nid)  # the proposal cannot commit; the others elect a new leader
    h.c.run_until(lambda: any(h.c.brokers[n].port.is_leader(h.c.group_of(p))
                              for n in h.live() if n != nid), 5_000)
    h.heal()
    h.c.run_until(task.done, 5_000)
    if any(isinstance(e, ReplicateFailed) for e in failed):
        _stats("fault.housekeeper_deposed_mid_replicate")
    h.settle()


async def _awaited(fut: Any) -> Any:
    """A future as a coroutine (`Harness.wait` runs coroutines), so its outcome is always
    retrieved."""
    return await fut


async def _quiet(aw: Any) -> None:
    """An operation whose failure is expected under faults (its finishing is what counts)."""
    with contextlib.suppress(Exception):
        await aw


def publish_across_controller_handover(h: Harness, to: int, crash: bool) -> None:
    """The controller leader mints and publishes the partition table, then loses the
    leadership: handed to `to`, or (`crash`) by crashing before its followers learn the
    mint's commit. The new leader publishes at once, before it committed an entry of its
    own term (its state machine may not know the old leader's last commit): refused, or a
    table at a revision at least the one already published (`Harness._read_snapshot`)."""
    old = h._leader_of(h.c.controller_leader)
    if old is None or (not crash and (old == to or to not in h.c.brokers)):
        return
    with contextlib.suppress(Exception):
        h.wait(h.c.brokers[old].mint(), 2_000)
    h.publish_partitions()
    if crash:
        h.isolate(old)  # the mint's commit index, still in flight, never arrives
        h.crash(old)
    else:
        with contextlib.suppress(Exception):
            h.c.ports[old].transfer_leadership(1, to)
    if not h.c.run_until(lambda: h.c.controller_leader() not in (None, old), 3_000):
        return
    new = h.c.controller_leader()
    assert new is not None
    try:
        h.wait(h.c.brokers[new].publish_partitions(), 2_000)
        _stats("controller.published_after_handover")
        h._read_snapshot()
    except NotLeaderError:  # not yet an own-term commit: the rule
        _stats("controller.publish_refused_before_own_term_commit")
    except Exception:  # an injected store fault: nothing published
        pass
    # The old leader's last commit becomes known (the new leader commits its own term's
    # entry after it) before the step's checks compare the published table with it.
    port = h.c.ports.get(new)
    if port is not None:
        h.c.run_until(lambda: port.host.reads_current(1), 2_000)
    if crash:
        h.heal()
