"""newuser13 Q6 without a signal, end to end: the S3 server goes silent mid-round (its
process SIGSTOPped: connections are accepted by the kernel, nothing answers). The safety
monitor stops the round ("cluster health unknown"); before, each of the driver's writes
after it (STOP, the lease's replace, END, the journal's read-back) got botocore's retries,
~150 s each: 15.5 minutes, past the round's 10-minute lease, and no line for 214 s.
Now a stop bounds them as a signal's does: STOP gets one attempt, and nothing is sent
once it went unanswered.

Real: moto's server in a process of its own (so that it can be stopped), `epochgc gc` run
as a user runs it. Asserts what was said and the exit code, never a duration (the bound
only catches a hang). Slow (a Spark start-up, the monitor's three 10 s looks, the stage's
grace: ~2 minutes under load): `tox -e s3faults` runs it (tests/deep_cases.py); CI keeps
tests/gc/test_monitor_stop_bounds.py (the same bound, a real client, a blackhole)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from epochgc.impl.store.s3 import S3Store
from epochgc.model.keys import format_key
from tests.gc.helpers import simple_cluster
from tests.interrupted import by_signal
from tests.store.s3server import DUMMY_AWS_ENV, free_port, set_dummy_aws_env

pytest.importorskip("moto")

ROOT = Path(__file__).resolve().parents[2]
BOUND_S = 900.0  # a bound for a hang, not a timing assumption
KEYS = 6000


@pytest.mark.spark
@pytest.mark.parametrize("operator", [None, signal.SIGINT], ids=["monitor", "then-SIGINT"])
def test_a_store_gone_silent_mid_round_ends_the_round_without_retrying_it(
        tmp_path: Path, operator: signal.Signals | None) -> None:
    """`then-SIGINT`: newuser14 R1, one Ctrl-C (SIGINT to the group) once the monitor said
    it stops: exit 1 and "SIGINT again" before; now the command ends by the SIGINT (a
    script running it stops), having said it and what its record keeps."""
    import boto3

    set_dummy_aws_env()
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        limit = time.monotonic() + BOUND_S
        while True:  # until it answers
            try:
                boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="gcb")
                break
            except Exception:
                assert time.monotonic() < limit and server.poll() is None, "moto never answered"
                time.sleep(0.1)
        store = S3Store("gcb", "l0", endpoint_url=endpoint, max_pool_connections=16)
        simple_cluster(store, 100, now=time.time())
        keys = [format_key(i % 1000, 50, f"k{i}") for i in range(KEYS)]
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda k: store.put(k, b"x"), keys))
        store.close()
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("AWS_") and not k.startswith("EPOCHGC_")}
        env.update(DUMMY_AWS_ENV, PYTHONPATH=str(ROOT))
        proc = subprocess.Popen(
            [sys.executable, "-m", "epochgc", "gc", "--store", "s3://gcb/l0",
             "--s3-endpoint", endpoint, "--grace", "0s", "--i-know-grace-is-short",
             "--max-report-age", "1h"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
            cwd=tmp_path, start_new_session=True)
        lines: list[str] = []
        try:
            assert proc.stderr is not None
            for line in proc.stderr:
                lines.append(line.rstrip("\n"))
                if "### silent" not in lines and re.search(r"[1-9][0-9,]* deleted", line):
                    server.send_signal(signal.SIGSTOP)  # silent from now on
                    lines.append("### silent")
                if (operator is not None and "### signal" not in lines
                        and "safety monitor" in line and "stopping" in line):
                    os.killpg(proc.pid, operator)  # a terminal's Ctrl-C
                    lines.append("### signal")
            code = proc.wait(timeout=BOUND_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    finally:
        server.send_signal(signal.SIGCONT)
        server.terminate()
        server.wait()
    said = "\n".join(lines)
    assert "### silent" in said, said  # the store went silent while the round deleted
    if operator is None:
        assert code == 1, said  # the monitor's stop, incomplete: the table's 1
    else:
        assert "### signal" in said, said
        assert code == by_signal(operator), said  # the operator's signal decides (R1)
        assert "SIGINT again" not in said, said
        assert ("the command then ends by SIGINT (exit code 130)" in said
                or "SIGINT after the round's stop (unhealthy): stopped at once" in said), said
    assert "Traceback" not in said, said
    # Each write after the stop: one attempt at most. Before: "(put '.../STOP', 140 s)",
    # "(replace '_cluster/gc/lease.json', 150 s)", "(create '.../END.json', 150 s)".
    waits = [int(m.group(1)) for m in re.finditer(r"no answer yet \((?:put|replace|create)"
                                                   r" '[^']*', (\d+) s\)", said)]
    assert all(w <= 10 for w in waits), said
    assert "not sent: the round is stopping and the store did not answer since" in said, said
    # What to do is said on the last line
    assert "gc-admin reset --force" in lines[-1], said
