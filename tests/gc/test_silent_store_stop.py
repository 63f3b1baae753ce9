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
from collections.abc import Callable
from pathlib import Path

import pytest

from epochgc.impl.gc.journal import START
from epochgc.impl.gc.stage import STOP_GRACE_ENV
from epochgc.impl.store.patience import READ_TIMEOUT_ENV, SAY_AFTER_ENV
from epochgc.impl.store.s3 import S3Store
from epochgc.model.keys import format_key
from tests.gc.helpers import signal_when_ready, simple_cluster
from tests.interrupted import by_signal
from tests.store.s3proxy import Call, Fault, s3_proxy
from tests.store.s3server import DUMMY_AWS_ENV, new_bucket

pytest.importorskip("boto3")

ROOT = Path(__file__).resolve().parents[2]
HANG_S = 240.0  # a bound for a hang, not a timing assumption


class _SilentFrom:
    """The fault plan: from the first request `first(call)` holds for on, no request is
    answered, until `speak`."""

    def __init__(self, first: Callable[[Call], bool]) -> None:
        self.first = first
        self.silent = threading.Event()
        self.spoken = False

    def __call__(self, call: Call) -> Fault | None:
        if not self.spoken and self.first(call):
            self.silent.set()
        return Fault.NEVER_ANSWER if self.silent.is_set() and not self.spoken else None

    def speak(self) -> None:
        self.spoken = True


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWS_") and not k.startswith("EPOCHGC_")}
    # Each attempt of the driver waits 5 s for its answer; a wait is said after 1 s; a
    # stopped stage's batches get 2 s before the job is cancelled.
    return dict(env, PYTHONPATH=str(ROOT), **DUMMY_AWS_ENV,
                **{READ_TIMEOUT_ENV: "5", SAY_AFTER_ENV: "1", STOP_GRACE_ENV: "2"})


def _start_put(call: Call) -> bool:
    return call.kind == "put" and call.key.endswith("/" + START)


def _data_list(call: Call) -> bool:
    return call.kind == "list" and "level_zero" in call.query


@pytest.mark.spark
@pytest.mark.parametrize("when", [
    "start",
    pytest.param("listing", marks=pytest.mark.skipif(
        os.environ.get("EPOCHGC_SIGNALS") != "full",
        reason="EPOCHGC_SIGNALS=full: one more Spark round (~20 s)")),
])
def test_a_sigint_on_a_store_gone_silent_exits_130_saying_so(
        moto_endpoint: str, tmp_path: Path, when: str) -> None:
    """`start`: silent from the START PUT on (L4); `listing`: from the tasks' first
    listing of the data on (L5). Old code: "still running 90 s after SIGINT" (the START PUT
    retried, 60 s each, no line)."""
    bucket = new_bucket(moto_endpoint)
    direct = S3Store(bucket, "p1", endpoint_url=moto_endpoint)
    simple_cluster(direct, 100, now=time.time())  # the reports are fresh: no --now
    eligible = {format_key(p, 50, f"k{p}") for p in range(0, 1000, 250)}
    for key in eligible:
        direct.put(key, b"x")
    plan = _SilentFrom(_start_put if when == "start" else _data_list)
    err = tmp_path / "err"
    with s3_proxy(moto_endpoint, faults=plan) as proxy:
        where = ["--store", f"s3://{bucket}/p1", "--s3-endpoint", proxy.endpoint]
        argv = [sys.executable, "-m", "epochgc", "gc", *where, "--grace", "0s",
                "--i-know-grace-is-short", "--tasks", "1"]
        waiting = f"gc: waiting for {proxy.endpoint}: no answer yet (put "

        def ready() -> bool:
            # START: once the driver says it waits for that PUT (a signal while the
            # driver's write is under way); listing: once the tasks' listing is held.
            return plan.silent.is_set() and (when != "start" or waiting in err.read_text())

        code = signal_when_ready(argv, env=_env(), cwd=tmp_path, err=err, ready=ready,
                                 sig=signal.SIGINT, bound_s=HANG_S,
                                 not_ready=f"the store's silence from the {when} on")
        text = err.read_text()
        assert code == by_signal(signal.SIGINT), text
        assert "Traceback" not in text, text
        assert "not sent: the round is stopping and the store did not answer since" in text, text
        record_line = [ln for ln in text.splitlines()
                       if "deletion record not written: the store does not answer" in ln]
        assert record_line, text
        if when == "start":
            # Spark is up by then: the stop's line says what it does now (L4's line said
            # "stopping Spark's start-up").
            assert "gc: SIGINT: stopping: no key deleted yet; ending the round..." in text, text
            assert record_line[0].endswith(
                "nothing was deleted (no journal was started); `epochgc gc-admin reset "
                "--force` (same --store) removes its lease"), text
        else:
            assert "gc: SIGINT: stopping: no new delete batch;" in text, text
            assert "`epochgc gc-admin reset --force` (same --store) records it later from "\
                   "its journal _cluster/gc/journal/" in record_line[0], text
        plan.speak()
        admin = [sys.executable, "-m", "epochgc", "gc-admin"]
        show = subprocess.run([*admin, "show", *where], env=_env(), cwd=tmp_path,
                              capture_output=True, text=True, timeout=HANG_S)
        assert "the round ended without releasing it" in show.stdout + show.stderr, show
        reset = subprocess.run([*admin, "reset", "--force", *where], env=_env(), cwd=tmp_path,
                               capture_output=True, text=True, timeout=HANG_S)
        assert reset.returncode == 0, reset
        if when != "start":  # the dead round is recorded from its journal: driver-gone
            assert "recorded dead round" in reset.stdout + reset.stderr, reset
    assert {o.key for o in direct.list_all("") if o.key in eligible} == eligible  # none gone
    direct.close()
