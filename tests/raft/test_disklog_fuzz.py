"""Seeded fuzz of DiskStorage alone on CrashFS: random Raft-shaped writes (appends, suffix
rewrites above the commit, hard states, local compactions, installed snapshots), syncs, clean
reopens and power losses, against an in-memory reference.

After every crash: recovery never refuses (the crash model allows the crash); the recovered log
satisfies the invariants; every synced entry that no later write replaced survives; the
recovered commit is not below the synced one; the recovered hard state, snapshot and entries
are ones that were written. After every clean reopen: exactly the reference state.

CI: EPOCHGC_DISK_FUZZ unset runs 300 programs of 60 steps (~8 s);
EPOCHGC_DISK_FUZZ=<n> runs n programs (3000: 180,000 steps, ~75 s).
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from dataclasses import dataclass, field

import pytest

from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.fileio import CrashFS
from epochgc.impl.raft.messages import Entry, HardState, InitialState, Snapshot

PROGRAMS = int(os.environ.get("EPOCHGC_DISK_FUZZ", "300"))
STEPS = 60


@dataclass
class Ref:
    """The logical state a storage holds: snapshot, entries after it, hard state."""

    snap: Snapshot = field(default_factory=Snapshot)
    entries: list[Entry] = field(default_factory=list)
    hs: HardState = field(default_factory=HardState)

    def last(self) -> int:
        return self.entries[-1].index if self.entries else self.snap.index

    def last_term(self) -> int:
        return self.entries[-1].term if self.entries else self.snap.term

    def term(self, i: int) -> int:
        if i == self.snap.index:
            return self.snap.term
        return self.entries[i - self.snap.index - 1].term

    def copy(self) -> Ref:
        return Ref(self.snap, list(self.entries), self.hs)

    @staticmethod
    def of(init: InitialState) -> Ref:
        return Ref(init.snapshot, list(init.entries), init.hard_state)


def _base_dir() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else ""


def run_program(seed: int, base: str) -> dict[str, int]:
    rng = random.Random(seed)
    d = os.path.join(base, f"p{seed}")
    fs = CrashFS()
    seg = rng.choice([150, 400, 2000])
    st = DiskStorage(d, segment_bytes=seg, fs=fs)
    st.load()
    cur = Ref()  # everything written
    synced = Ref()  # as of the last sync
    touched = 1 << 62  # lowest index an unsynced write replaced (install: 0)
    written: dict[int, set[tuple[int, bytes]]] = {}  # every (term, data) written per index
    snaps = {(0, 0)}
    hss = {(0, 0)}
    counts = {"crashes": 0, "reopens": 0, "installs": 0, "compactions": 0, "syncs": 0}
    term = 1
    for step in range(STEPS):
        op = rng.random()
        hs = None
        snap_install = None
        compacted = None
        new: list[Entry] = []
        if op < 0.45:  # append, sometimes rewriting an uncommitted suffix
            lo = cur.last() + 1
            if cur.last() > max(cur.hs.commit, cur.snap.index) and rng.random() < 0.3:
                lo = rng.randint(max(cur.hs.commit, cur.snap.index) + 1, cur.last())
                term += 1
            elif rng.random() < 0.1:
                term += 1
            prev_term = cur.term(lo - 1) if lo - 1 >= cur.snap.index else 0
            t = max(term, prev_term)
            term = t
            n = rng.randint(1, 6)
            sizes = [0, 5, 40, 700]
            new = [Entry(i, t, 1, rng.randbytes(rng.choice(sizes))) for i in range(lo, lo + n)]
            last = new[-1].index
            commit = rng.randint(cur.hs.commit, last) if rng.random() < 0.6 else cur.hs.commit
            vote = cur.hs.vote if cur.hs.term == term else rng.randint(0, 3)
            hs = HardState(term, vote, commit)
        elif op < 0.55 and synced.hs.commit > cur.snap.index:  # local compaction
            c = rng.randint(cur.snap.index + 1, synced.hs.commit)
            compacted = Snapshot(c, cur.term(c), b"c%d" % c)
            counts["compactions"] += 1
        elif op < 0.6:  # a snapshot installed from the leader, maybe with entries after it
            i = max(cur.hs.commit, cur.snap.index) + rng.randint(1, 8)
            term += rng.randint(0, 2)
            snap_install = Snapshot(i, term, b"i%d" % i)
            new = [Entry(j, term, 1, b"n") for j in range(i + 1, i + 1 + rng.randint(0, 3))]
            hs = HardState(term, rng.randint(0, 3), i)
            counts["installs"] += 1
        elif op < 0.8:
            st.sync()
            synced = cur.copy()
            touched = 1 << 62
            counts["syncs"] += 1
            continue
        elif op < 0.9:
            fs.crash(rng)
            counts["crashes"] += 1
            st = DiskStorage(d, segment_bytes=seg, fs=fs)
            got = Ref.of(st.load())  # must not refuse
            _check_crash(seed, step, got, synced, touched, written, snaps, hss)
            cur, synced, touched = got.copy(), got.copy(), 1 << 62
            term = max(term, got.hs.term, got.last_term())
            continue
        else:
            st.close()
            counts["reopens"] += 1
            st = DiskStorage(d, segment_bytes=seg, fs=fs)
            got = Ref.of(st.load())
            assert (got.snap, got.entries, got.hs) == (cur.snap, cur.entries, cur.hs), (seed, step)
            term = max(term, got.hs.term)
            synced = cur.copy()
            touched = 1 << 62
            continue
        # apply to the reference, then to the storage
        if snap_install is not None:
            cur.snap, cur.entries = snap_install, []
            touched = 0
            snaps.add((snap_install.index, snap_install.term))
        if compacted is not None:
            del cur.entries[: compacted.index - cur.snap.index]
            cur.snap = compacted
            snaps.add((compacted.index, compacted.term))
        if new:
            del cur.entries[max(0, new[0].index - cur.snap.index - 1) :]
            cur.entries.extend(new)
            touched = min(touched, new[0].index)
            for e in new:
                written.setdefault(e.index, set()).add((e.term, e.data))
        if hs is not None:
            cur.hs = hs
            hss.add((hs.term, hs.vote))
        st.write(hs, snap_install, new, compacted)
    st.abandon()
    shutil.rmtree(d, ignore_errors=True)
    return counts


def _check_crash(
    seed: int,
    step: int,
    got: Ref,
    synced: Ref,
    touched: int,
    written: dict[int, set[tuple[int, bytes]]],
    snaps: set[tuple[int, int]],
    hss: set[tuple[int, int]],
) -> None:
    where = f"seed {seed} step {step}"
    assert (got.snap.index, got.snap.term) in snaps, where
    assert got.snap.index >= synced.snap.index, where
    assert (got.hs.term, got.hs.vote) in hss and got.hs.term >= synced.hs.term, where
    assert got.hs.commit <= got.last(), where
    # A durable entry or snapshot of term T comes after a durable hard state of term >= T.
    assert got.hs.term >= max(got.snap.term, got.last_term()), where
    # Every synced entry no unsynced write replaced survives (or is under the snapshot).
    keep = min(synced.last(), touched - 1)
    assert got.last() >= keep or got.snap.index >= keep, (where, got.last(), keep)
    for e in synced.entries:
        if got.snap.index < e.index <= keep:
            assert got.entries[e.index - got.snap.index - 1] == e, (where, e.index)
    # Committed and synced: never lost.
    assert max(got.snap.index, got.last()) >= synced.hs.commit, where
    prev = got.snap.term
    for k, e in enumerate(got.entries):
        assert e.index == got.snap.index + 1 + k and e.term >= prev, where
        assert (e.term, e.data) in written.get(e.index, set()), (where, e.index)
        prev = e.term


@pytest.mark.parametrize("chunk", range(3))
def test_disk_log_fuzz_with_crashes(chunk: int) -> None:
    base = tempfile.mkdtemp(dir=_base_dir() or None)
    totals: dict[str, int] = {}
    try:
        for seed in range(chunk, PROGRAMS, 3):
            for k, v in run_program(seed, base).items():
                totals[k] = totals.get(k, 0) + v
    finally:
        shutil.rmtree(base, ignore_errors=True)
    # The programs do exercise what they claim to.
    assert totals["crashes"] > 50 and totals["installs"] > 10 and totals["compactions"] > 10
