"""newuser10 L10: the Spark JVM a command launches keeps its files (the block manager's
`blockmgr-*`, Spark's `spark-*` scratch, java.io.tmpdir) in a directory of the command's
own (`session.spark_scratch`), which the command removes once the JVM is gone. The JVM
gets it as SPARK_LOCAL_DIRS, the setting Spark lets nothing override; an operator's own
SPARK_LOCAL_DIRS (a larger disk) still says where it is made. The Spark side, a JVM killed
mid-run: tests/impl/test_signal_matrix.py `test_a_jvm_killed_mid_run_leaves_nothing_in_tmpdir`
(EPOCHGC_SIGNALS=full)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from epochgc.impl.gc.session import spark_scratch


def test_the_scratch_is_made_in_tmpdir_and_handed_to_spark(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Set, not deleted: restored (or removed) after the test, which `spark_scratch` sets.
    monkeypatch.setenv("SPARK_LOCAL_DIRS", "")  # empty: not set, as spark_scratch reads it
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # what TMPDIR sets
    scratch = Path(spark_scratch())
    assert scratch.parent == tmp_path and scratch.name.startswith("epochgc-spark-")
    assert os.environ["SPARK_LOCAL_DIRS"] == str(scratch)


def test_the_operators_spark_local_dirs_say_where(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big, other = tmp_path / "big", tmp_path / "other"
    big.mkdir()
    other.mkdir()
    monkeypatch.setenv("SPARK_LOCAL_DIRS", f"{big},{other}")
    scratch = Path(spark_scratch())
    assert scratch.parent == big, scratch
    assert os.environ["SPARK_LOCAL_DIRS"] == str(scratch)
    inside = Path(spark_scratch(tmp_path / "other"))  # the demo's: in its own directory
    assert inside.parent == other
