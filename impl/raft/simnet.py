"""The simulated network, a part of Simulator: link cuts (both ways or one way), healing, late
replays of old messages, and the send path that draws each message's loss, duplication,
latency and reordering from the simulator's rng (in the same order as ever: the trace
digests depend on it).

A mixin: `Simulator` (impl/raft/sim.py) inherits it and owns the state it reads (declared
below for the type checker, set in `Simulator.__init__`)."""

from __future__ import annotations

import random
import zlib
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from epochgc.impl.raft.codec import encode_message
from epochgc.impl.raft.messages import Message
from epochgc.impl.raft.simtypes import _DELIVER, Faults

_HISTORY = 512  # sent messages remembered for late replays


class SimNetwork:
    if TYPE_CHECKING:  # the simulator's state and calls this part uses (see Simulator)
        rng: random.Random
        faults: Faults
        ids: list[int]
        now: int
        stats: Counter[str]
        count_net: bool
        cuts: set[tuple[int, int]]
        one_way: set[tuple[int, int]]
        _last_send: tuple[int, int, int, int, bytes] | None
        _link_tail: dict[tuple[int, int], int]
        _history: list[tuple[int, int, int, bytes]]

        def _record(self, tag: bytes, *nums: int) -> None: ...

        def _push(self, time: int, kind: int, a: int, b: int, c: int,
                  payload: bytes = b"") -> None: ...

    def cut(self, a: int, b: int) -> None:
        self.cuts.add((min(a, b), max(a, b)))
        self._record(b"X", a, b)

    def cut_one_way(self, frm: int, to: int) -> None:
        """Lose every message from `frm` to `to` (the other direction still works)."""
        if frm != to:
            self.one_way.add((frm, to))
            self._record(b"Y", frm, to)

    def heal(self, a: int | None = None, b: int | None = None) -> None:
        if a is None or b is None:
            self.cuts.clear()
            self.one_way.clear()
        else:
            self.cuts.discard((min(a, b), max(a, b)))
            self.one_way.discard((a, b))
            self.one_way.discard((b, a))
        self._record(b"H", a or 0, b or 0)

    def isolate(self, nid: int) -> None:
        for other in self.ids:
            if other != nid:
                self.cut(nid, other)

    def replay_old(self, count: int = 1) -> None:
        """Deliver `count` old messages (seeded picks from the recent history, possibly from
        earlier terms and earlier incarnations) again, each after a random delay."""
        for _ in range(count):
            if self._history:
                self._replay_one()
    def _sender(self, src: int) -> Callable[[int, int, Message], None]:
        history, cuts, one_way, link_tail = self._history, self.cuts, self.one_way, self._link_tail
        rng = self.rng
        # What randrange(n) and randint(a, b) draw, without their argument checks: the same
        # stream, so the same trace (a send is the simulator's most frequent call).
        below = rng._randbelow  # type: ignore[attr-defined]

        def send(to: int, group: int, msg: Message) -> None:
            payload = encode_message(msg)
            f = self.faults
            if len(history) < _HISTORY:
                history.append((src, to, group, payload))
            else:
                history[below(_HISTORY)] = (src, to, group, payload)
            if f.replay and rng.random() < f.replay:
                self._replay_one()
            if (
                (cuts and (min(src, to), max(src, to)) in cuts)
                or (one_way and (src, to) in one_way)
                or (f.drop and rng.random() < f.drop)
            ):
                self._record(b"d", src, to, group, zlib.crc32(payload))
                if self.count_net:
                    self.stats["net_dropped"] += 1
                return
            copies = 2 if f.duplicate and rng.random() < f.duplicate else 1
            width = f.max_latency - f.min_latency + 1
            if width <= 0:
                raise ValueError(f"empty latency range in {f}")
            for _ in range(copies):
                at = self.now + f.min_latency + below(width)
                if f.reorder and rng.random() < f.reorder:
                    # may overtake or be overtaken
                    at += rng.randint(1, f.reorder_window)
                else:
                    # Like TCP, a link is FIFO unless the reorder fault fires.
                    tail = link_tail.get((src, to), 0)
                    if tail > at:
                        at = tail
                    link_tail[(src, to)] = at
                if self.count_net:
                    self._count_delivery(at, src, to, group, payload)
                self._push(at, _DELIVER, src, to, group, payload)

        return send

    def _count_delivery(self, at: int, src: int, to: int, group: int, payload: bytes) -> None:
        """What the network faults did to one scheduled delivery (instrumentation only)."""
        st = self.stats
        st["net_scheduled"] += 1
        if self._link_tail.get((src, to)) != at:
            st["net_reordered"] += 1
        elif at - self.now > 3:
            st["net_delayed"] += 1
        last = (src, to, self.now, group, payload)
        if self._last_send == last:
            st["net_duplicated"] += 1
        self._last_send = last

    def _replay_one(self) -> None:
        src, to, group, payload = self._history[self.rng.randrange(len(self._history))]
        at = self.now + self.rng.randint(1, max(1, self.faults.replay_window))
        self.stats["replayed_messages"] += 1
        self._record(b"R", src, to, group, zlib.crc32(payload))
        if self.count_net:
            self._count_delivery(at, src, to, group, payload)
        self._push(at, _DELIVER, src, to, group, payload)
