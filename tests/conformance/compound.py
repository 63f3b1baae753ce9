"""Compound operations of the conformance harness: a write held between its fence and its
propose while something else happens (a slide, a window change around the lock, a
re-election, a deletion and re-creation), and deletions racing writes, leader changes and
GC rounds on stale reports."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from epochgc.impl.partition.commands import AdvanceEpoch, Placeholder
from epochgc.impl.partition.commands import encode as encode_command
from tests.conformance.deployment import ALL_PARTITIONS, HOLD_WAIT_EARLY_EXIT, STATS
from tests.conformance.state import HarnessState


class CompoundOperations(HarnessState):
    # ---- held writes ---------------------------------------------------------------------

    def slow_write_overtaken(self, p: str, back: int) -> None:
        """F3's shape: a write fenced inside the window is held between its fence and its
        propose while a write above the window is fenced and replicated; then the held write
        proposes. With the shared lock held through the replicate (as specified) the slide
        waits for it; if it were not, the held write would land below the slid window and
        only the apply-time check would keep it out."""
        nid = self.c.leader(p)
        if nid is None or p not in self.c.brokers[nid].replicas:
            return
        fence = self.c.brokers[nid].replicas[p].fence
        low = max(0, self.cluster_epoch() - back)
        with self._held_at_propose(fence, low) as held:
            self._run_until_held(held, lambda: self.produce([p], 1, nid, low, wait=False),
                                 2_000)
            if held:
                STATS["fault.write_held_after_fence"] += 1
            self.produce([p], 1, nid, self.cluster_epoch(), wait=False)
            self.c.run(400)  # the other write goes as far as the lock lets it
        self.settle()

    @contextlib.contextmanager
    def _held_at_propose(self, fence: Any, epoch: int | None = None,
                         on_hold: Callable[[], None] | None = None) -> Iterator[list[int]]:
        """Holds the first write through `fence` (of `epoch`, if given) between its fence
        and its propose until the block ends; yields the held epochs (empty: none held).
        `on_hold` runs as the write is held, right after its admission was reported (the
        fence reports it and calls this hook with no await between)."""
        gate: asyncio.Future[None] = self.c.loop.create_future()
        held: list[int] = []

        async def hold(e: int) -> None:
            if (epoch is None or e == epoch) and not held:
                held.append(e)
                if on_hold is not None:
                    on_hold()
                await gate

        fence.before_propose = hold
        try:
            yield held
        finally:
            if not gate.done():
                gate.set_result(None)
            fence.before_propose = None

    def _run_until_held(self, held: list[int], start: Callable[[], None], steps: int) -> None:
        """Start a write and run until it is held before its propose; stop early when the
        write is done without being held (refused at the fence: nothing will ever be held,
        and the remaining simulated events would only be idle heartbeats)."""
        n = len(self.tasks)
        start()
        mine = self.tasks[n:]
        if HOLD_WAIT_EARLY_EXIT:
            self.c.run_until(lambda: bool(held) or all(t.done() for t in mine), steps)
        else:
            self.c.run_until(lambda: bool(held), steps)

    # ---- rules that reach the states issue 16's checks are for ---------------------------

    def restart_mid_window(self, p: str, nid: int) -> None:
        """Slide p's window twice without reconciling (floor below previous_applied, the
        slides' placeholders unreconciled), snapshot node nid's replica there, then crash
        and restart it: recovery restores from that snapshot mid-window."""
        if self._creation(p) is None or nid not in self.c.brokers:
            return
        for _ in range(3):  # the first slide may only set the window: two more lift it
            self.mint()
            self.produce([p], 1, nid, self.cluster_epoch())
        b = self.c.brokers.get(nid)
        if b is None or p not in b.replicas:
            return
        s = b.replicas[p].sm.state
        if s.min_epoch_lower_bound is not None and s.min_epoch_lower_bound < (
                s.previous_applied_epoch or 0) and b.replicas[p].sm.unreconciled():
            STATS["op.snapshot_mid_window"] += 1
        self.compact(nid, p)
        self.crash(nid)
        self.restart(nid)

    def apply_rejects_held_write(self, p: str) -> None:
        """An injected apply-time rejection: a write admitted in window is held between its
        fence and its propose while the harness slides p's window twice with advance_epoch
        entries proposed straight to Raft, around the fence's lock (a fault). The held write
        is then rejected at apply, in its fence's term; the producer must see a failure."""
        nid = self.c.leader(p)
        if nid is None or p not in self.c.brokers[nid].replicas:
            return
        b = self.c.brokers[nid]
        rep = b.replicas[p]
        fence, g = rep.fence, rep.info.group
        for _ in range(2):
            self.mint()
        low = rep.sm.state.previous_applied_epoch
        top = self.cluster_epoch()
        if low is None or rep.sm.state.max_applied_epoch is None:
            return
        mx = rep.sm.state.max_applied_epoch
        if top < mx + 2 or self.c.leader(p) != nid:
            return
        # The held write's own key, taken as it is held: the first write through the fence
        # may be an earlier step's still in flight, and this step's write then passes
        # unheld and is admitted after it (deep run seed 170: the last admitted key, read
        # after the run, explained the write that landed, not the one rejected).
        held_keys: list[str] = []

        def note_held() -> None:
            key = self.c.last_admitted.get((nid, p))
            if key is not None:
                held_keys.append(key)

        with self._held_at_propose(fence, on_hold=note_held) as held:
            self._run_until_held(held, lambda: self.produce([p], 1, nid, low, wait=False),
                                 2_000)
            if held:
                for key in held_keys:
                    self.landed.explained.add((p, key))
                for e in (mx + 1, mx + 2):
                    with contextlib.suppress(Exception):
                        self.wait(_awaited(b.port.propose(
                            g, encode_command(AdvanceEpoch(e)), expected_term=b.port.term(g))))
                STATS["fault.window_slid_around_the_lock"] += 1
        self.settle()

    def create_and_produce(self) -> None:
        """Create a partition and produce to it at once (no mint in between): the stamp
        must still be at least its creation revision (A2)."""
        todo = [p for p in ALL_PARTITIONS if self._creation(p) is None]
        if not todo:
            return
        self.create_partition()
        if self._creation(todo[0]) is not None:
            self.produce([todo[0]], 1, self.live()[0] if self.c.brokers else 1)

    def reelected_between_fence_and_propose(self, p: str) -> None:
        """A write admitted by p's leader is held between its fence and its propose while
        leadership goes to another node and back (a new term); then it proposes. It must
        fail (its fence's term is gone), not land in the new term."""
        nid = self.c.leader(p)
        if nid is None or p not in self.c.brokers[nid].replicas or len(self.c.brokers) < 2:
            return
        fence = self.c.brokers[nid].replicas[p].fence
        g = self.c.group_of(p)
        term0 = self.c.brokers[nid].port.term(g)
        with self._held_at_propose(fence) as held:
            self._run_until_held(held, lambda: self.produce([p], 1, nid, None, wait=False),
                                 500)
            other = next(n for n in self.live() if n != nid)
            # Bounded: under faults a transfer may not finish.
            for target in (other, nid) if held else ():
                self.transfer(p, target)
                if not self.c.run_until(lambda t=target: self.c.leader(p) == t, 800):  # type: ignore[misc]
                    break
            if held and self.c.leader(p) == nid and self.c.brokers[nid].port.term(g) > term0:
                STATS["fault.reelected_between_fence_and_propose"] += 1
        self.settle()

    # ---- partition deletion and re-creation (issue 13, SPEC R32-R35) ------------------------

    def delete_while_writing(self, p: str, other: str) -> None:
        """Writes to p (one also feeding `other`) in flight while p is deleted: each is
        refused or was acknowledged before; a shared object stays protected by `other`."""
        if self._creation(p) is None:
            return
        self.produce([p, other] if other != p else [p], 1, 1, wait=False)
        self.produce([p], 1, 2, wait=False)
        self.c.run(self.rng.choice([0, 20, 60]))
        self.delete_partition(p)
        STATS["lifecycle.delete_while_writing"] += 1
        self.settle()

    def delete_on_stale_reports(self, p: str) -> None:
        """Reports and a snapshot published while p existed, then p deleted, then GC rounds
        over those stale documents (which still count p) before and after a new snapshot."""
        if self._creation(p) is None:
            return
        self.publish_partitions()
        self.publish_health(self.live())
        self.delete_partition(p)
        self.gc()
        STATS["lifecycle.gc_on_stale_reports"] += 1
        self.publish_partitions()
        self.gc()

    def recreate_on_stale_reports(self, p: str) -> None:
        """Every node reports p, then p is deleted and created again and a snapshot listing
        the new incarnation is published, but no health yet: the reports naming p are fresh
        and of the old incarnation, so they must not count (R35): the round blocks on p
        (the shadow drops them by `created`), until the new replicas report."""
        if self._creation(p) is None:
            return
        self.publish_partitions()
        self.publish_health(self.live())
        self.delete_partition(p)
        nid = self._leader_of(self.c.controller_leader)
        if nid is None or self._creation(p) is not None:
            return
        with contextlib.suppress(Exception):
            self.wait(self.c.brokers[nid].create_partition(p))
        self.c.run(50)
        if self._creation(p) is None:
            return
        self.publish_partitions()
        self.gc()
        STATS["lifecycle.gc_on_old_incarnation_reports"] += 1
        self.publish_health(self.live())
        self.gc()

    def delete_across_leader_change(self, p: str, to: int) -> None:
        """p's leadership and the controller's move while p is deleted."""
        if self._creation(p) is None or to not in self.c.brokers:
            return
        with contextlib.suppress(Exception):
            self.transfer(p, to)
        ctl = self.c.controller_leader()
        if ctl is not None and ctl != to:
            with contextlib.suppress(Exception):
                self.c.ports[ctl].transfer_leadership(1, to)
        nid = self.c.controller_leader()
        if nid is not None:
            b = self.c.brokers[nid]

            async def delete() -> None:  # refused or lost with the leadership: a retry's job
                with contextlib.suppress(Exception):
                    await b.delete_partition(p)

            self.tasks.append(self.c.spawn(delete()))
            STATS["lifecycle.delete_across_leader_change"] += 1
        self.settle()

    def recreate_with_old_write(self, p: str) -> None:
        """A write to p held between its fence and its propose while p is deleted and
        created again: released, it must not land in the new incarnation (R35)."""
        if self._creation(p) is None:
            return
        nid = self._leader_of(lambda: self.c.leader(p))
        if nid is None or p not in self.c.brokers[nid].replicas:
            return
        fence = self.c.brokers[nid].replicas[p].fence
        with self._held_at_propose(fence) as held:
            self.produce([p], 1, nid, None, wait=False)
            self.c.run_until(lambda: bool(held), 500)
            self.delete_partition(p)
            ctl = self._leader_of(self.c.controller_leader)
            if ctl is not None and self._creation(p) is None:
                with contextlib.suppress(Exception):
                    self.wait(self.c.brokers[ctl].create_partition(p))
                if held and self._creation(p) is not None:
                    STATS["lifecycle.old_write_across_recreation"] += 1
                    # ... and the old producer's late retry, stamped for the old incarnation,
                    # reaches the new one's leader: refused at its fence (A2, R35).
                    self.c.run_until(lambda: self.c.leader(p) is not None, 2_000)
                    new = self.c.leader(p)
                    if new is not None and held[0] < (self._creation(p) or 0):
                        ph = Placeholder(held[0], f"old/{p}/{held[0]}", 0, 0, 0)

                        async def late() -> None:
                            with contextlib.suppress(Exception):
                                await self.c.brokers[new].replicate(p, ph)

                        self.wait(late())
                        STATS["lifecycle.old_write_at_new_incarnation"] += 1
        self.settle()

async def _awaited(fut: asyncio.Future[Any]) -> Any:
    return await fut
