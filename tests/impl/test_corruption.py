"""Corrupted Raft storage on a broker node: a byte flipped in the middle of a log segment
(not in its last record), or in a snapshot file, of the controller group or of a partition
group. The node must refuse to start, naming the file (and, for a segment, the offset), and
must never start serving with partial state.

Segment records are `u32 length | u32 crc32(payload) | payload` after an 8-byte magic
(impl/raft/disklog.py)."""

from __future__ import annotations

import shutil
import struct
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.cluster.local import LocalCluster
from epochgc.impl.raft.diskformat import _MARK, _REC

MAGIC_LEN = 8
CONTROLLER = "g1"
PARTITION = "g1001"  # t/0: group 1000 + its creation revision (the first controller command)


HEADER = _REC.size  # record header: length, payload crc, header crc
LIVENESS_S = 300.0  # a bound for a hang, not a timing assumption


def records(seg: Path) -> list[tuple[int, int]]:
    """(offset, payload length) of every record in a segment."""
    data = seg.read_bytes()
    out, off = [], MAGIC_LEN
    while off + HEADER <= len(data):
        (word,) = struct.unpack_from(">I", data, off)
        n = word & ~_MARK  # (format 5: the length word's top bits are a marker)
        out.append((off, n))
        off += HEADER + n + (1 if data[MAGIC_LEN - 1] >= 5 else 0)  # (format 5: a trailer byte)
    return out


def make_pristine(base: Path, snapshots: bool) -> tuple[Path, Path]:
    """A stopped 3-node cluster whose node 1 has several records in every group's last
    segment (and, with `snapshots`, a snapshot file in each group: one every 5 entries);
    returns (cluster dir, a copy of node 1's data)."""
    (base / "store").mkdir()
    lc = LocalCluster(base / "c")
    n1 = base / "c" / "n1"
    extra = ["--snapshot-interval", "5"] if snapshots else []
    lc.init(3, str(base / "store"), ["t/0"], 0.5, extra=extra)
    try:
        for n in lc.ids:
            lc.start(n)
        for _ in range(100):  # until the controller has created t/0 and it has a leader
            r = CliRunner().invoke(main, ["produce", "--data-dir", str(base / "c"),
                                          "--partition", "t/0", "--count", "2"])
            if r.exit_code == 0:
                break
            time.sleep(0.2)
        for _ in range(3):
            r = CliRunner().invoke(main, ["produce", "--data-dir", str(base / "c"),
                                          "--partition", "t/0", "--count", "2"])
            assert r.exit_code == 0, r.output
        # Until node 1 has what the tests need (reconciler and housekeeper entries, more
        # mints): a fixed 1.5 s sleep once, which a loaded machine may outlast. One more
        # than needed while it runs: the last may be half written.
        limit = time.monotonic() + LIVENESS_S
        while not _ready(n1, snapshots, 4):
            assert time.monotonic() < limit, f"node 1 never had {_state(n1)}"
            time.sleep(0.1)
    finally:
        lc.stop_all()
    for g in (CONTROLLER, PARTITION):
        assert (n1 / g / "snapshot").exists() == snapshots, g
        segs = sorted((n1 / g).glob("*.seg"))
        assert segs and len(records(segs[-1])) >= 3, g
    shutil.copytree(n1, base / "n1.pristine")
    return base / "c", base / "n1.pristine"


def _state(n1: Path) -> dict[str, tuple[bool, int]]:
    """Per group: (a snapshot file exists, records in its last segment)."""
    out = {}
    for g in (CONTROLLER, PARTITION):
        segs = sorted((n1 / g).glob("*.seg"))
        out[g] = ((n1 / g / "snapshot").exists(), len(records(segs[-1])) if segs else 0)
    return out


def _ready(n1: Path, snapshots: bool, least: int) -> bool:
    return all(snap == snapshots and n >= least for snap, n in _state(n1).values())


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Default settings: no snapshot yet, so partition groups are opened only once the
    controller log replays (the case a node must still check before serving)."""
    return make_pristine(tmp_path_factory.mktemp("corrupt"), snapshots=False)


@pytest.fixture(scope="module")
def pristine_snap(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_pristine(tmp_path_factory.mktemp("corrupt-snap"), snapshots=True)


def fresh_node1(pristine: tuple[Path, Path]) -> tuple[LocalCluster, Path]:
    cdir, copy = pristine
    shutil.rmtree(cdir / "n1")
    shutil.copytree(copy, cdir / "n1")
    return LocalCluster(cdir), cdir / "n1"


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def assert_refuses(lc: LocalCluster, *names: str) -> None:
    """Node 1 must fail to start (never print READY) with a message naming the file."""
    try:
        with pytest.raises(RuntimeError, match="refusing to start") as ei:
            pid = lc.start(1, timeout=30)
            time.sleep(2.0)  # it served: did it at least die afterwards?
            raise AssertionError(f"node 1 started (pid {pid}) on corrupted storage")
        for name in names:
            assert name in str(ei.value), str(ei.value)
    finally:
        lc.stop_all()


@pytest.mark.slow
@pytest.mark.parametrize("group", [CONTROLLER, PARTITION])
@pytest.mark.parametrize("where", ["payload", "length"])
def test_segment_byte_flipped_mid_file_refuses_to_start(
    pristine: tuple[Path, Path], group: str, where: str
) -> None:
    lc, n1 = fresh_node1(pristine)
    seg = sorted((n1 / group).glob("*.seg"))[-1]  # the LAST segment: the torn-tail one
    recs = records(seg)
    off, n = recs[len(recs) // 2]  # a middle record, never the last
    assert (off, n) != recs[-1]
    # payload: a data byte; length: the third byte of the u32 length (+-64 KiB: past EOF)
    flip(seg, off + HEADER + n // 2 if where == "payload" else off + 2)
    assert_refuses(lc, str(seg), f"offset {off}")


@pytest.mark.slow
@pytest.mark.parametrize("group", [CONTROLLER, PARTITION])
def test_snapshot_byte_flipped_refuses_to_start(
    pristine_snap: tuple[Path, Path], group: str
) -> None:
    lc, n1 = fresh_node1(pristine_snap)
    snap = n1 / group / "snapshot"
    flip(snap, snap.stat().st_size // 2)
    assert_refuses(lc, str(snap))
