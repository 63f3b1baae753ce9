"""newuser10 L3: `gc-admin pause` / `start` stopped by a signal after their write went out
said only "interrupted by SIGINT" (exit 130, read as "not done"), and the store was paused
(resumed) all the same. Now the line says the write may have been applied and where to
look. Real: moto behind the loopback proxy; the proxy sends the signal to the command when
the PUT of `_cluster/gc/admin.json` reaches it, then forwards it (the store applies it),
so the signal lands while the command waits for the answer to a write that is applied."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from epochgc.impl.gc.admin import ADMIN_KEY, read_admin_state
from epochgc.impl.store.s3 import S3Store
from tests.interrupted import by_signal
from tests.store.s3proxy import Call, S3Proxy, s3_proxy
from tests.store.s3server import DUMMY_AWS_ENV

pytest.importorskip("boto3")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bucket(moto_store_bucket: str) -> str:
    return moto_store_bucket


class _SignalOnPut:
    """The fault plan: the first PUT of the admin state sends `sig` to the command."""

    def __init__(self, bucket: str, sig: signal.Signals) -> None:
        self.path = f"/{bucket}/p1/{ADMIN_KEY}"
        self.sig = sig
        self.pid: int | None = None
        self.sent = False

    def __call__(self, call: Call) -> None:
        if (call.kind, call.key) == ("put", self.path) and not self.sent and self.pid:
            self.sent = True
            os.kill(self.pid, self.sig)


@pytest.fixture
def proxied(moto_endpoint: str, bucket: str) -> Iterator[tuple[S3Proxy, _SignalOnPut]]:
    plan = _SignalOnPut(bucket, signal.SIGINT)
    with s3_proxy(moto_endpoint, faults=plan) as proxy:
        yield proxy, plan


def _admin(proxy: S3Proxy, plan: _SignalOnPut, bucket: str, *args: str
           ) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWS_") and not k.startswith("EPOCHGC_")}
    env.update(PYTHONPATH=str(ROOT), **DUMMY_AWS_ENV)
    p = subprocess.Popen([sys.executable, "-m", "epochgc", "gc-admin", *args,
                          "--store", f"s3://{bucket}/p1", "--s3-endpoint", proxy.endpoint],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    plan.pid, plan.sent = p.pid, False
    out, err = p.communicate(timeout=300)
    assert proxy.wait_recorded(timeout_s=60)  # the PUT forwarded and answered
    return p.returncode, out, err


def test_a_signal_during_the_pause_and_resume_writes_says_they_may_be_written(
        proxied: tuple[S3Proxy, _SignalOnPut], bucket: str, moto_endpoint: str) -> None:
    """Old code: exit 130, stderr "epochgc gc-admin: interrupted by SIGINT" only, and
    `show` says "paused: yes"."""
    proxy, plan = proxied
    direct = S3Store(bucket, "p1", endpoint_url=moto_endpoint)
    look = f"`epochgc gc-admin show --store s3://{bucket}/p1 --s3-endpoint {proxy.endpoint}` says"
    try:
        code, _, err = _admin(proxy, plan, bucket, "pause", "--reason", "maintenance")
        assert plan.sent and code == by_signal(signal.SIGINT), (code, err)
        assert err.splitlines()[-1] == ("epochgc gc-admin pause: interrupted by SIGINT: the "
                                        "pause "
                                        "may have been written (its request was under way): "
                                        + look), err
        assert read_admin_state(direct).paused  # it was: the line is not idle talk
        plan.sig = signal.SIGTERM
        code, out, err = _admin(proxy, plan, bucket, "start", "--json")
        assert plan.sent and code == by_signal(signal.SIGTERM), (code, err)
        assert "interrupted by SIGTERM: the resume may have been written" in out, out
        assert err.splitlines()[-1].startswith(
            "epochgc gc-admin start: interrupted by SIGTERM: the resume may have been "
            "written"), err
        assert not read_admin_state(direct).paused
    finally:
        direct.close()
