"""Issue 27: silent damage to a group's directory. Every kind below must be refused with the
file and offset named (StorageCorruption, .path inside the directory, .offset within the file)
or recover exactly the undamaged state; and recovery must delete nothing (every file's bytes
are still somewhere under the directory afterwards, a refusal changes nothing at all).

The damage is applied to the files by their framing only (8-byte magic, then records of
u32 length | u32 crc | u32 header crc | u8 kind | body), so the module also runs against the
format-3 code of before (see the report of issue 27 for which kinds that accepted)."""

from __future__ import annotations

import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.messages import Entry, HardState, InitialState, Snapshot
from epochgc.impl.raft.storage import StorageCorruption

KIND_ENTRY, KIND_STATE = 1, 3


def ents(lo: int, hi: int, term: int, group: int) -> list[Entry]:
    return [Entry(i, term, 1, bytes([(7 * i + group) % 250 + 1]) * 10) for i in range(lo, hi + 1)]


def build_plain(d: Path, group: int) -> None:
    """Four segments or more: entries 1-14, an overwrite of 5-6 in term 2, a compaction at 3,
    hard states of terms 1 and 2 (the same shape for every group and seed; `group` seeds the
    entry data)."""
    s = DiskStorage(str(d), segment_bytes=300)
    s.write(HardState(1, 1, 0), None, ents(1, 6, 1, group))
    s.sync()
    s.write(HardState(2, 0, 4), None, ents(5, 9, 2, group))
    s.sync()
    s.write(None, None, [], compacted=Snapshot(3, 1, b"state@3 of %d" % group))
    s.sync()
    s.write(HardState(2, 0, 8), None, ents(10, 14, 2, group))
    s.close()


def build_install(d: Path, group: int) -> None:
    """A snapshot installed at (10, 2) with the leader's 11-12, then 13-20 over more segments."""
    s = DiskStorage(str(d), segment_bytes=300)
    s.write(HardState(1, 1, 0), None, ents(1, 6, 1, group))
    s.sync()
    s.write(HardState(2, 0, 12), Snapshot(10, 2, b"leader@10 %d" % group), ents(11, 12, 2, group))
    s.sync()
    s.write(HardState(2, 0, 18), None, ents(13, 20, 2, group))
    s.close()


def build_install_only(d: Path, group: int) -> None:
    """An install at (10, 2) with the leader's 11-12 (not yet committed) in its segment alone."""
    s = DiskStorage(str(d))
    s.write(HardState(1, 1, 0), None, ents(1, 6, 1, group))
    s.sync()
    s.write(HardState(2, 0, 10), Snapshot(10, 2, b"leader@10 %d" % group), ents(11, 12, 2, group))
    s.close()


def build_single(d: Path, group: int) -> None:
    """One segment: entries 1-5 and a hard state."""
    s = DiskStorage(str(d))
    s.write(HardState(1, 1, 3), None, ents(1, 5, 1, group))
    s.close()


def another_copy(d: Path, build: Callable[[Path, int], None]) -> Path:
    """The same group's directory with another history of the same shape (a restore mix-up
    of two copies of one node's data)."""
    copy = d.parent / "copy" / d.name
    build(copy, 3)
    return copy


def segs(d: Path) -> list[Path]:
    return sorted(d.glob("*.seg"))


def records(p: Path) -> list[tuple[int, int, int]]:
    """(start, end, kind) of every record of a segment."""
    data = p.read_bytes()
    out, off = [], 8
    while off + 12 <= len(data):
        (n,) = struct.unpack_from(">I", data, off)
        n = (n & 0x1FFFFFFF) + 1  # (format 5: marker bits, trailer byte)
        out.append((off, off + 12 + n, data[off + 12]))
        off += 12 + n
    return out


def flip(p: Path, at: int) -> None:
    data = bytearray(p.read_bytes())
    data[at] ^= 0x10
    p.write_bytes(bytes(data))


def splice(p: Path, start: int, end: int, new: bytes) -> None:
    data = p.read_bytes()
    p.write_bytes(data[:start] + new + data[end:])


def rec_bytes(p: Path, k: int) -> bytes:
    start, end, _ = records(p)[k]
    return p.read_bytes()[start:end]


def kth(p: Path, kind: int, k: int) -> int:
    """Index (in records(p)) of the k-th record of `kind`."""
    return [i for i, r in enumerate(records(p)) if r[2] == kind][k]


# ---- the kinds of damage: each gets the damaged group's directory and a foreign one --------


def flip_old_segment(d: Path, other: Path) -> None:
    first = segs(d)[0]
    start = records(first)[kth(first, KIND_ENTRY, 0)][0]
    flip(first, start + 20)


def flip_last_segment(d: Path, other: Path) -> None:
    last = segs(d)[-1]
    end = records(last)[1][1]
    flip(last, end - 3)  # in a record that is followed by others


def flip_snapshot(d: Path, other: Path) -> None:
    flip(d / "snapshot", len((d / "snapshot").read_bytes()) - 2)


def foreign_record(d: Path, other: Path) -> None:
    # The same entry (same index, term and size) from another group's log, at its place.
    last, theirs = segs(d)[-1], segs(other)[-1]
    k = kth(last, KIND_ENTRY, 1)
    start, end, _ = records(last)[k]
    splice(last, start, end, rec_bytes(theirs, k))


def foreign_segment(d: Path, other: Path) -> None:
    mine = segs(d)[1]
    shutil.copyfile(other / mine.name, mine)


def foreign_snapshot(d: Path, other: Path) -> None:
    shutil.copyfile(other / "snapshot", d / "snapshot")


def duplicated_record(d: Path, other: Path) -> None:
    last = segs(d)[-1]
    start, end, _ = records(last)[kth(last, KIND_ENTRY, 1)]
    splice(last, end, end, last.read_bytes()[start:end])


def earlier_record_reappended(d: Path, other: Path) -> None:
    last = segs(d)[-1]
    rec = rec_bytes(last, kth(last, KIND_ENTRY, 0))
    with open(last, "ab") as f:
        f.write(rec)


def older_state_reappended(d: Path, other: Path) -> None:
    # The first STATE record (term 1, vote 1) appended after the term-2 ones: term goes back.
    first, last = segs(d)[0], segs(d)[-1]
    rec = rec_bytes(first, kth(first, KIND_STATE, 0))
    with open(last, "ab") as f:
        f.write(rec)


def swapped_records(d: Path, other: Path) -> None:
    # Entry 6 of term 1 and its replacement, entry 6 of term 2 (same size), change places.
    pos: dict[tuple[int, int], tuple[Path, int, int]] = {}
    for p in segs(d):
        data = p.read_bytes()
        for start, end, kind in records(p):
            if kind == KIND_ENTRY:
                index, term = struct.unpack_from(">QQ", data, start + 13)
                pos[(index, term)] = (p, start, end)
    (pa, sa, ea), (pb, sb, eb) = pos[(6, 1)], pos[(6, 2)]
    ra, rb = pa.read_bytes()[sa:ea], pb.read_bytes()[sb:eb]
    splice(pa, sa, ea, rb)
    splice(pb, sb, eb, ra)


def segment_from_another_copy(d: Path, other: Path) -> None:
    # Valid in every field of its own (group, sequence, where the log ends, its records'
    # chain): only the chain from the previous segment tells it does not belong.
    last = segs(d)[-1]
    shutil.copyfile(another_copy(d, build_plain) / last.name, last)


def foreign_sole_segment(d: Path, other: Path) -> None:
    # (on a one-segment log) no other segment to chain from: the group in START tells.
    (mine,) = segs(d)
    shutil.copyfile(other / mine.name, mine)


def snapshot_from_another_copy(d: Path, other: Path) -> None:
    # (on the install workload) same group, same install sequence: the install tag tells.
    shutil.copyfile(another_copy(d, build_install) / "snapshot", d / "snapshot")


def install_segment_renamed_lower(d: Path, other: Path) -> None:
    # (on the install-only workload) the install's segment under a number before the
    # install: replayed as a discarded pre-install segment, the fsynced (and acknowledged)
    # entries 11-12 would vanish. Only the sequence named in START tells.
    (fresh,) = segs(d)
    fresh.rename(d / f"{int(fresh.stem) - 1:016d}.seg")


def hard_state_goes_back(d: Path, other: Path) -> None:
    # Written through the storage (a buggy writer): a vote in term 5, then a hard state of
    # term 3, still above every entry's term: the node would vote again in term 5.
    s = DiskStorage(str(d), segment_bytes=300)
    s.write(HardState(5, 2, 8), None, [])
    s.write(HardState(3, 0, 8), None, [])
    s.close()


def dropped_record(d: Path, other: Path) -> None:
    # The last STATE record of the log goes (the hard state silently older).
    for p in reversed(segs(d)):
        states = [r for r in records(p) if r[2] == KIND_STATE]
        if states:
            start, end, _ = states[-1]
            splice(p, start, end, b"")
            return
    raise AssertionError("no STATE record")


def dropped_middle_segment(d: Path, other: Path) -> None:
    segs(d)[len(segs(d)) // 2].unlink()


def segment_copied_next(d: Path, other: Path) -> None:
    last = segs(d)[-1]
    shutil.copyfile(last, d / f"{int(last.stem) + 1:016d}.seg")


def install_segment_copied_next(d: Path, other: Path) -> None:
    # (on the install workload) the FRESH segment under the number after the last one
    fresh = segs(d)[0]
    shutil.copyfile(fresh, d / f"{int(segs(d)[-1].stem) + 1:016d}.seg")


def stray_segment_with_gap(d: Path, other: Path) -> None:
    shutil.copyfile(segs(d)[-2], d / f"{int(segs(d)[-1].stem) + 5:016d}.seg")


def stray_segment_without_gap(d: Path, other: Path) -> None:
    theirs = segs(other)[-1]
    shutil.copyfile(theirs, d / f"{int(segs(d)[-1].stem) + 1:016d}.seg")


def truncated_mid_record_old_segment(d: Path, other: Path) -> None:
    first = segs(d)[0]
    start, end, _ = records(first)[-1]
    splice(first, (start + end) // 2, len(first.read_bytes()), b"")


def zeroed_sector_old_segment(d: Path, other: Path) -> None:
    first = segs(d)[0]
    start, end, _ = records(first)[2]
    splice(first, start, end, bytes(end - start))


def stale_hard_state(d: Path, other: Path) -> None:
    # Appended through the storage itself (a buggy writer, or a hard state restored from an
    # old backup): term 1 after entries of term 2.
    s = DiskStorage(str(d), segment_bytes=300)
    s.write(HardState(1, 1, 2), None, [])
    s.close()


BUILD = {
    install_segment_copied_next: build_install,
    snapshot_from_another_copy: build_install,
    foreign_sole_segment: build_single,
    install_segment_renamed_lower: build_install_only,
}
KINDS: dict[str, tuple[Callable[[Path, int], None], Callable[[Path, Path], None]]] = {
    f.__name__: (BUILD.get(f, build_plain), f)
    for f in (
        flip_old_segment,
        flip_last_segment,
        flip_snapshot,
        foreign_record,
        foreign_segment,
        foreign_snapshot,
        duplicated_record,
        earlier_record_reappended,
        older_state_reappended,
        swapped_records,
        dropped_record,
        dropped_middle_segment,
        segment_copied_next,
        install_segment_copied_next,
        stray_segment_with_gap,
        stray_segment_without_gap,
        truncated_mid_record_old_segment,
        zeroed_sector_old_segment,
        stale_hard_state,
        segment_from_another_copy,
        foreign_sole_segment,
        snapshot_from_another_copy,
        hard_state_goes_back,
        install_segment_renamed_lower,
    )
}


def tree(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def state(init: InitialState) -> tuple[object, ...]:
    return init.hard_state, init.snapshot, init.entries


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_damage_is_refused_with_file_and_offset_or_changes_nothing(
    tmp_path: Path, kind: str
) -> None:
    build, damage = KINDS[kind]
    mine, theirs, pristine = tmp_path / "g1", tmp_path / "g2", tmp_path / "ref" / "g1"
    build(mine, 1)
    build(theirs, 2)
    shutil.copytree(mine, pristine)
    want = state(DiskStorage(str(pristine)).load())
    damage(mine, theirs)
    before = tree(mine)
    try:
        got = DiskStorage(str(mine)).load()
    except StorageCorruption as e:
        assert Path(e.path).parent == mine and Path(e.path).name in before, e
        assert 0 <= e.offset <= len(before[Path(e.path).name]), e
        assert tree(mine) == before, "a refusal changed the directory"
        return
    assert state(got) == want, f"{kind} accepted: recovered another state"
    after = set(tree(mine).values())
    assert all(b in after for b in before.values()), f"{kind}: recovery deleted evidence"


def test_at_least_fifteen_kinds() -> None:
    assert len(KINDS) >= 15
