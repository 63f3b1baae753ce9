"""Issue 27: a data directory of on-disk format 3 (tests/raft/fixtures/format3, written by the
code before format 4: g3 a plain log in two segments compacted at 10, g4 an installed snapshot
at 40, g5 and g6 crash images that code refused to start, see EXPECTED) starts, recovers
what the old code recovered (g5, g6: with the commit clamped), and is rewritten into format
4 with the old segments kept in quarantine/; a crash at any step of the rewrite leaves a
directory that starts and finishes it."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from epochgc.impl.raft.diskformat import FORMAT, MAGIC, QUARANTINE, SNAP_FORMAT
from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.fileio import CrashFS
from epochgc.impl.raft.messages import Entry, HardState
from epochgc.impl.raft.storage import StorageFailed

FIXTURES = Path(__file__).parent / "fixtures" / "format3"
# What the format-3 code recovered from each fixture: hard state, snapshot index, entries.
# g5 and g6 are crash images of issue 27 item 2 made by that code (old log 1-30, commit 5;
# one Ready: snapshot at 25, entries 26-28 of term 2, commit 28; power loss before the
# fsync): it refused both ("commit index 28 is past the last entry 25" / "... 27"). The
# upgrade starts them, the commit clamped to the log's end.
EXPECTED = {
    "g3": (HardState(1, 1, 25), 10, list(range(11, 34))),
    "g4": (HardState(2, 0, 44), 40, list(range(41, 46))),
    "g5": (HardState(2, 0, 25), 25, []),
    "g6": (HardState(2, 0, 27), 25, [26, 27]),
}


def shape(d: Path) -> tuple[HardState, int, list[int]]:
    init = DiskStorage(str(d)).load()
    return init.hard_state, init.snapshot.index, [e.index for e in init.entries]


def tree(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("group", sorted(EXPECTED))
def test_format_3_directory_starts_and_is_rewritten(tmp_path: Path, group: str) -> None:
    d = tmp_path / group
    shutil.copytree(FIXTURES / group, d)
    old = tree(d)
    assert all(v[7] == 3 for k, v in old.items() if k.endswith(".seg"))
    assert shape(d) == EXPECTED[group]
    now = tree(d)
    segs = [k for k in now if k.endswith(".seg") and "/" not in k]
    assert segs and all(now[k][:8] == MAGIC and MAGIC[7] == FORMAT for k in segs)
    assert now["snapshot"][4] == SNAP_FORMAT
    for k, v in old.items():  # every old segment kept, byte for byte
        if k.endswith(".seg"):
            assert now[f"{QUARANTINE}/{k}"] == v
    # The rewritten log is read again, and appended to.
    assert shape(d) == EXPECTED[group]
    s = DiskStorage(str(d))
    hs, snap, ents = EXPECTED[group]
    s.load()
    nxt = (ents[-1] if ents else snap) + 1
    s.write(hs, None, [Entry(nxt, hs.term, 1, b"after the upgrade")])
    s.close()
    assert shape(d) == (hs, snap, [*ents, nxt])


@pytest.mark.parametrize("group", sorted(EXPECTED))
def test_a_crash_at_any_write_of_the_upgrade_leaves_a_startable_directory(
    tmp_path: Path, group: str
) -> None:
    # The disk fills after k bytes of the rewrite (60 values of k up to twice the size), then
    # the power goes: the next start, with room again, completes the upgrade.
    size = sum(len(v) for v in tree(FIXTURES / group).values())
    failed = 0
    for k in range(0, 2 * size, max(1, size // 30)):
        d = tmp_path / str(k) / group
        shutil.copytree(FIXTURES / group, d)
        fs = CrashFS(space_left=k)
        try:
            DiskStorage(str(d), fs=fs).load()
        except StorageFailed:
            failed += 1
        fs.space_left = None
        fs.crash(random.Random(k))
        assert shape(d) == EXPECTED[group], k
        assert shape(d) == EXPECTED[group], k
        assert not [p for p in d.glob("*.seg") if p.read_bytes()[7] != FORMAT]
    assert failed > 3  # the rewrite was interrupted at several points
