"""Issue 41, newuser10 L4: a store that stops answering once the round holds its lease. Ctrl-C
was acknowledged and then nothing for minutes: the round's START PUT was retried with a
60 s read timeout, 10 attempts, while the signal waited, with no line at all.

Real: a Spark round (local mode) on moto behind the loopback proxy; from the round's START
PUT on, the proxy reads every request and never answers (`Fault.NEVER_ANSWER`). The test
sends SIGINT once the command has said it is waiting for that PUT (its waiting line), so the
signal lands while the driver's write is under way, whatever the machine's speed. It
asserts the exit code and the lines, never a duration: `HANG_S` only catches a hang (the
old code waited 10 x 60 s). Then the proxy answers again and `gc-admin show` tells the
truth: no record, the lease held by a round that died; `reset --force` removes it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from epochgc.impl.gc.journal import START
from epochgc.impl.store.patience import READ_TIMEOUT_ENV, SAY_AFTER_ENV
from epochgc.impl.store.s3 import S3Store
from epochgc.model.keys import format_key
from tests.gc.helpers import signal_when_ready, simple_cluster
from tests.store.s3proxy import Call, Fault, s3_proxy
from tests.store.s3server import DUMMY_AWS_ENV, new_bucket

pytest.importorskip("boto3")

ROOT = Path(__file__).resolve().parents[2]
HANG_S = 240.0  # a bound for a hang, not a timing assumption


class _SilentFromStart:
    """The fault plan: from the round's START PUT on, no request is answered, until
    `speak`."""

    def __init__(self) -> None:
        self.silent = threading.Event()
        self.spoken = False

    def __call__(self, call: Call) -> Fault | None:
        if not self.spoken and call.kind == "put" and call.key.endswith("/" + START):
            self.silent.set()
        return Fault.NEVER_ANSWER if self.silent.is_set() and not self.spoken else None

    def speak(self) -> None:
        self.spoken = True


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWS_") and not k.startswith("EPOCHGC_")}
    # Each attempt waits 5 s for its answer; a wait is said after 1 s.
    return dict(env, PYTHONPATH=str(ROOT), **DUMMY_AWS_ENV,
                **{READ_TIMEOUT_ENV: "5", SAY_AFTER_ENV: "1"})


@pytest.mark.spark
def test_a_sigint_while_start_waits_on_a_silent_store_exits_130_saying_so(
        moto_endpoint: str, tmp_path: Path) -> None:
    """Old code: "still running 240 s after SIGINT" (the START PUT retried, 60 s each)."""
    bucket = new_bucket(moto_endpoint)
    direct = S3Store(bucket, "p1", endpoint_url=moto_endpoint)
    simple_cluster(direct, 100, now=time.time())  # the reports are fresh: no --now
    eligible = {format_key(p, 50, f"k{p}") for p in range(0, 1000, 250)}
    for key in eligible:
        direct.put(key, b"x")
    plan = _SilentFromStart()
    err = tmp_path / "err"
    with s3_proxy(moto_endpoint, faults=plan) as proxy:
        where = ["--store", f"s3://{bucket}/p1", "--s3-endpoint", proxy.endpoint]
        argv = [sys.executable, "-m", "epochgc", "gc", *where, "--grace", "0s",
                "--i-know-grace-is-short", "--tasks", "1"]
        waiting = f"gc: waiting for {proxy.endpoint}: no answer yet (put "

        def ready() -> bool:
            return plan.silent.is_set() and waiting in err.read_text()

        code = signal_when_ready(argv, env=_env(), cwd=tmp_path, err=err, ready=ready,
                                 sig=signal.SIGINT, bound_s=HANG_S,
                                 not_ready="the START PUT's waiting line")
        text = err.read_text()
        assert code == 130, text
        assert "Traceback" not in text, text
        # Spark is up by then: the stop's line says what it does now (L4's line said
        # "stopping Spark's start-up").
        assert "gc: SIGINT: stopping: no key deleted yet; ending the round..." in text, text
        assert "not sent: the round is stopping and the store did not answer since" in text, text
        record_line = [ln for ln in text.splitlines()
                       if "deletion record not written: the store does not answer" in ln]
        assert record_line and record_line[0].endswith(
            "nothing was deleted (no journal was started); `epochgc gc-admin reset --force`"
            " (same --store) removes its lease"), text
        plan.speak()
        admin = [sys.executable, "-m", "epochgc", "gc-admin"]
        show = subprocess.run([*admin, "show", *where], env=_env(), cwd=tmp_path,
                              capture_output=True, text=True, timeout=HANG_S)
        assert "the round died" in show.stdout + show.stderr, show
        reset = subprocess.run([*admin, "reset", "--force", *where], env=_env(), cwd=tmp_path,
                               capture_output=True, text=True, timeout=HANG_S)
        assert reset.returncode == 0, reset
    assert {o.key for o in direct.list_all("") if o.key in eligible} == eligible  # none gone
    direct.close()
