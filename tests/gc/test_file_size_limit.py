"""`gc` under a file-size limit (newuser25 H5): `ulimit -f` (setrlimit(2) RLIMIT_FSIZE: a
write past it fails EFBIG, SIGXFSZ ignored as Python ignores it). A --list file cut at
the limit was left, unsaid, a part that reads as the whole, and the next run refused the
existing file; Spark's own temporary file failing said `OSError: [Errno 27] File too
large`, naming nothing."""

from __future__ import annotations

import errno
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from epochgc.impl.gc.job import describe
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key
from tests.gc.helpers import HOUR, NOW, put_local, simple_cluster

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))
LIMIT = 50_000  # bytes: past Spark's start-up files, under the list of 2,000 keys
HINT = ("File too large (a file reached this process's file-size limit, `ulimit -f`, or "
        "the largest file its file system holds)")


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


@pytest.mark.spark
def test_a_list_cut_by_the_limit_is_removed_and_said(tmp_path: Path) -> None:
    root = tmp_path / "store"
    simple_cluster(LocalStore(root, create=True), 100)
    for i in range(2000):  # ~40 bytes a key: the list passes LIMIT
        put_local(root, format_key(i % 1000, 50, f"k{i}"), age=12 * HOUR + 60)
    target = tmp_path / "list.txt"
    p = subprocess.run(
        [sys.executable, "-m", "epochgc", "gc", "--store", str(root), "--now", str(NOW),
         "--i-know-now-is-ahead", "--dry-run", "-q", "--list", str(target)],
        env=ENV, capture_output=True, text=True, timeout=600, preexec_fn=_limited)
    assert p.returncode == 1, p.stderr
    # Old code: "--list file ...: [Errno 27] File too large", the 50,000 bytes left.
    assert p.stderr.splitlines()[-1] == (
        f"epochgc gc: error: --list file {target}: {HINT}; the partial list was removed; "
        "nothing was deleted"), p.stderr
    assert not target.exists()


def _raised_in(filename: str) -> OSError:
    code = compile("raise OSError(errno.EFBIG, 'File too large')", filename, "exec")
    try:
        exec(code, {"errno": errno})
    except OSError as e:
        return e
    raise AssertionError("not raised")


def test_an_os_error_is_said_in_words_and_spark_s_own_is_named() -> None:
    """Old code: `OSError: [Errno 27] File too large` for both."""
    assert describe(_raised_in("/venv/site-packages/pyspark/core/context.py")) == (
        f"Spark's driver: {HINT}")
    assert describe(_raised_in("/work/impl/gc/elsewhere.py")) == HINT
    assert describe(KeyError("x")) == "KeyError: 'x'"  # not an OSError: its class says what
