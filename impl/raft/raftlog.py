"""The in-memory Raft log of one node: a snapshot point plus the entries after it.

The core keeps every entry after the last snapshot in memory (the application bounds that by
compacting); Storage is only a durable sink that rebuilds this object after a restart.
Three cursors move here: `stable` (persisted by the host), `committed` and `applied`
(handed to the host for applying).
"""

from __future__ import annotations

from collections.abc import Sequence

from epochgc.impl.raft.messages import Entry, Snapshot


class LogInvariantError(AssertionError):
    """The core was asked to do something Raft forbids (e.g. truncate a committed entry)."""


class RaftLog:
    def __init__(
        self, snapshot: Snapshot, entries: Sequence[Entry], commit: int, origin: str = ""
    ) -> None:
        self.snapshot = snapshot
        self.entries: list[Entry] = []
        for e in entries:
            if e.index <= snapshot.index:
                continue
            if e.index != snapshot.index + 1 + len(self.entries):
                raise LogInvariantError(f"recovered log has a gap at index {e.index}")
            self.entries.append(e)
        last = self.last_index()
        if commit > last:
            # etcd panics here too: the durable log lost entries that were committed.
            raise LogInvariantError(
                f"recovered commit {commit} is past the last entry {last} of "
                f"{origin or 'the recovered log'}: committed entries were lost"
            )
        self.committed = max(snapshot.index, commit)
        self.applied = snapshot.index
        self.stable = last  # everything recovered from storage is durable
        self.unstable_from = last + 1  # first index not yet handed to the host to persist
        # Bumped by every mutation of snapshot, entries or committed: the simulator's
        # per-event check skips a replica whose (role, term, version) it has checked.
        self.version = 0
        # Bumped when entries already in the log are dropped from its end or replaced (a
        # truncating append, a snapshot restore): while it stands still, the entries a
        # checker has verified are still there (or compacted away), so it verifies only
        # the ones appended since.
        self.rewrites = 0

    # ---- queries -------------------------------------------------------------------------

    @property
    def first_index(self) -> int:
        return self.snapshot.index + 1

    def last_index(self) -> int:
        return self.snapshot.index + len(self.entries)

    def last_term(self) -> int:
        return self.entries[-1].term if self.entries else self.snapshot.term

    def term(self, index: int) -> int | None:
        """Term of the entry at index; None if compacted away or beyond the end."""
        off = index - self.snapshot.index
        if off == 0:
            return self.snapshot.term
        if off < 0 or off > len(self.entries):
            return None
        return self.entries[off - 1].term

    def match_term(self, index: int, term: int) -> bool:
        return self.term(index) == term

    def slice(self, lo: int, hi: int, max_bytes: int | None = None) -> list[Entry]:
        """Entries [lo, hi); lo must be >= first_index. At least one entry if any."""
        base = self.snapshot.index + 1
        out = self.entries[lo - base : hi - base]
        if max_bytes is None or not out:
            return out
        size = 0
        for i, e in enumerate(out):
            size += len(e.data) + 24
            if size > max_bytes and i > 0:
                return out[:i]
        return out

    def is_up_to_date(self, last_index: int, last_term: int) -> bool:
        """Is a candidate's log (last_index, last_term) at least as up to date as ours?"""
        mine = self.last_term()
        return last_term > mine or (last_term == mine and last_index >= self.last_index())

    def find_conflict(self, entries: Sequence[Entry]) -> int:
        """Index of the first entry that conflicts with or extends our log; 0 if none."""
        for e in entries:
            if not self.match_term(e.index, e.term):
                return e.index
        return 0

    def unstable_entries(self) -> list[Entry]:
        return self.slice(self.unstable_from, self.last_index() + 1)

    def next_committed(self) -> list[Entry]:
        lo = max(self.applied + 1, self.first_index)
        return self.slice(lo, self.committed + 1) if self.committed >= lo else []

    # ---- mutations -----------------------------------------------------------------------

    def append(self, entries: Sequence[Entry]) -> None:
        """Append, first truncating our log from entries[0].index (the first conflict)."""
        if not entries:
            return
        first = entries[0].index
        if first <= self.committed:
            raise LogInvariantError(
                f"truncating committed entry {first} (committed={self.committed})"
            )
        if first > self.last_index() + 1:
            raise LogInvariantError(f"gap: appending {first} after {self.last_index()}")
        if first <= self.last_index():
            del self.entries[first - self.snapshot.index - 1 :]
            self.rewrites += 1
        self.entries.extend(entries)
        self.version += 1
        if first < self.unstable_from:
            self.unstable_from = first
        if first <= self.stable:
            self.stable = first - 1

    def maybe_append(
        self, prev_index: int, prev_term: int, commit: int, entries: Sequence[Entry]
    ) -> int | None:
        """The follower side of AppendEntries; returns the last new index or None (reject)."""
        if not self.match_term(prev_index, prev_term):
            return None
        last_new = prev_index + len(entries)
        ci = self.find_conflict(entries)
        if ci:
            self.append(entries[ci - prev_index - 1 :])
        # Commit never passes what this message proved we share with the leader.
        self.commit_to(min(commit, last_new))
        return last_new

    def commit_to(self, index: int) -> None:
        if index > self.committed:
            if index > self.last_index():
                raise LogInvariantError(f"commit {index} beyond last {self.last_index()}")
            self.committed = index
            self.version += 1

    def maybe_commit(self, index: int, term: int) -> bool:
        """Leader commit rule: only an entry of the current term commits by counting."""
        if index > self.committed and self.term(index) == term:
            self.committed = index
            self.version += 1
            return True
        return False

    def stable_to(self, index: int, term: int) -> None:
        if self.term(index) == term and index > self.stable:
            self.stable = index
        if self.unstable_from <= self.stable:
            self.unstable_from = self.stable + 1

    def restore(self, snap: Snapshot) -> None:
        """Replace the whole log by a snapshot received from the leader."""
        self.snapshot = snap
        self.entries = []
        self.committed = snap.index
        self.version += 1
        self.rewrites += 1
        self.applied = snap.index
        self.stable = snap.index
        self.unstable_from = snap.index + 1

    def compact(self, snap: Snapshot) -> None:
        """Drop entries up to snap.index (already applied) and remember the snapshot."""
        if snap.index <= self.snapshot.index:
            return
        if snap.index > self.applied or self.term(snap.index) != snap.term:
            raise LogInvariantError(f"cannot compact to {snap.index}")
        del self.entries[: snap.index - self.snapshot.index]
        self.snapshot = snap
        self.version += 1
