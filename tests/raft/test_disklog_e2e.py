"""Issue 10 end to end: the Raft core (MultiRaftHost) on the real DiskStorage. A node compacts at
its applied index while its log runs further, restarts cleanly, re-learns the commit index,
re-applies and compacts behind its log end. The old disk log then came back with its log
ending before entries it had acknowledged."""

from __future__ import annotations

import random
from pathlib import Path

from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.host import MultiRaftHost
from epochgc.impl.raft.messages import Entry, Message, Snapshot
from epochgc.impl.raft.node import Config

CFG = Config(election_tick=5, heartbeat_tick=1)


class _SM:
    def __init__(self) -> None:
        self.n = 0

    def apply(self, entry: Entry) -> None:
        self.n += 1

    def snapshot(self) -> bytes:
        return b"%d" % self.n

    def restore(self, snapshot: Snapshot) -> None:
        self.n = int(snapshot.data or b"0")


class DiskCluster:
    def __init__(self, base: Path, seed: int, segment_bytes: int = 400) -> None:
        self.base = base
        self.rng = random.Random(seed)
        self.ids = [1, 2, 3]
        self.segment_bytes = segment_bytes
        self.queue: list[tuple[int, Message]] = []
        self.hosts: dict[int, MultiRaftHost] = {}
        for i in self.ids:
            self.start(i)

    def start(self, i: int) -> None:
        h = MultiRaftHost(
            i, self._send, random.Random(self.rng.getrandbits(32)), CFG, snapshot_interval=0
        )
        st = DiskStorage(str(self.base / f"n{i}"), segment_bytes=self.segment_bytes)
        h.add_group(1, self.ids, st, _SM())
        self.hosts[i] = h

    def stop(self, i: int) -> None:
        self.hosts.pop(i).close()
        self.queue = [(to, m) for to, m in self.queue if to != i and m.frm != i]

    def _send(self, to: int, group: int, m: Message) -> None:
        self.queue.append((to, m))

    def step(self) -> None:
        for h in self.hosts.values():
            h.tick()
        for _ in range(50):
            for h in self.hosts.values():
                h.process_ready()
            if not self.queue:
                break
            batch, self.queue = self.queue, []
            for to, m in batch:
                if to in self.hosts:
                    self.hosts[to].receive(1, m)

    def leader(self) -> int | None:
        for i, h in self.hosts.items():
            if h.is_leader(1):
                return i
        return None

    def elect(self, max_steps: int = 40) -> int:
        """Step until a leader exists; its id."""
        for _ in range(max_steps):
            self.step()
            if self.leader() is not None:
                break
        lead = self.leader()
        assert lead is not None
        return lead


def _durable(h: MultiRaftHost) -> tuple[int, int, int]:
    log = h.groups[1].node.log
    return log.snapshot.index, log.last_index(), log.last_term()


def test_compaction_behind_the_log_end_and_clean_restarts_keep_every_entry(
    tmp_path: Path,
) -> None:
    c = DiskCluster(tmp_path, seed=5)
    c.elect()
    acked = []
    for round_ in range(8):
        lead = c.leader()
        assert lead is not None
        ps = [c.hosts[lead].propose(1, b"v" * 30) for _ in range(6)]
        for _ in range(20):
            c.step()
        assert all(p.done and p.error is None for p in ps)
        acked.extend(p.index for p in ps)
        for i in c.ids:
            if i == lead:
                continue
            h = c.hosts[i]
            # Compact at the applied index while the log runs further (a few entries behind
            # its end), then restart cleanly: nothing may be lost.
            applied = h.applied_index(1)
            if applied > h.groups[1].node.log.snapshot.index + 2:
                h.compact(1, applied - 2, h.groups[1].sm.snapshot())
                c.step()
            before = _durable(h)
            c.stop(i)
            c.start(i)
            after = _durable(c.hosts[i])
            assert after[1:] == before[1:], (round_, i, before, after)
            assert after[1] >= max(acked)
    for i in c.ids:
        c.hosts[i].close()


def test_two_compactions_without_new_entries_then_a_restart_keep_the_log_end(
    tmp_path: Path,
) -> None:
    # The silent-loss shape end to end: a follower compacts early (its record lands in the
    # live segment), then at its applied index (deleting the older segments), and restarts
    # before any new entry. The old disk log came back with its log ending at the second
    # compaction, before entries it had acknowledged.
    c = DiskCluster(tmp_path, seed=9, segment_bytes=300)
    lead = c.elect()
    ps = []
    for _ in range(3):  # three batches: the follower's log spans several segments
        ps += [c.hosts[lead].propose(1, b"w" * 30) for _ in range(10)]
        for _ in range(10):
            c.step()
    assert all(p.done and p.error is None for p in ps)
    f = next(i for i in c.ids if i != lead)
    h = c.hosts[f]
    applied = h.applied_index(1)
    assert applied >= 30
    h.compact(1, 3, b"early")
    c.step()
    h.compact(1, applied - 2, h.groups[1].sm.snapshot())
    c.step()
    before = _durable(h)
    c.stop(f)
    c.start(f)
    assert _durable(c.hosts[f])[1:] == before[1:]
    assert c.hosts[f].groups[1].node.log.last_index() >= max(p.index for p in ps)
    for i in list(c.hosts):
        c.hosts[i].close()
