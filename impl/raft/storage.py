"""The Storage interface the host persists a Ready through, and an in-memory disk for the
simulator that loses (a seeded prefix of) whatever was written but not yet synced.

Write order inside one batch is snapshot, hard state, entries; `sync` makes the batch durable.
Entries written with a first index at or below the current last index replace the suffix from
there (the core only does that from the first conflicting entry). A snapshot comes in two
kinds: `snapshot`, installed from the leader, replaces the whole log (the log restarts after
it); `compacted`, the application's own, drops the entries up to its index and keeps the rest.
`sync_all` makes several storages durable with as few barriers as they allow (group commit).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Protocol

from epochgc.impl.raft.messages import Entry, HardState, InitialState, Snapshot


class Storage(Protocol):
    def load(self) -> InitialState:
        """Recover the durable state (after a clean stop or a crash)."""
        ...

    def write(
        self,
        hard_state: HardState | None,
        snapshot: Snapshot | None,
        entries: Sequence[Entry],
        compacted: Snapshot | None = None,
    ) -> None:
        """Buffer one Ready's worth of state; not durable until `sync`. `snapshot` is an
        installed one (fresh log), `compacted` a local compaction (trim only)."""
        ...

    def sync(self) -> None:
        """Make everything written so far durable (one fsync per Ready batch)."""
        ...

    def close(self) -> None: ...


class StorageCorruption(Exception):
    """Durable state is damaged in a way that is not a torn tail: refuse to start."""

    def __init__(self, path: str, offset: int, reason: str) -> None:
        super().__init__(f"{path} at byte offset {offset}: {reason}")
        self.path = path
        self.offset = offset


class StorageFailed(Exception):
    """A write or fsync failed (disk full, I/O error). Fatal and sticky: the storage refuses all
    further use and the node must stop; nothing written since the last good sync was
    acknowledged, and a failed fsync is never retried (the page cache may have dropped the
    data while marking it clean)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(
            f"storage failed: {reason}, in {path}; the node must stop (nothing written since "
            "the last successful sync was acknowledged)"
        )
        self.path = path


def apply_entries(log: list[Entry], entries: Sequence[Entry]) -> None:
    """Append entries to a contiguous log, replacing any suffix they overlap."""
    if not entries:
        return
    first = entries[0].index
    if log:
        start = log[0].index
        if first <= start:
            log.clear()
        elif first <= log[-1].index + 1:
            del log[first - start :]
        else:
            raise ValueError(f"gap: appending {first} after {log[-1].index}")
    log.extend(entries)


def sync_all(storages: Sequence[Storage]) -> None:
    """Make every storage durable: storages sharing a `group_commit` (DiskStorage of one node)
    get one barrier between them, any other storage its own `sync`."""
    shared: dict[int, tuple[Any, list[Any]]] = {}
    for st in storages:
        gc = getattr(st, "group_commit", None)
        if gc is None:
            st.sync()
        else:
            shared.setdefault(id(gc), (gc, []))[1].append(st)
    for gc, members in shared.values():
        gc.commit(members)


class MemStorage:
    """A simulated disk. `crash(rng)` keeps a random prefix of the unsynced writes, as a real
    disk may have flushed some of them, and drops the rest."""

    def __init__(self) -> None:
        self.hard_state = HardState()
        self.snapshot = Snapshot()
        self.log: list[Entry] = []
        self._pending: list[
            tuple[HardState | None, Snapshot | None, tuple[Entry, ...], Snapshot | None]
        ] = []
        self.syncs = 0

    def load(self) -> InitialState:
        return InitialState(self.hard_state, self.snapshot, tuple(self.log))

    def write(
        self,
        hard_state: HardState | None,
        snapshot: Snapshot | None,
        entries: Sequence[Entry],
        compacted: Snapshot | None = None,
    ) -> None:
        self._pending.append((hard_state, snapshot, tuple(entries), compacted))

    def sync(self) -> None:
        for op in self._pending:
            self._apply(*op)
        self._pending.clear()
        self.syncs += 1

    def close(self) -> None:
        pass

    def crash(self, rng: random.Random | None = None) -> None:
        """Lose unsynced writes; with an rng, a random prefix of them survives."""
        keep = rng.randint(0, len(self._pending)) if rng is not None and self._pending else 0
        for op in self._pending[:keep]:
            self._apply(*op)
        self._pending.clear()

    def _apply(
        self,
        hs: HardState | None,
        snap: Snapshot | None,
        entries: tuple[Entry, ...],
        compacted: Snapshot | None,
    ) -> None:
        if snap is not None:
            self.snapshot = snap  # installed: the log restarts after it
            self.log.clear()
        elif compacted is not None and compacted.index > self.snapshot.index:
            self.snapshot = compacted
            del self.log[: max(0, compacted.index - (self.log[0].index if self.log else 0) + 1)]
        if hs is not None:
            self.hard_state = hs
        entries = tuple(e for e in entries if e.index > self.snapshot.index)
        if entries and self.log and entries[0].index > self.log[-1].index + 1:
            raise ValueError("gap in simulated log")
        if entries and not self.log and entries[0].index != self.snapshot.index + 1:
            raise ValueError("gap after snapshot in simulated log")
        apply_entries(self.log, entries)
