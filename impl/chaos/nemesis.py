"""Carries out the seeded plan (impl/chaos/schedule.py) on the real processes, one episode
at a time, and heals each before the next. Every action goes to the history."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from epochgc.impl.chaos.cluster import ChaosCluster
from epochgc.impl.chaos.history import History
from epochgc.impl.chaos.schedule import KINDS, Episode
from epochgc.impl.store.faulty import FaultyStore

# A node told its disk failed must be gone within this (s); still serving then is a bug.
CRASH_DEADLINE_S = 15.0
POWER_STALL_S = 1.0


class Nemesis:
    def __init__(self, lc: ChaosCluster, history: History,
                 leaders: Callable[[], dict[str, int]],
                 set_store_mode: Callable[[str | None], None]) -> None:
        self.lc = lc
        self.h = history
        self.leaders = leaders  # partition (and "controller") -> leader id, 0 unknown
        self.set_store_mode = set_store_mode
        self.faults: Counter[str] = Counter(dict.fromkeys(KINDS, 0))
        self.survived_disk_faults = 0  # nodes that kept running after a disk fault
        self.unexpected_exits = 0
        self.expect_exit: set[int] = set()

    # ---- choosing victims ----------------------------------------------------------------

    def _ranked(self) -> list[int]:
        """Live, unpaused nodes, most leaderships first (the nemesis prefers leaders)."""
        led = Counter(n for n in self.leaders().values() if n)
        live = [n for n in self.lc.up() if n not in self.lc.paused]
        return sorted(live, key=lambda n: (-led[n], n))

    def _pick(self, ep: Episode, prefer_leader: bool = True) -> int | None:
        ranked = self._ranked()
        if not ranked:
            return None
        if prefer_leader and ep.node_pick < 0.7:
            return ranked[0]
        return ranked[int(ep.node_pick * len(ranked)) % len(ranked)]

    # ---- episodes ------------------------------------------------------------------------

    async def run(self, plan: list[Episode], t0: float, stop: asyncio.Event) -> None:
        for i, ep in enumerate(plan, 1):
            delay = t0 + ep.at - time.monotonic()
            if delay > 0:
                # not wait_for: on 3.11 it can lose a cancellation (impl/cluster/rpc.py)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await stop.wait()
            if stop.is_set():
                return
            await self.restart_dead()  # a node crashed on its own: bring it back first
            self.h("nemesis episode", n=f"{i}/{len(plan)}", kind=ep.kind)
            await getattr(self, f"_{ep.kind}")(ep)

    async def _kill(self, ep: Episode) -> None:
        victims = self._ranked()[: ep.count]
        for n in victims:
            self.h("nemesis SIGKILL", node=n)
            self.lc.kill(n, signal.SIGKILL)
        self.faults["kill"] += 1
        await asyncio.sleep(ep.duration)
        for n in victims:
            await self._start(n)

    async def _power_loss(self, ep: Episode) -> None:
        """The whole cluster loses power: what was not fsynced is gone on every node. Every
        acknowledged record must survive (it was durable on a majority before its ack).

        Adversarial on purpose: first the disks stall, one node's briefly (leaders
        preferred) and the others' for POWER_STALL_S per fsync, so that at the cut the slow
        nodes hold written-but-unsynced entries; after the cut the slow nodes come back
        first and may elect a leader between them before the fast one returns. A node that
        acknowledged an entry before its fsync returned has then lost it for real."""
        victims = self.lc.up()
        fast = self._pick(ep)
        for n in victims:
            stall = 0.02 if n == fast else POWER_STALL_S
            self.lc.set_faults(n, replace(self.lc.faults[n], fsync_delay=stall))
        self.h("nemesis disks stall before the power loss", nodes=victims, fast=fast,
               fsync_s=POWER_STALL_S)
        await asyncio.sleep(2 * POWER_STALL_S)
        self.h("nemesis power loss", nodes=victims)
        self.expect_exit |= set(victims)
        for n in victims:
            self.lc.set_faults(n, replace(self.lc.faults[n], power_loss=True))
        self.faults["power_loss"] += 1
        end = time.monotonic() + CRASH_DEADLINE_S
        gone: dict[int, int] = {}
        while time.monotonic() < end and len(gone) < len(victims):
            await asyncio.sleep(0.05)
            gone.update(self.lc.reap())
        for n in victims:
            if n not in gone:  # paused or wedged: it must not outlive the power loss
                self.h("node did not act on the power loss; SIGKILL", node=n)
                self.lc.resume(n)
                self.lc.kill(n, signal.SIGKILL)
            self.lc.set_faults(n, replace(self.lc.faults[n], power_loss=False, fsync_delay=0.0))
        self.expect_exit -= set(victims)
        await asyncio.sleep(ep.duration)
        for n in sorted(victims, key=lambda n: n == fast):  # the fast node last
            if n == fast:
                await asyncio.sleep(2.0)
            await self._start(n)

    async def _pause(self, ep: Episode) -> None:
        n = self._pick(ep)
        if n is None:
            return
        self.h("nemesis SIGSTOP", node=n, seconds=ep.duration)
        self.lc.pause(n)
        self.faults["pause"] += 1
        await asyncio.sleep(ep.duration)
        self.lc.resume(n)
        self.h("nemesis SIGCONT", node=n)

    async def _cut_one_way(self, ep: Episode) -> None:
        ids = self.lc.ids
        n = self._pick(ep) or ids[0]
        other = [m for m in ids if m != n][int(ep.node_pick * 1000) % (len(ids) - 1)]
        src, dst = (n, other) if ep.node_pick < 0.5 else (other, n)
        self.h("nemesis cut link one way", src=src, dst=dst)
        self.lc.cut(src, dst)
        self.faults["cut_one_way"] += 1
        await asyncio.sleep(ep.duration)
        self.lc.heal_links()
        self.h("nemesis healed links")

    async def _cut_both_ways(self, ep: Episode) -> None:
        ids = self.lc.ids
        n = self._pick(ep) or ids[0]
        other = [m for m in ids if m != n][int(ep.node_pick * 1000) % (len(ids) - 1)]
        self.h("nemesis cut link both ways", a=n, b=other)
        self.lc.cut(n, other)
        self.lc.cut(other, n)
        self.faults["cut_both_ways"] += 1
        await asyncio.sleep(ep.duration)
        self.lc.heal_links()
        self.h("nemesis healed links")

    async def _isolate_leader(self, ep: Episode) -> None:
        n = self.leaders().get("controller") or self._pick(ep)
        if not n:
            return
        self.h("nemesis isolate controller leader", node=n)
        for m in self.lc.ids:
            if m != n:
                self.lc.cut(n, m)
                self.lc.cut(m, n)
        self.faults["isolate_leader"] += 1
        await asyncio.sleep(ep.duration)
        self.lc.heal_links()
        self.h("nemesis healed links")

    async def _disk(self, ep: Episode, kind: str, fsync_eio: bool, enospc: bool) -> None:
        n = self._pick(ep)
        if n is None:
            return
        self.h(f"nemesis {kind}", node=n)
        self.expect_exit.add(n)
        self.lc.set_faults(n, replace(self.lc.faults[n], fsync_eio=fsync_eio,
                                                 enospc=enospc))
        self.faults[kind] += 1
        end = time.monotonic() + max(CRASH_DEADLINE_S, ep.duration)
        code: int | None = None
        while time.monotonic() < end:
            await asyncio.sleep(0.1)
            code = self.lc.reap().get(n)
            if code is not None:
                break
        if code is None:
            self.survived_disk_faults += 1
            self.h(f"NODE KEPT RUNNING after {kind}", node=n, seconds=CRASH_DEADLINE_S)
            self.lc.kill(n, signal.SIGKILL)
        else:
            self.h(f"node stopped after {kind}", node=n, exit=code)
            if code == 0:  # it must report the failure, not stop as if asked to
                self.survived_disk_faults += 1
        self.expect_exit.discard(n)
        await asyncio.sleep(max(0.0, ep.duration - 1.0))  # the disk stays bad a while
        self.lc.set_faults(n, replace(self.lc.faults[n], fsync_eio=False, enospc=False))
        await self._start(n)

    async def _disk_fail(self, ep: Episode) -> None:
        await self._disk(ep, "disk_fail", fsync_eio=True, enospc=False)

    async def _disk_full(self, ep: Episode) -> None:
        await self._disk(ep, "disk_full", fsync_eio=False, enospc=True)

    async def _store(self, ep: Episode, mode: str) -> None:
        self.h(f"nemesis object store {mode}", seconds=ep.duration)
        self.set_store_mode(mode)
        self.faults[f"store_{mode}"] += 1
        await asyncio.sleep(ep.duration)
        self.set_store_mode(None)
        self.h("nemesis object store healed")

    async def _store_slow(self, ep: Episode) -> None:
        await self._store(ep, "slow")

    async def _store_fail(self, ep: Episode) -> None:
        await self._store(ep, "fail")

    async def _store_down(self, ep: Episode) -> None:
        await self._store(ep, "down")

    async def _clock_jump(self, ep: Episode) -> None:
        n = self._pick(ep)
        if n is None:
            return
        self.h("nemesis clock jump", node=n, offset_s=ep.offset)
        self.lc.set_faults(n, replace(self.lc.faults[n], clock_offset=ep.offset))
        self.faults["clock_jump"] += 1
        await asyncio.sleep(ep.duration)
        self.lc.set_faults(n, replace(self.lc.faults[n], clock_offset=0.0))
        self.h("nemesis clock restored", node=n)

    # ---- healing -------------------------------------------------------------------------

    async def _start(self, n: int) -> None:
        if self.lc.pid(n) is not None:
            return
        try:
            pid = await asyncio.to_thread(self.lc.start, n)
        except RuntimeError as e:
            self.h("restart failed", node=n, why=str(e)[:160])
            return
        self.h("node restarted", node=n, pid=pid)

    async def restart_dead(self) -> None:
        for n, code in self.lc.reap().items():
            if n not in self.expect_exit:
                self.unexpected_exits += 1
                self.h("node exited on its own", node=n, exit=code)
        for n in self.lc.ids:
            if self.lc.pid(n) is None and n not in self.expect_exit:
                await self._start(n)

    async def heal_all(self) -> None:
        self.lc.heal_links()
        self.set_store_mode(None)
        for n in list(self.lc.paused):
            self.lc.resume(n)
        for n in self.lc.ids:
            self.lc.set_faults(n, type(self.lc.faults[n])())
        await self.restart_dead()
        self.h("healed everything")


def dir_store_switch(lc: ChaosCluster, local: FaultyStore) -> Callable[[str | None], None]:
    """For a directory store: every node's FaultyStore (via its fault file) and the driver's."""

    def switch(mode: str | None) -> None:
        local.mode = mode
        for n in lc.ids:
            lc.set_faults(n, replace(lc.faults[n], store=mode))

    return switch
