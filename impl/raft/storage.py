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
    """What the host persists a Ready through. The contract, in etcd-raft's manner (its
    Storage interface and "Usage" section of raft/doc.go): what the caller may rely on, and
    what it must do.

    The caller (the host) calls `load` once before anything else, then, for each Ready:
    `write` (snapshot, hard state, entries, in that order inside the call), then `sync` (or
    `sync_all` over several storages), and only after `sync` returned sends the messages that
    depend on it (votes, append acknowledgements) or reports anything as persisted. A
    StorageFailed from any call is final: the caller stops using the storage (and the node
    stops); it never retries the call, never acknowledges anything written since the last
    `sync` that returned."""

    def load(self) -> InitialState:
        """Recover the durable state (after a clean stop, a kill or a power loss).

        Relies on: nothing but the files. Returns: the hard state, snapshot and entries that
        are on the device (never what only a page cache holds: after a failed fsync the
        kernel keeps unwritten pages cached and clean), made durable before it returns, so
        the caller may treat all of it as stable (acknowledge it without writing it again).
        Every call after the first returns the same state. Raises StorageCorruption if the
        durable state is damaged beyond a crash's torn tail (the caller must not start;
        rebuild the node from a peer), StorageFailed if the device reports an error (stop;
        a later restart may succeed)."""
        ...

    def write(
        self,
        hard_state: HardState | None,
        snapshot: Snapshot | None,
        entries: Sequence[Entry],
        compacted: Snapshot | None = None,
    ) -> None:
        """Buffer one Ready's worth of state; nothing of it is durable until `sync` returns.

        The caller must: pass entries contiguous with the log (a first index at or below the
        last replaces the suffix from there: the core only does that from the first
        conflicting entry); a hard state whose commit is within the log after this write;
        `snapshot` only past the current snapshot (installed from the leader: the log
        restarts after it), `compacted` only at or below the applied index (a local
        compaction: entries up to its index are dropped, the rest kept). After a power loss
        before `sync`, any prefix of the calls since the last `sync` may survive, in order,
        but no durable hard state ever commits an entry that did not survive with it."""
        ...

    def sync(self) -> None:
        """Make everything written so far durable (one barrier per Ready batch).

        When it returns, every earlier `write` survives a power loss. If it raises
        (StorageFailed) nothing since the last successful `sync` may be acknowledged, the
        storage refuses every later call, and the caller must stop; a retry could return
        success for pages the kernel dropped or never wrote."""
        ...

    def close(self) -> None:
        """Sync (unless failed) and release the files; the storage is not used again."""
        ...


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
    get one barrier between them, any other storage its own `sync`.

    Same contract as `Storage.sync` for each of them: when it returns all are durable; if it
    raises, every storage in the failed barrier has failed for good (the node stops)."""
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
