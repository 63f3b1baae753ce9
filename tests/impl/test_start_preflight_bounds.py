"""newuser11 M1/M2/M3 (issue 41): `cluster start`'s store preflight (one PUT and one
DELETE of a probe object) on an S3 endpoint that accepts and never answers
(`tests/store/blackhole`) was silent for 11 minutes (botocore's 60 s read timeout times
its adaptive attempts), where `gc` on the same endpoint says "waiting for ... no answer yet"
and ends within its bound; an unreachable endpoint took 26 s for the same reason. And a
refused start left the empty data directory it had made.

Deterministic: the bounds are the command's own (`impl/store/patience.py`) made small
through the environment; `HANG_S` bounds a hang, it is not a timing assumption."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.exitcodes import ExitCode
from tests.gc.test_silent_endpoint import HANG_S, _env
from tests.store.blackhole import blackhole

pytest.importorskip("boto3")


def test_a_silent_endpoint_is_said_and_refused_within_the_bound(tmp_path: Path) -> None:
    """Old code: `subprocess.TimeoutExpired` (each PUT attempt waited 60 s, 10 attempts),
    no line before the end; the data directory was left."""
    with blackhole() as hole:
        argv = [sys.executable, "-m", "epochgc", "cluster", "start", "--data-dir", "run",
                "--store", "s3://gcb/x", "--s3-endpoint", hole.endpoint]
        proc = subprocess.run(argv, env=_env(0.5, 2, 0.2), cwd=tmp_path, capture_output=True,
                              text=True, timeout=HANG_S)
        accepted = hole.accepted
    assert proc.returncode == ExitCode.FAILED, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert any(line.startswith(f"cluster start: waiting for {hole.endpoint}: no answer yet "
                               "(the preflight write of '_cluster/preflight/")
               for line in lines), proc.stderr
    last = lines[-1]
    assert last.startswith(f"epochgc cluster start: error: store s3://gcb/x at {hole.endpoint}: "
                           "cannot write to it: "
                           "put '_cluster/preflight/"), last
    assert last.endswith(f"in s3://gcb/x/ at {hole.endpoint}: no answer within 0.5 s "
                         "(2 attempts)"), last
    assert accepted <= 2, accepted  # the bound's attempts (old: 10, one connection each)
    assert not (tmp_path / "run").exists()


def test_a_refused_start_removes_only_the_empty_dirs_it_made(tmp_path: Path,
                                                             moto_endpoint: str) -> None:
    """Old code: `a/b/run` was made and left empty by a start the preflight refused. A
    data directory that existed before stays, as does anything in it."""
    made = tmp_path / "a" / "b" / "run"
    before = tmp_path / "kept"
    before.mkdir()
    for data_dir in (made, before):
        r = CliRunner().invoke(main, ["cluster", "start", "--data-dir", str(data_dir),
                                      "--store", "s3://no-such-bucket-m3/p",
                                      "--s3-endpoint", moto_endpoint])
        assert r.exit_code == ExitCode.FAILED, r.output
        assert "NoSuchBucket" in r.output
    assert not (tmp_path / "a").exists()
    assert before.is_dir() and not list(before.iterdir())
