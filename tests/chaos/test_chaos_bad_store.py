"""newuser16 S5: `chaos` against a bucket that does not exist, or a closed port, ran its whole
nemesis against it and then failed (12.5 s; 52.5 s for the closed port), and its "result"
line was false: `faults=- leader_changes=0` after a SIGSTOP and 2 leader changes. Now the
store is checked before any node starts, as `cluster start` checks it, and a run that fails
later (the store gone mid-run) says so on its result line, with the counts of what happened."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.exitcodes import ExitCode
from tests.store.s3server import DUMMY_AWS_ENV, free_port, new_bucket

pytest.importorskip("boto3")

ROOT = Path(__file__).resolve().parents[2]
_BOUND_S = 600.0  # a run that never gets there fails the test; never reached otherwise


def _chaos(tmp_path: Path, store: str, *extra: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, ["chaos", "--seconds", "10", "--gc-engine", "model",
                                  "--quiet", "--store", store, "--out",
                                  str(tmp_path / "out"), *extra])
    return r.exit_code, r.output


def test_a_bucket_that_does_not_exist_is_refused_before_any_node(
        tmp_path: Path, moto_endpoint: str) -> None:
    """Old code: the cluster up, the nemesis run, then "list ... NoSuchBucket" (rc 1)."""
    code, out = _chaos(tmp_path, "s3://nobucket/p", "--s3-endpoint", moto_endpoint)
    assert code == ExitCode.FAILED, out
    assert out.splitlines()[-1].startswith(
        "epochgc chaos: error: store s3://nobucket/p at "), out
    assert "cannot write to it" in out and "NoSuchBucket" in out, out
    assert not (tmp_path / "out").exists(), "the run began"


def test_a_closed_port_is_refused_before_any_node(tmp_path: Path) -> None:
    """Old code: 52.5 s of a run against it, then an error."""
    code, out = _chaos(tmp_path, "s3://gcb/chaos", "--s3-endpoint",
                       f"http://127.0.0.1:{free_port()}")
    assert code == ExitCode.FAILED, out
    assert "cannot write to it" in out and "Could not connect" in out, out
    assert not (tmp_path / "out").exists(), "the run began"


def test_an_s3_store_without_an_endpoint_is_a_usage_error(tmp_path: Path) -> None:
    """Old code: a ValueError from the run's set-up, after its history had begun."""
    code, out = _chaos(tmp_path, "s3://gcb/chaos")
    assert code == ExitCode.USAGE, out
    assert "needs --s3-endpoint" in out and not (tmp_path / "out").exists(), out


# --- a store gone mid-run (a whole run, ~15-40 s: tox -e s3faults) ---

@pytest.fixture
def own_moto(tmp_path: Path) -> Iterator[str]:
    """A moto server of this test's own, in its own process: its reset (every bucket gone)
    touches no other test's server."""
    port = free_port()
    env = {**os.environ, **DUMMY_AWS_ENV}
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1",
                             "-p", str(port)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        limit = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < limit, "moto never listened"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_a_store_gone_mid_run_says_so_on_a_true_result_line(
        tmp_path: Path, own_moto: str) -> None:
    """The bucket is removed (moto's reset) once the nemesis plan is announced. Old code:
    "result ... faults=- leader_changes=0" although the history showed the nemesis's
    faults and leader changes, and nothing on the line said the run had failed."""
    bucket = new_bucket(own_moto)
    out = tmp_path / "out"
    env = {**os.environ, **DUMMY_AWS_ENV, "PYTHONPATH": str(ROOT)}
    with open(tmp_path / "err", "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "epochgc", "chaos", "--seconds", "10", "--gc-engine",
             "model", "--store", f"s3://{bucket}/p", "--s3-endpoint", own_moto,
             "--out", str(out)], env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        history = out / "history.txt"
        limit = time.monotonic() + _BOUND_S
        while not (history.exists() and "nemesis plan" in history.read_text()):
            assert proc.poll() is None, (tmp_path / "err").read_text()[-3000:]
            assert time.monotonic() < limit, "the run never began its work"
            time.sleep(0.1)
        urllib.request.urlopen(urllib.request.Request(f"{own_moto}/moto-api/reset",
                                                      method="POST"), timeout=60).close()
        proc.wait(timeout=_BOUND_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = history.read_text()
    assert proc.returncode == ExitCode.FAILED, (tmp_path / "err").read_text()[-3000:]
    result = [line for line in text.splitlines() if "  result  " in line]
    assert len(result) == 1, text
    assert "ended=error before the checks: " in result[0], result[0]
    episodes = len(re.findall(r"  nemesis episode  ", text))
    if episodes:
        assert "faults=-" not in result[0], result[0]
    seen = re.findall(r"leader change\(s\) seen  total=(\d+)", text)
    assert f"leader_changes={seen[-1] if seen else 0} " in result[0], (seen, result[0])


def test_a_missing_local_store_is_made_as_cluster_start_makes_it(tmp_path: Path) -> None:
    """newuser20 W6: `chaos --store DIR` with DIR missing exited 1 ("cannot open it: store
    directory ... does not exist"), where `cluster start` makes a missing local store.
    Now it is made (and named by the run). The run is then stopped before it begins by an
    --out it cannot make (64), so the test runs no cluster."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    store = tmp_path / "new" / "store"
    code, out = _chaos(tmp_path, str(store), "--out", str(blocker / "out"))
    assert "does not exist" not in out, out
    assert store.is_dir(), out
    from epochgc.impl.cluster.owner import read_owner
    from epochgc.impl.store.local import LocalStore

    owner = read_owner(LocalStore(store))
    assert owner is not None and "epochgc chaos" in owner.data_dir, owner
    assert code == ExitCode.USAGE and "--out" in out, out
