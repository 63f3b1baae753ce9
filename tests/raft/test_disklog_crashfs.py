"""CrashFS, the power-loss model DiskStorage is tested under: it never touches fsynced bytes
or synced directory entries, and it does exercise every kind of loss it documents."""

from __future__ import annotations

import errno
import os
import random
from pathlib import Path

import pytest

from epochgc.impl.raft.fileio import CrashFS


def _append(fs: CrashFS, path: Path, data: bytes, create: bool = False) -> int:
    fd = fs.open_append(str(path), create=create)
    assert fs.write(fd, data) == len(data)
    return fd


def test_fsynced_prefix_survives_every_crash_and_the_rest_varies(tmp_path: Path) -> None:
    outcomes = set()
    for seed in range(60):
        d = tmp_path / str(seed)
        d.mkdir()
        fs = CrashFS()
        fd = _append(fs, d / "f", b"a" * 1000, create=True)
        fs.fsync(fd)
        fs.fsync_dir(str(d))
        fs.write(fd, b"b" * 2000)
        fs.crash(random.Random(seed))
        data = (d / "f").read_bytes()
        assert data[:1000] == b"a" * 1000
        tail = data[1000:]
        assert len(tail) <= 2000
        kinds = {c for c in tail}
        assert kinds <= {ord("b"), 0}
        if tail and 0 in kinds:  # zeros only from a sector boundary on, to the end
            z = tail.index(0)
            assert not any(tail[z:]) and ((1000 + z) % 512 == 0 or z == 0)
        outcomes.add(("trunc" if 0 not in kinds else "zero", len(tail) == 2000))
    assert {o[0] for o in outcomes} == {"trunc", "zero"}


def test_unsynced_create_may_vanish_and_synced_one_never(tmp_path: Path) -> None:
    vanished = 0
    for seed in range(40):
        d = tmp_path / str(seed)
        d.mkdir()
        fs = CrashFS()
        fs.close(_append(fs, d / "kept", b"x", create=True))
        fs.fsync_dir(str(d))
        fd = _append(fs, d / "new", b"y", create=True)
        fs.fsync(fd)  # the data is durable, the directory entry is not
        fs.crash(random.Random(seed))
        assert (d / "kept").exists()
        vanished += not (d / "new").exists()
    assert 0 < vanished < 40


def test_unsynced_unlink_and_rename_may_be_undone(tmp_path: Path) -> None:
    back = renamed_back = 0
    for seed in range(40):
        d = tmp_path / str(seed)
        d.mkdir()
        fs = CrashFS()
        for name, body in (("old", b"1" * 10), ("target", b"T"), ("tmp", b"N")):
            fd = _append(fs, d / name, body, create=True)
            fs.fsync(fd)
            fs.close(fd)
        fs.fsync_dir(str(d))
        fs.unlink(str(d / "old"))
        fs.replace(str(d / "tmp"), str(d / "target"))
        fs.crash(random.Random(seed))
        if (d / "old").exists():
            back += 1
            assert (d / "old").read_bytes() == b"1" * 10
        if (d / "tmp").exists():
            renamed_back += 1
            assert (d / "target").read_bytes() == b"T" and (d / "tmp").read_bytes() == b"N"
        else:
            assert (d / "target").read_bytes() == b"N"
    assert 0 < back < 40 and 0 < renamed_back < 40


def test_syncfs_makes_everything_durable(tmp_path: Path) -> None:
    for seed in range(20):
        d = tmp_path / str(seed)
        d.mkdir()
        fs = CrashFS()
        _append(fs, d / "f", b"z" * 3000, create=True)
        fd = fs.open_fs(str(d))
        fs.syncfs(fd)
        fs.close(fd)
        fs.crash(random.Random(seed))
        assert (d / "f").read_bytes() == b"z" * 3000


def test_fault_knobs(tmp_path: Path) -> None:
    fs = CrashFS(space_left=5)
    fd = fs.open_append(str(tmp_path / "f"), create=True)
    assert fs.write(fd, b"0123456789") == 5
    with pytest.raises(OSError) as ei:
        fs.write(fd, b"x")
    assert ei.value.errno == errno.ENOSPC
    fs.fail_fsync = True
    with pytest.raises(OSError):
        fs.fsync(fd)
    fs.close(fd)
    assert os.path.getsize(tmp_path / "f") == 5
