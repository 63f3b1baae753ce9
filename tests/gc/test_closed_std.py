"""newuser13 Q12 (issue 41): `gc` started with its stdout closed (`>&-`, as some cron and
daemon set-ups start jobs) ended in a Python traceback (`'NoneType' object has no attribute
'flush'`), exit 1, after a round whose record says done, 0; with stderr closed (`2>&-`) on
an S3 store it exited 1 at once. A closed stdout is a reader gone from the start: the
command exits with its work's code (the exit-code table's rule). Real processes, their
descriptor closed before exec; rounds that need no Spark (blocked: exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import simple_cluster, write_partitions
from tests.store.s3server import DUMMY_AWS_ENV

ROOT = Path(__file__).resolve().parents[2]


def _blocked_store(root: Path) -> None:
    simple_cluster(LocalStore(root, create=True), 50)
    write_partitions(LocalStore(root), 100, ["t/0", "t/1", "late/0"])  # late/0: no report


def _run(args: list[str], closed: int, cwd: Path, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    """`epochgc ARGS` with descriptor `closed` (1 or 2) closed, the other captured."""
    def close() -> None:
        os.close(closed)

    keep = {"stderr": subprocess.PIPE} if closed == 1 else {"stdout": subprocess.PIPE}
    return subprocess.run([sys.executable, "-m", "epochgc", *args], cwd=cwd,
                          env=dict(env or os.environ, PYTHONPATH=str(ROOT)),
                          preexec_fn=close, text=True, timeout=300, check=False,
                          **keep)  # type: ignore[call-overload]


def test_gc_with_stdout_closed_exits_with_its_rounds_code(tmp_path: Path) -> None:
    _blocked_store(tmp_path / "s")
    args = ["gc", "--store", str(tmp_path / "s"), "--grace", "1s",
            "--i-know-grace-is-short"]
    for more in ([], ["-q"], ["--json"], ["--dry-run", "-q"]):
        p = _run([*args, *more], 1, tmp_path)
        assert p.returncode == 2, (more, p.stderr)  # blocked, as with stdout open
        assert "Traceback" not in p.stderr, p.stderr
    # A command whose output is its work exits 1 when that output went nowhere, as with
    # `| head` (the rule; newuser13 Q12's LOW: `gc-admin show >&-` exited 0).
    healthy = tmp_path / "h"
    simple_cluster(LocalStore(healthy, create=True), 50, now=time.time())
    p = _run(["gc-admin", "show", "--store", str(healthy)], 1, tmp_path)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr


def test_gc_on_s3_with_stderr_closed_runs(tmp_path: Path, moto_endpoint: str) -> None:
    """Its round runs and ends as with stderr open (blocked, 2), its summary on stdout."""
    pytest.importorskip("boto3")
    from epochgc.impl.store.s3 import S3Store
    from tests.store.s3server import new_bucket

    bucket = new_bucket(moto_endpoint)
    store = S3Store(bucket, "p1", endpoint_url=moto_endpoint)
    simple_cluster(store, 50)
    write_partitions(store, 100, ["t/0", "t/1", "late/0"])
    store.close()
    p = _run(["gc", "--store", f"s3://{bucket}/p1", "--s3-endpoint", moto_endpoint,
              "--grace", "1s", "--i-know-grace-is-short"], 2, tmp_path,
             env=dict(os.environ, **DUMMY_AWS_ENV))
    assert p.returncode == 2, p.stdout
    assert "no inactive epoch reported for: late/0" in p.stdout, p.stdout
