"""newuser10 L6: `epochgc gc` whose conditional-write probe waits on a DeleteObjects that
does not answer. Old code: the probe ran after the round began (a signal only asked the
round to stop: "ending the round..." then 60 s of silence per attempt), and nothing said
it waited. Now it runs before the round begins: a line says it waits, a SIGINT ends the
command at once, 130, naming the probe's object, and nothing of the round is written.

Deterministic: the signal is sent once the proxy holds the DeleteObjects and the command
said it waits; the probe's read timeout is 10 minutes here, so only the signal can end it.
`HANG_S` bounds a hang, it is not a timing assumption."""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from epochgc.impl.store.s3 import PROBE_KEY, S3Store
from tests.gc.helpers import signal_when_ready, simple_cluster
from tests.gc.test_silent_endpoint import _env
from tests.store.s3proxy import Call, Fault, s3_proxy
from tests.store.s3server import new_bucket

pytest.importorskip("boto3")
HANG_S = 120.0


def test_gc_interrupted_in_its_probe_ends_at_once_naming_the_object(
        moto_endpoint: str, release: threading.Event, tmp_path: Path) -> None:
    bucket = new_bucket(moto_endpoint)
    simple_cluster(S3Store(bucket, "p1", endpoint_url=moto_endpoint), 50, now=time.time())
    held = threading.Event()

    def hold_deletes(call: Call) -> Fault | None:
        if call.method == "POST":  # DeleteObjects: never answered while gc waits
            held.set()
            release.wait(HANG_S * 2)
        return None

    err = tmp_path / "err"
    with s3_proxy(moto_endpoint, faults=hold_deletes) as proxy:
        argv = [sys.executable, "-m", "epochgc", "gc", "--store", f"s3://{bucket}/p1",
                "--s3-endpoint", proxy.endpoint, "--grace", "0s", "--i-know-grace-is-short"]
        code = signal_when_ready(
            argv, env=_env(600, 1, 0.05), cwd=tmp_path, err=err, sig=signal.SIGINT,
            bound_s=HANG_S,
            ready=lambda: held.is_set() and "conditional-write probe" in err.read_text(),
            not_ready="no waiting line for the probe")
        release.set()
    text = err.read_text()
    assert code == 130, text
    assert "Traceback" not in text and "ending the round" not in text, text
    assert any("may be left" in ln and f"{PROBE_KEY}-" in ln for ln in text.splitlines()), text
    assert text.strip().splitlines()[-1].startswith("gc: interrupted (SIGINT) before the "
                                                     "round started"), text
    store = S3Store(bucket, "p1", endpoint_url=moto_endpoint)
    assert store.head("_cluster/gc/lease.json") is None  # no lease: the round never began
