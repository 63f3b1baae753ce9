"""newuser9 K12: one node of three frozen (SIGSTOP: a VM pause, a stalled disk, a
debugger). Its listening socket still accepts (the kernel completes the handshake for a
stopped process), so a client without a bound waited on it: `produce`, `consume` and
`barrier` silently for minutes, `topic create`, `advance-epoch`, `cluster status` 30 s
each. Now a read is bounded (client.QUICK_S), the node is said once ("node 1
(127.0.0.1:PORT) does not answer; trying the others") and asked last from then on.

The cluster is real (three broker processes on their disk logs); node 1 is really
stopped, and continued in a `finally`. The waits are bounds, generous for a loaded
machine; no fixed sleep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from epochgc.impl.cluster.local import LocalCluster

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))
# The old code took 30 s per attempt, several attempts per command; the new one ~10 s.
BOUND_S = float(os.environ.get("EPOCHGC_TEST_BOUND_S", "300"))


def _epochgc(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "epochgc", *argv], capture_output=True,
                          text=True, timeout=timeout, env=ENV)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Path]:
    d = tmp_path / "c"
    r = _epochgc("cluster", "start", "--data-dir", str(d), "--store", str(tmp_path / "store"),
                 "--nodes", "3", "--partitions", "t/0")
    assert r.returncode == 0, r.stderr
    try:
        yield d
    finally:
        _epochgc("cluster", "stop", "--data-dir", str(d))


def test_a_frozen_node_is_said_and_passed_over(cluster: Path) -> None:
    r = _epochgc("produce", "--data-dir", str(cluster), "--partition", "t/0", "--count", "5")
    assert r.returncode == 0, r.stderr
    lc = LocalCluster(cluster)
    pid = int(lc.meta["pids"]["1"])
    port = lc.client_addrs()[1][1]
    os.kill(pid, signal.SIGSTOP)
    try:
        said = f"node 1 (127.0.0.1:{port}) does not answer; trying the others"
        try:
            r = _epochgc("consume", "--data-dir", str(cluster), "--partition", "t/0",
                         timeout=BOUND_S)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"consume still waiting after {BOUND_S} s: {e.stderr!r}")
        assert r.returncode == 0 and said in r.stderr, (r.returncode, r.stderr)
        assert '"records": 5' in r.stdout, r.stdout
        try:
            r = _epochgc("produce", "--data-dir", str(cluster), "--partition", "t/0",
                         "--count", "3", timeout=BOUND_S)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"produce still waiting after {BOUND_S} s: {e.stderr!r}")
        assert r.returncode == 0 and said in r.stderr, (r.returncode, r.stderr)
    finally:
        os.kill(pid, signal.SIGCONT)
