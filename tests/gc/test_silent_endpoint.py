"""Issue 41, newuser8 I10: `epochgc gc` and `gc-admin show` against an S3 endpoint that
accepts connections and never answers (a real listening socket, `tests/store/blackhole`).

- The reads before the round (and gc-admin's) end within their bound with one line naming
  the endpoint, the object and "no answer within N s", exit 1 (the table's "failed": an
  unreadable store, as one where nothing listens; nothing was started);
- while such a read waits, a line says so;
- a SIGINT / SIGTERM then ends the command at once, 130 / 143, with a true line (no round
  began: nothing was written), never "its record stands" and 1.

Deterministic: the bounds are the command's own settings made small through the
environment (`impl/store/patience.py`); a signal is sent once the endpoint has the request
and the command has said it is waiting (the read's timeout is then 10 minutes, so only the
signal can end it). `HANG_S` is a bound for a hang (the old code waited 11 minutes), not
a timing assumption."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from epochgc.impl.signals import NOTHING_YET
from epochgc.impl.store.patience import ATTEMPTS_ENV, READ_TIMEOUT_ENV, SAY_AFTER_ENV
from tests.gc.helpers import signal_when_ready
from tests.interrupted import by_signal
from tests.store.blackhole import Blackhole, blackhole
from tests.store.s3server import DUMMY_AWS_ENV

pytest.importorskip("boto3")

ROOT = Path(__file__).resolve().parents[2]
HANG_S = 120.0


def _env(read_s: float, attempts: int, say_after_s: float) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWS_") and not k.startswith("EPOCHGC_")}
    return dict(env, PYTHONPATH=str(ROOT), **DUMMY_AWS_ENV,
                **{READ_TIMEOUT_ENV: str(read_s), ATTEMPTS_ENV: str(attempts),
                   SAY_AFTER_ENV: str(say_after_s)})


def _gc(hole: Blackhole, *extra: str) -> list[str]:
    return [sys.executable, "-m", "epochgc", "gc", "--store", "s3://gcb/p1", "--s3-endpoint",
            hole.endpoint, "--grace", "0s", "--i-know-grace-is-short", *extra]


def _show(hole: Blackhole) -> list[str]:
    return [sys.executable, "-m", "epochgc", "gc-admin", "show", "--store", "s3://gcb/p1",
            "--s3-endpoint", hole.endpoint]


@pytest.mark.parametrize("command", ["gc --dry-run", "gc-admin show"])
def test_a_silent_endpoint_fails_within_its_bound_naming_it(command: str,
                                                            tmp_path: Path) -> None:
    """Old code: `subprocess.TimeoutExpired` after HANG_S (each HEAD waited 60 s x 11)."""
    with blackhole() as hole:
        argv = _gc(hole, "--dry-run") if command.startswith("gc ") else _show(hole)
        proc = subprocess.run(argv, env=_env(0.3, 2, 600), cwd=tmp_path, capture_output=True,
                              text=True, timeout=HANG_S)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    line = (f"head '_cluster/partitions.json' in s3://gcb/p1/ at {hole.endpoint}: no answer "
            "within 0.3 s (2 attempts)")
    last = proc.stderr.strip().splitlines()[-1]
    assert line in last, proc.stderr
    if command.startswith("gc "):
        assert last.startswith("epochgc gc: error: cannot read _cluster/partitions.json: ")
        assert last.endswith("; nothing was deleted"), last
    else:
        assert last.startswith("epochgc gc-admin show: error: "), last


def _interrupt(argv: list[str], hole: Blackhole, tmp: Path, sig: signal.Signals,
               prefix: str) -> tuple[int, str]:
    """Run `argv`, signal it once the endpoint has its request and it said it waits."""
    err = tmp / "err"
    waiting = f"{prefix}waiting for {hole.endpoint}: no answer yet (head "
    code = signal_when_ready(
        argv, env=_env(600, 1, 0.05), cwd=tmp, err=err, sig=sig, bound_s=HANG_S,
        ready=lambda: hole.requested.is_set() and waiting in err.read_text(),
        not_ready=f"no {waiting!r} line")
    return code, err.read_text()


@pytest.mark.parametrize(("extra", "sig"), [(("--dry-run",), signal.SIGINT),
                                            ((), signal.SIGTERM)], ids=["dry-run", "round"])
def test_gc_interrupted_while_a_read_waits_ends_at_once(extra: tuple[str, ...],
                                                        sig: signal.Signals,
                                                        tmp_path: Path) -> None:
    """Old code: no waiting line; after the signal, "stopping: no key deleted yet; ending
    the round...", then ~10 minutes, then "SIGINT after the round ended: its record
    stands", exit 1."""
    with blackhole() as hole:
        code, err = _interrupt(_gc(hole, *extra), hole, tmp_path, sig, "gc: ")
    assert code == by_signal(sig), err
    assert "Traceback" not in err, err
    assert "record stands" not in err and "ending the round" not in err, err
    assert err.strip().splitlines()[-1] == (
        f"epochgc gc: interrupted by {sig.name}: before the round started: nothing was "
        "written to the store, no key deleted"), err


def test_gc_admin_show_interrupted_while_a_read_waits_ends_at_once(tmp_path: Path) -> None:
    with blackhole() as hole:
        code, err = _interrupt(_show(hole), hole, tmp_path, signal.SIGINT, "gc-admin: ")
    assert code == by_signal(signal.SIGINT), err
    assert "Traceback" not in err, err
    # One wording, whenever the signal comes (newuser8 I7, merged beside this test).
    assert err.strip().splitlines()[-1] == (  # newuser15 S3: it was bare
        f"epochgc gc-admin show: interrupted by SIGINT: {NOTHING_YET}"), err


def test_a_round_interrupted_before_it_began_writes_nothing(tmp_path: Path) -> None:
    """The line's "nothing was written to the store" is true: a real round (a local store
    that answers) signalled at its `start` point (the hook: before the store is read)
    leaves the store as it was: no record, no lease, no journal. Old code: it wrote a
    record (`interrupted`), and said "round interrupted (SIGTERM) before any delete"."""
    from epochgc.impl.signals import HOOK_ENV
    from epochgc.impl.store.local import LocalStore
    from tests.gc.helpers import AHEAD, NOW, simple_cluster

    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100)
    before = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    env = dict(_env(600, 1, 600), **{HOOK_ENV: "start:SIGTERM"})
    p = subprocess.run([sys.executable, "-m", "epochgc", "gc", "--store", str(root), "--now",
                        str(NOW), *AHEAD], env=env, cwd=tmp_path, capture_output=True,
                       text=True, timeout=HANG_S)
    assert p.returncode == by_signal(signal.SIGTERM), p.stderr
    assert p.stderr.strip().splitlines()[-1] == (
        "epochgc gc: interrupted by SIGTERM: before the round started: nothing was "
        "written to the store, no key deleted"), p.stderr
    assert sorted(str(q.relative_to(root)) for q in root.rglob("*")) == before
