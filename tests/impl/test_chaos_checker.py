"""The chaos run's Raft log comparison (`impl.chaos.checker.raft_divergences`) at its edges
(issue 31): a replica whose log no longer loads is a divergence, never skipped; the entry AT
a replica's commit index is compared, the one after it is not."""

from __future__ import annotations

from pathlib import Path

from epochgc.impl.chaos.checker import raft_divergences
from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.messages import Entry, HardState

SAME = [Entry(1, 1, data=b"a" * 40), Entry(2, 1, data=b"b" * 40), Entry(3, 1, data=b"c" * 40)]


def _log(d: Path, entries: list[Entry], commit: int) -> None:
    s = DiskStorage(str(d))
    s.load()
    # The hard state's term covers its entries' (the disk log refuses a stale one).
    s.write(HardState(max(e.term for e in entries), 0, commit), None, entries)
    s.sync()
    s.close()


def test_an_unreadable_replica_is_a_divergence(tmp_path: Path) -> None:
    for n in (1, 2):
        _log(tmp_path / f"n{n}" / "g7", SAME, 3)
    dirs = {n: tmp_path / f"n{n}" for n in (1, 2)}
    assert raft_divergences(dirs) == []
    seg = sorted((tmp_path / "n2" / "g7").iterdir())[0]
    raw = bytearray(seg.read_bytes())
    raw[len(raw) // 3] ^= 0xFF  # a flipped bit in a committed record, not a torn tail
    seg.write_bytes(bytes(raw))
    divs = raft_divergences(dirs)
    assert [(d.group, d.nodes) for d in divs] == [(7, (2,))], divs
    assert "unreadable" in divs[0].detail


def test_the_entry_at_the_commit_index_is_compared_the_next_is_not(tmp_path: Path) -> None:
    other = [SAME[0], SAME[1], Entry(3, 2, data=b"z" * 40)]
    _log(tmp_path / "n1" / "g7", SAME, 3)
    _log(tmp_path / "n2" / "g7", other, 2)  # index 3 differs but n2 has not committed it
    dirs = {n: tmp_path / f"n{n}" for n in (1, 2)}
    assert raft_divergences(dirs) == []
    _log(tmp_path / "n3" / "g7", other, 3)  # committed at exactly index 3: a divergence
    dirs[3] = tmp_path / "n3"
    divs = raft_divergences(dirs)
    assert [(d.index, d.nodes) for d in divs] == [(3, (1, 3))], divs


# Every count that is a violation (the run must fail); the others (faults injected, leader
# changes, rounds, objects, unexpected exits the nemesis explains) describe the run.
VIOLATIONS = ("lost", "in_use_deleted", "trace_divergences", "raft_divergences",
              "survived_disk_faults", "gc_paused_deleted", "gc_final_failed")


def test_every_violation_count_fails_the_run() -> None:
    """Issue 42 survivor 4: `ChaosResult.ok()` is what `epochgc chaos` exits by. A run with
    any violation, alone, is not ok (gc_paused_deleted=71 passed when ok() forgot it:
    invisible on correct code, fatal on broken code); a clean run with every descriptive
    count set is ok."""
    from dataclasses import fields

    from epochgc.impl.chaos.run import ChaosResult

    names = {f.name for f in fields(ChaosResult)}
    assert set(VIOLATIONS) <= names
    for v in VIOLATIONS:
        assert not ChaosResult(**{v: 71}).ok(), f"a run with {v}=71 passes"
    rest = {f.name: 5 for f in fields(ChaosResult)
            if f.name not in VIOLATIONS and f.type in (int, "int")}
    assert ChaosResult(**rest).ok(), rest


def test_committed_entries_of_one_term_that_differ_in_bytes_diverge(tmp_path: Path) -> None:
    """Issue 42: the comparison is of the whole entry; two replicas that committed entries
    of the same term at one index with different bytes diverge (a comparison by term alone
    would be kinder than Raft's log matching allows)."""
    other = [SAME[0], Entry(2, 1, data=b"B" * 40), SAME[2]]
    _log(tmp_path / "n1" / "g7", SAME, 3)
    _log(tmp_path / "n2" / "g7", other, 3)
    divs = raft_divergences({n: tmp_path / f"n{n}" for n in (1, 2)})
    assert [(d.group, d.index, d.nodes) for d in divs] == [(7, 2, (1, 2))], divs
