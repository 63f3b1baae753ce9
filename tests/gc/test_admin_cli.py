"""`epochgc gc-admin` (issue 30): pause, start, reset and show the GC state of a store, and
a real `epochgc gc` round obeying a pause, before it starts and while it runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.gc.admin import ADMIN_KEY
from epochgc.impl.gc.lease import LEASE_KEY, Lease
from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.gc.summary import EXIT_PAUSED
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key
from tests.gc.helpers import (
    AHEAD,
    HOUR,
    NOW,
    all_keys,
    lease_of_a_dead_driver,
    put_local,
    round_held_at_first_batch,
    simple_cluster,
)

ROOT = Path(__file__).resolve().parents[2]
GRACE = 12 * HOUR


def _admin(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, ["gc-admin", *args])
    return r.exit_code, r.output


def _store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    simple_cluster(LocalStore(root, create=True), 100)
    return root


def test_admin_refuses_a_location_that_is_not_a_store(tmp_path: Path) -> None:
    code, out = _admin("pause", "--store", str(tmp_path))
    assert code == 1 and "not an epochgc store" in out
    assert list(tmp_path.iterdir()) == []  # nothing written into a mistyped path


def test_a_paused_store_refuses_a_round_before_anything_starts(tmp_path: Path) -> None:
    """Old code had no pause: the round ran and deleted the key."""
    root = _store(tmp_path)
    key = format_key(7, 50, "k")
    put_local(root, key, age=GRACE + 60)
    code, out = _admin("pause", "--store", str(root), "--reason", "disk swap")
    assert code == 0 and "paused" in out
    r = CliRunner().invoke(main, ["gc", "--store", str(root), "--now", str(NOW), *AHEAD,
                                  "--json", "-q"])
    assert r.exit_code == EXIT_PAUSED, r.output
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["outcome"] == "paused" and "disk swap" in doc["paused"]
    assert key in all_keys(LocalStore(root))
    [rec] = [json.loads(LocalStore(root).get(o.key))
             for o in LocalStore(root).list_all(ROUNDS_PREFIX)]
    assert rec["outcome"] == "paused" and rec["exit_code"] == EXIT_PAUSED
    assert _admin("start", "--store", str(root))[0] == 0
    code, out = _admin("show", "--store", str(root), "--json")
    # show exits 2: the fixture's reports are dated ahead of this host's clock
    assert code == 2 and json.loads(out)["paused"] is False


def test_reset_removes_only_the_lease_and_refuses_a_live_one(tmp_path: Path) -> None:
    root = _store(tmp_path)
    store = LocalStore(root)
    lease_of_a_dead_driver(root, "r1")  # live for 600 s; its driver died
    store.put(ADMIN_KEY, b'{"paused": true, "reason": "keep"}')
    code, out = _admin("reset", "--store", str(root))
    assert code == 1 and "live lease" in out and "r1" in out  # old code: no reset at all
    assert store.head(LEASE_KEY) is not None
    code, out = _admin("reset", "--store", str(root), "--force")
    assert code == 0 and LEASE_KEY in out
    assert store.head(LEASE_KEY) is None
    assert store.head(ADMIN_KEY) is not None  # the pause state is not GC's lock: kept
    code, out = _admin("reset", "--store", str(root))
    assert code == 0 and "nothing to remove" in out


def test_reset_takes_an_expired_lease_without_force(tmp_path: Path) -> None:
    root = _store(tmp_path)
    Lease(lambda: LocalStore(root), "r0", duration_s=1.0,
          clock=lambda: time.time() - 10).acquire()  # expired 9 s ago
    code, out = _admin("reset", "--store", str(root))
    assert code == 0 and LEASE_KEY in out


def test_show_names_m_partition_epochs_health_pause_lease(tmp_path: Path) -> None:
    root = tmp_path / "store"
    # `show` judges health on the real clock: reports dated now (the helpers' NOW is
    # ahead of the real clock, which the monitor now refuses as clock skew).
    simple_cluster(LocalStore(root, create=True), 100, now=time.time())
    code, out = _admin("show", "--store", str(root), "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["partition_epochs"] == {"t/0": 100, "t/1": 105}
    assert doc["M"] == 100 and doc["health"]["state"] == "healthy"
    assert doc["paused"] is False and doc["lease"]["holder"] is None
    assert doc["last_round"] is None
    code, out = _admin("show", "--store", str(root))
    assert code == 0 and "  t/1: 105" in out and "paused: no" in out


@pytest.mark.spark
def test_a_pause_stops_a_running_round_at_its_next_batch(tmp_path: Path) -> None:
    """Deterministic: the round's first journaled batch waits (EPOCHGC_GC_TEST_PAUSE) for
    the STOP marker; the pause is written only once that batch was deleted; the driver's
    watch then writes STOP. Old code: no pause, the round deleted every key."""
    root = _store(tmp_path)
    eligible = {format_key(p, 50, f"k{p}") for p in range(0, 1000, 50)}
    for key in eligible:
        put_local(root, key, age=GRACE + 60)
    pause = tmp_path / "pause"
    args = ["--now", str(NOW), *AHEAD, "--tasks", "1", "--delete-batch-size", "2",
            "--delete-concurrency", "1", "--json", "-q"]

    def pause_gc(_proc: object) -> None:
        assert _admin("pause", "--store", str(root))[0] == 0

    returncode, out, err = round_held_at_first_batch(root, pause, args, pause_gc)
    assert returncode == EXIT_PAUSED, err[-3000:]
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["outcome"] == "interrupted" and doc["interrupted"] == "paused", doc
    gone = eligible - all_keys(LocalStore(root))
    assert doc["deleted"] == len(gone) == 2, doc  # the one batch in flight, no other
    # newuser11 M10: the stopped round says who paused it and how to resume.
    line = [x for x in err.splitlines() if x.startswith("gc: round interrupted (paused)")]
    by = json.loads(LocalStore(root).get(ADMIN_KEY))["by"]
    assert len(line) == 1 and line[0].endswith(
        f": GC is paused on this store by {by}: no reason given (epochgc gc-admin start "
        "resumes it)"), err[-3000:]



@pytest.mark.parametrize("cmd", ["show", "pause", "start", "reset", "expire"])
@pytest.mark.parametrize("url", ["xx://y", "s3://Bad_Bucket", "file://host/x"])
def test_a_bad_store_url_is_a_usage_error_for_every_admin_command(cmd: str, url: str) -> None:
    """A store URL that cannot name a store is a bad argument: 64 (EX_USAGE), as `epochgc gc`
    answers it, not 1 ("failed") after which a scheduler would retry the same typo."""
    code, out = _admin(cmd, "--store", url)
    assert code == 64, (code, out)
    assert url in out


def test_resume_is_start_and_never_a_hint_to_reset(tmp_path: Path) -> None:
    """Issue 41 item 10. Old code: `Error: No such command 'resume'. Did you mean 'reset'?`
    (exit 64): `reset` removes the lease."""
    root = _store(tmp_path)
    code, out = _admin("pause", "--store", str(root), "--reason", "r")
    assert code == 0, out
    code, out = _admin("resume", "--store", str(root))
    # newuser13 Q9: it said only "gc-admin: running"
    assert code == 0 and re.fullmatch(
        r"gc-admin: resumed: GC runs again on this store \(it was paused by \S+ since "
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: r\)\n", out), out
    assert json.loads(LocalStore(root).get(ADMIN_KEY))["paused"] is False


def test_pause_start_resume_reset_answer_json(tmp_path: Path) -> None:
    """Issue 41 F12: only show and expire had --json ("No such option '--json'", 64 for
    pause, start, resume and reset): one JSON object on stdout each, as the text says."""
    root = _store(tmp_path)

    def doc(*args: str) -> dict[str, object]:
        r = CliRunner().invoke(main, ["gc-admin", *args, "--store", str(root), "--json"])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)  # type: ignore[no-any-return]

    first = doc("pause", "--reason", "incident 7", "--by", "ops")
    assert first["paused"] is True and first["changed"] is True, first
    assert first["by"] == "ops" and first["reason"] == "incident 7" and first["replaced"] is None
    kept = doc("pause", "--reason", "other")
    assert kept["changed"] is False and kept["reason"] == "incident 7", kept
    repl = doc("pause", "--reason", "other", "--by", "b", "--replace")
    assert repl["changed"] is True and repl["reason"] == "other", repl
    assert repl["replaced"] == {"by": "ops", "reason": "incident 7", "at": first["at"],
                                "at_unix": first["at_unix"]}, repl
    for cmd, changed in (("start", True), ("resume", False)):
        ran = doc(cmd)
        assert ran["paused"] is False and isinstance(ran["at_unix"], float), ran
        assert ran["changed"] is changed, (cmd, ran)  # newuser7: resume --json had no "changed"
    Lease(lambda: LocalStore(root), "r0", duration_s=1.0,
          clock=lambda: time.time() - 10).acquire()  # expired 9 s ago
    # r0's holder is this process, still running: not a dead round (`no_journal`: R7)
    assert doc("reset") == {"removed": [LEASE_KEY], "recovered": [], "ended": [],
                           "unrecordable": [], "no_journal": []}
    assert doc("reset") == {"removed": [], "recovered": [], "ended": [], "unrecordable": [],
                           "no_journal": []}


def test_pause_and_resume_json_say_when_in_iso_8601_utc(tmp_path: Path) -> None:
    """newuser10 L10: `pause --json` / `resume --json` said `at` in Unix seconds
    (1796033761.76) where a round's record and `gc --json` say times in ISO 8601 UTC. Now
    `at` is ISO 8601 UTC and `at_unix` the same instant in Unix seconds (as `show --json`'s
    `paused_at`)."""
    root = _store(tmp_path)
    for args in (["pause", "--reason", "r"], ["pause", "--reason", "r2", "--replace"],
                 ["resume"]):
        before = time.time()
        code, out = _admin(*args, "--store", str(root), "--json")
        assert code == 0, out
        doc = json.loads(out)
        at = datetime.fromisoformat(doc["at"])
        assert at.utcoffset() == timedelta(0), doc  # UTC, said so
        assert abs(at.timestamp() - doc["at_unix"]) < 1e-3, doc
        assert before - 1 <= doc["at_unix"] <= time.time() + 1, doc


def test_resume_json_of_a_store_never_paused_names_nobody(tmp_path: Path) -> None:
    """newuser8 I7: `{"at": null, "by": "", ...}`: nobody resumed it, so `by` is null as
    `at` is (`at_unix`, when set, is Unix seconds, as `show --json`'s `paused_at` and `now`)."""
    code, out = _admin("resume", "--store", str(_store(tmp_path)), "--json")
    assert code == 0, out
    assert json.loads(out) == {"paused": False, "changed": False, "by": None, "at": None,
                               "at_unix": None}, out


def test_reset_force_refuses_a_lease_whose_holder_runs_on_this_host(tmp_path: Path) -> None:
    """newuser3 N4: `reset --force` against a running round removed its lease and recorded
    it `killed` (exit 0); the round ran on beside the next one. --force means "known dead":
    a holder this host sees running is refused, naming its pid, unless --even-if-running."""
    root = _store(tmp_path)
    store = LocalStore(root)
    Lease(lambda: LocalStore(root), "r1").acquire()  # held by this (running) process
    code, out = _admin("reset", "--store", str(root), "--force")
    assert code == 1, out
    assert f"pid {os.getpid()} on this host" in out and "--even-if-running" in out, out
    assert store.head(LEASE_KEY) is not None
    code, out = _admin("reset", "--store", str(root), "--even-if-running")
    assert code == 64, out
    code, out = _admin("reset", "--store", str(root), "--force", "--even-if-running")
    assert code == 0 and LEASE_KEY in out, out
    assert store.head(LEASE_KEY) is None


@pytest.mark.spark
def test_a_running_round_reset_under_it_is_refused_then_never_says_done(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """newuser3 N4 on a real running round: `reset --force` is refused naming the driver's
    pid; forced with --even-if-running, the recovery writes STOP and records the round
    (driver-gone), and the round itself, whose task stopped on that STOP after one batch, must not
    then say `done` / listing_complete true / exit 0 (the tester: 120 of 10,000 listed)."""
    root = _store(tmp_path)
    for p in range(0, 1000, 50):
        put_local(root, format_key(p, 50, f"k{p}"), age=HOUR * 13)
    args = ["--now", str(NOW), *AHEAD, "--tasks", "1", "--delete-batch-size", "2",
            "--delete-concurrency", "1", "--json", "-q"]
    said: list[str] = []
    # Branch i38n's recovery waits the round's stop bound (240 s) before its read-back;
    # this round's task is held until STOP and stops at once, so nothing is sent after it.
    from epochgc.impl.gc import recover as recover_mod
    monkeypatch.setattr(recover_mod, "SLEEP", lambda _s: None, raising=False)

    def reset(proc: subprocess.Popen[str]) -> None:
        code, out = _admin("reset", "--store", str(root), "--force")
        assert code == 1 and f"pid {proc.pid} on this host" in out, out
        code, out = _admin("reset", "--store", str(root), "--force", "--even-if-running")
        assert code == 0 and "driver-gone" in out, out  # newuser13 Q3: was `killed`
        said.append(out)

    returncode, out, err = round_held_at_first_batch(root, tmp_path / "pause", args, reset)
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["deleted"] == 2, doc  # its one batch; the STOP held back the rest
    assert doc["listing_complete"] is False and doc["outcome"] != "done", (doc, err[-2000:])
    assert returncode != 0, err[-2000:]
