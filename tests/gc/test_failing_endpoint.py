"""Issue 41, newuser9 K4: `epochgc gc` and `gc-admin show` against an S3 endpoint that
answers every request at once with 500 InternalError (a real HTTP server on loopback,
`tests/store/failing_endpoint`).

A store whose first read fails is not known to be a store: the round numbers nothing and
writes nothing (the README: a round writes a record once it "finds a store"), exit 1 once
that read's bounded retries are over, with one line; `--json`'s `seconds` covers that
time. The old code then read the round sequence and listed its markers (11 attempts each)
and PUT a record: ~90 s of silent retries after the store was found unreadable.

Deterministic: the server records every request, so the tests assert what was asked, not
how long it took; `HANG_S` only bounds a hang."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from epochgc.impl.store.patience import ATTEMPTS_ENV, READ_TIMEOUT_ENV, SAY_AFTER_ENV
from tests.gc.helpers import signal_when_ready
from tests.interrupted import by_signal
from tests.store.failing_endpoint import FailingEndpoint, failing_endpoint
from tests.store.s3server import DUMMY_AWS_ENV

pytest.importorskip("boto3")

ROOT = Path(__file__).resolve().parents[2]
HANG_S = 120.0
HEAD = ("HEAD", "/gcb/p1/_cluster/partitions.json")


def _env(attempts: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWS_") and not k.startswith("EPOCHGC_")}
    # No waiting line: every answer comes at once (the line is for a silent endpoint).
    return dict(env, PYTHONPATH=str(ROOT), **DUMMY_AWS_ENV,
                **{READ_TIMEOUT_ENV: "600", ATTEMPTS_ENV: str(attempts), SAY_AFTER_ENV: "600"})


def _gc(ep: FailingEndpoint, *extra: str) -> list[str]:
    return [sys.executable, "-m", "epochgc", "gc", "--store", "s3://gcb/p1", "--s3-endpoint",
            ep.endpoint, "--grace", "0s", "--i-know-grace-is-short", *extra]


def test_a_round_whose_first_read_fails_writes_nothing_and_says_one_line(
        tmp_path: Path) -> None:
    """Old code: after the two HEADs, GETs of `_cluster/gc/seq-round/<round>`, LISTs of
    the sequence markers and a PUT of `_cluster/gc/rounds/<round>.json` (the record of a
    round on a store it could not read), each retried 11 times."""
    with failing_endpoint() as ep:
        began = time.monotonic()
        p = subprocess.run(_gc(ep, "--json"), env=_env(2), cwd=tmp_path, capture_output=True,
                           text=True, timeout=HANG_S)
        took = time.monotonic() - began
        asked = ep.requests
    assert p.returncode == 1, p.stderr
    assert asked == [HEAD, HEAD], asked  # its two attempts, and nothing after them
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith(
        "epochgc gc: error: cannot read _cluster/partitions.json: head "
        "'_cluster/partitions.json' in s3://gcb/p1/ at "), lines
    assert "(500)" in lines[0] and lines[0].endswith(
        "; nothing was written; nothing was deleted"), lines
    doc = json.loads(p.stdout)
    assert (doc["outcome"], doc["record"]) == ("error", None), doc
    # The round's time is the reads it made (all of them, now that none follow); the
    # command's is more only by Python's start-up.
    assert 0 < doc["seconds"] <= took, (doc["seconds"], took)


def test_gc_admin_show_on_a_failing_endpoint_is_bounded() -> None:
    """newuser9 K4's gc-admin half (35 s: botocore's 11 attempts). Already bounded on main
    by the control-read client (issue 41 I10): the attempts are Patience's."""
    with failing_endpoint() as ep:
        p = subprocess.run([sys.executable, "-m", "epochgc", "gc-admin", "show", "--store",
                            "s3://gcb/p1", "--s3-endpoint", ep.endpoint], env=_env(2),
                           capture_output=True, text=True, timeout=HANG_S)
        asked = ep.requests
    assert p.returncode == 1, p.stderr
    assert asked == [HEAD, HEAD], asked
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "epochgc gc-admin show: error: cannot read _cluster/partitions.json: "), p.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_first_read_is_retried_ends_gc_at_once(
        sig: signal.Signals, tmp_path: Path) -> None:
    """A signal while the failing HEAD is being retried (attempts many, so only the signal
    ends it): 130 / 143, the before-the-round line, nothing written. (On main since
    issue 41 I10; the tester's Ctrl-C came during the record's retries, which no longer
    happen: the first test.)"""
    err = tmp_path / "err"
    with failing_endpoint() as ep:
        code = signal_when_ready(
            _gc(ep), env=_env(1000), cwd=tmp_path, err=err, sig=sig, bound_s=HANG_S,
            # retrying: its first attempt was answered 500
            ready=lambda: len(ep.requests) >= 2, not_ready="no retry seen")
        asked = ep.requests
    text = err.read_text()
    assert code == by_signal(sig), text
    assert set(asked) == {HEAD}, asked
    assert text.strip().splitlines()[-1] == (
        f"epochgc gc: interrupted by {sig.name}: before the round started: nothing was "
        "written to the store, no key deleted"), text


@pytest.mark.parametrize("where", ["failing endpoint", "dry run"])
def test_a_signal_once_the_round_ended_names_a_record_only_if_there_is_one(
        where: str, tmp_path: Path) -> None:
    """The tester's Ctrl-C came after the failed read, while the old code retried its
    record: "gc: SIGINT after the round ended: its record stands, exit code 1" with no
    record. Signalled at the same stage (the round over, nothing said yet: the test hook),
    a round without a record (its first read failed; a dry run) says its outcome stands,
    and keeps its exit code. Old code: "its record stands" for both."""
    from epochgc.impl.signals import HOOK_ENV
    from epochgc.impl.store.local import LocalStore
    from tests.gc.helpers import AHEAD, NOW, write_health, write_partitions

    env = dict(_env(2), **{HOOK_ENV: "round-over:SIGINT"})
    if where == "dry run":  # a local store whose round is blocked: no Spark needed
        store = LocalStore(tmp_path / "s", create=True)
        write_partitions(store, 10**6, ["w/0", "w/1"])
        write_health(store, "n1", NOW - 10, [("w/0", 5)])
        p = subprocess.run([sys.executable, "-m", "epochgc", "gc", "--store",
                            str(tmp_path / "s"), "--now", str(NOW), *AHEAD, "--dry-run"],
                           env=env, cwd=tmp_path, capture_output=True, text=True,
                           timeout=HANG_S)
        code = 2
        assert not (tmp_path / "s" / "_cluster" / "gc").exists()  # a dry run writes nothing
    else:
        with failing_endpoint() as ep:
            p = subprocess.run(_gc(ep), env=env, cwd=tmp_path, capture_output=True,
                               text=True, timeout=HANG_S)
            assert set(ep.requests) == {HEAD}, ep.requests
        code = 1
    assert "test hook: SIGINT at round-over" in p.stderr, p.stderr
    assert p.returncode == code, p.stderr
    assert "record stands" not in p.stderr, p.stderr
    assert (f"gc: SIGINT after the round ended: its outcome stands, exit code {code}"
            in p.stderr.splitlines()), p.stderr
