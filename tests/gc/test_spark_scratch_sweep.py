"""newuser23 F7: `kill -9` of a `gc` driver left its empty `$TMPDIR/epochgc-spark-*`
directory for good (SIGKILL runs no exit path), and no later round removed it. A new
scratch directory now carries its driver's identity (`journal.Driver`), and making one
removes those of drivers known gone; nothing else (a live driver's, one with no owner
file, a link) is touched."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from epochgc.impl.gc.journal import Driver
from epochgc.impl.gc.session import SCRATCH_OWNER, SCRATCH_PREFIX, spark_scratch


def _owned(parent: Path, name: str, owner: Driver) -> Path:
    d = parent / f"{SCRATCH_PREFIX}{name}"
    d.mkdir()
    (d / SCRATCH_OWNER).write_text(json.dumps(dataclasses.asdict(owner)))
    return d


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="proc(5) needed")
def test_a_new_scratch_directory_removes_those_of_drivers_known_gone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_LOCAL_DIRS", "")  # restored after: spark_scratch sets it
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    dead_owner = Driver.of(child.pid)  # as the killed driver wrote it, while it ran
    child.kill()
    child.wait()
    assert dead_owner.gone()
    dead = _owned(tmp_path, "killed", dead_owner)
    (dead / "blockmgr-x").mkdir()  # what Spark left in it
    live = _owned(tmp_path, "running", Driver.this_process())
    unowned = tmp_path / f"{SCRATCH_PREFIX}unowned"
    unowned.mkdir()
    other = tmp_path / "other-dir"
    other.mkdir()
    (other / SCRATCH_OWNER).write_text(json.dumps(dataclasses.asdict(dead_owner)))
    new = Path(spark_scratch(tmp_path))
    assert not dead.exists()  # old code: kept for good
    assert live.exists() and unowned.exists() and other.exists() and new.exists()
    assert json.loads((new / SCRATCH_OWNER).read_text())["pid"] == os.getpid()
