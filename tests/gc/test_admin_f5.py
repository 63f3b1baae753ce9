"""Issue 41, newuser4 F5 (smaller findings in `gc-admin show` and `expire`): a damaged
lease that `show` advised a reset for while `gc` simply took it over; a record `null` named
by a Python type; refusals in click's usage-error style; refusals counted as rounds."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.gc.admin import LeaseState, read_lease
from epochgc.impl.gc.lease import LEASE_KEY, Lease
from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import simple_cluster
from tests.interrupted import by_signal


def _invoke(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.output


def _store(tmp_path: Path) -> Path:
    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100, now=time.time())
    return root


def test_a_damaged_lease_is_shown_as_the_next_round_takes_it(tmp_path: Path) -> None:
    """Old code: `show` said "cannot be read: malformed: Expecting value: line 1 column 1
    (char 0) (gc-admin reset --force removes it ...)" of the bytes `\\xff\\xfe` (a JSON
    message for bytes that are not UTF-8), while a round took the lease over (exit 0)."""
    root = _store(tmp_path)
    LocalStore(root).put(LEASE_KEY, b"\xff\xfe")
    _, out = _invoke("gc-admin", "show", "--store", str(root))
    line = next(ln for ln in out.splitlines() if ln.startswith("lease: "))
    assert "not UTF-8 (invalid start byte at byte 0)" in line, line
    assert "Expecting value" not in line and "reset --force" not in line, line
    assert line.endswith("the next round replaces it"), line
    # newuser21 X5: --json said `"live": true` beside `"next_round_replaces": true`.
    _, out = _invoke("gc-admin", "show", "--store", str(root), "--json")
    lease = json.loads(out)["lease"]
    assert (lease["state"], lease["next_round_replaces"], lease["live"]) == (
        "unreadable", True, False), lease
    # ... and it does: a round's acquire over it (what `gc` runs first).
    Lease(lambda: LocalStore(root), "r-next").acquire()
    got = read_lease(LocalStore(root), time.time())
    assert got.state is LeaseState.LIVE and (got.holder or {})["round"] == "r-next"


def test_a_malformed_lease_a_round_would_refuse_keeps_the_reset_advice(
        tmp_path: Path) -> None:
    """The boundary: a lease `show` reads strictly (a field given twice) but a round reads
    as held until later is not "replaced by the next round": `show` keeps the advice."""
    root = _store(tmp_path)
    until = time.time() + 600
    LocalStore(root).put(LEASE_KEY, (f'{{"round": "r", "expires_at": {until}, '
                                     f'"expires_at": {until}}}').encode())
    _, out = _invoke("gc-admin", "show", "--store", str(root))
    line = next(ln for ln in out.splitlines() if ln.startswith("lease: "))
    assert "given twice" in line and "gc-admin reset --force removes it" in line, line
    # A round may hold it: whether it is live cannot be told (null), not true or false.
    _, out = _invoke("gc-admin", "show", "--store", str(root), "--json")
    lease = json.loads(out)["lease"]
    assert (lease["state"], lease["next_round_replaces"], lease["live"]) == (
        "unreadable", False, None), lease


def test_a_record_null_is_named_in_json_terms(tmp_path: Path) -> None:
    """Old code: "not a JSON object (a JSON NoneType)"."""
    root = _store(tmp_path)
    for doc, kind in (("null", "null"), ("[1]", "array"), ('"x"', "string"), ("7", "number"),
                      ("true", "true")):
        key = f"{ROUNDS_PREFIX}20261129T180000.000Z-0000000a.json"
        LocalStore(root).put(key, doc.encode())
        _, out = _invoke("gc-admin", "show", "--store", str(root), "--json")
        err = json.loads(out)["last_round"]["error"]
        assert err.endswith(f"not a JSON object (a JSON {kind})"), err


def _invoke_split(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_gc_admin_refusals_are_said_in_its_own_style_not_a_usage_errors(
        tmp_path: Path) -> None:
    """Old code: `Error: expire refused, nothing removed: ...` (the last line of a click
    usage error, whose code is 64) with exit 1; reset's refusal too."""
    from epochgc.impl.gc.sequence import SEQ_PREFIX

    root = _store(tmp_path)
    LocalStore(root).put(f"{SEQ_PREFIX}99999999999999999999", b"")  # newuser3 N8
    code, out, err = _invoke_split("gc-admin", "expire", "--store", str(root))
    assert code == 1 and out == "", (code, out, err)
    assert err.startswith("epochgc gc-admin expire: error: refused, nothing removed: "), err
    assert "Error" not in err and len(err.splitlines()) == 1, err
    Lease(lambda: LocalStore(root), "r-live").acquire()
    code, out, err = _invoke_split("gc-admin", "reset", "--store", str(root))
    assert code == 1 and err.startswith(
        "epochgc gc-admin reset: error: a GC round holds a live lease"), err
    # The boundary: a usage error keeps click's usage lines and its own code.
    code, out, err = _invoke_split("gc-admin", "expire", "--store", str(root),
                                   "--keep-last", "0")
    assert code == 64, err
    assert "epochgc gc-admin expire: error: Invalid value for '--keep-last'" in err, err


def _refusals_after_a_round(root: Path) -> None:
    """A round that ran (blocked: the clock an hour back makes the reports look ahead),
    then two refusals: the lease held by another round, then GC paused."""
    from tests.gc.helpers import AHEAD, NOW

    simple_cluster(LocalStore(root, create=True), 100)
    code, out = _invoke("gc", "--store", str(root), "--now", str(NOW - 3600), *AHEAD, "-q")
    assert code == 2, out
    other = Lease(lambda: LocalStore(root), "r-other")
    other.acquire()
    code, out = _invoke("gc", "--store", str(root), "--now", str(NOW), *AHEAD, "-q")
    # newuser12 P11: blocked, retry later (2), as the exit-code table says; it was 1.
    assert code == 2 and "another GC round holds the store's lease" in out, out
    # a refusal, said as a paused store's is, not an error (newuser23 F5)
    assert out.rstrip().splitlines()[-1].startswith(
        "gc: round refused, nothing deleted: another GC round holds the store's lease"), out
    assert out.rstrip().endswith("; retry later"), out
    other.release()
    assert _invoke("gc-admin", "pause", "--store", str(root), "--reason", "swap")[0] == 0
    code, out = _invoke("gc", "--store", str(root), "--now", str(NOW), *AHEAD, "-q")
    assert code == 3, out


def test_show_last_round_is_the_last_that_ran_and_the_refusal_apart(tmp_path: Path) -> None:
    """Old code: `last round: ... (#3)` / `outcome: paused, exit code 3` (a refusal, and
    before it a lease refusal recorded as an `error` round)."""
    root = tmp_path / "s"
    _refusals_after_a_round(root)
    _, out = _invoke("gc-admin", "show", "--store", str(root))
    assert "(#1)\n  outcome: blocked, exit code 2" in out, out
    line = next(ln for ln in out.splitlines() if ln.startswith("last refusal"))
    assert "(#3)" in line and "exit code 3: GC is paused on this store" in line, line
    _, out = _invoke("gc-admin", "show", "--store", str(root), "--json")
    doc = json.loads(out)
    assert doc["last_round"]["seq"] == 1 and doc["last_refusal"]["refusal"] == "paused"


def test_expire_keep_last_counts_rounds_that_ran(tmp_path: Path) -> None:
    """Old code: `expire --keep-last 1` kept the paused refusal (#3) and removed the round
    that ran (#1) with the lease refusal (#2)."""
    root = tmp_path / "s"
    _refusals_after_a_round(root)
    code, out = _invoke("gc-admin", "expire", "--store", str(root), "--older-than", "0s",
                        "--keep-last", "1", "--apply", "--json")
    assert code == 0, out
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["kept_recent"] == 1 and len(doc["rounds"]) == 2, doc
    left = [json.loads(LocalStore(root).get(o.key))
            for o in LocalStore(root).list_all(ROUNDS_PREFIX)]
    assert [(r["seq"], r["outcome"]) for r in left] == [(1, "blocked")], left


def test_a_round_stopped_before_its_listing_announces_no_work(tmp_path: Path) -> None:
    """Old code: SIGINT before the reports were read (at 0.3 s of a local dry run) said
    "gc: SIGINT: stopping: no key deleted yet; ending the round...", then "gc: M=100
    (snapshot revision ...); listing 1000 prefixes", then "round interrupted", 130. The
    signal comes at the `start` point (the hook: no timing). Since newuser8 I10 a signal
    before the round writes anything ends it at once, said by one line (no "stopping:
    ... ending the round" first: nothing of a round is left to end)."""
    import os
    import subprocess
    import sys

    from epochgc.impl.signals import HOOK_ENV
    from tests.gc.helpers import AHEAD, NOW

    root = tmp_path / "s"
    simple_cluster(LocalStore(root, create=True), 100)  # reports as of NOW
    p = subprocess.run([sys.executable, "-m", "epochgc", "gc", "--store", str(root),
                        "--dry-run", "--now", str(NOW), *AHEAD], capture_output=True,
                       text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2]),
                                **{HOOK_ENV: "start:SIGINT"}))
    assert p.returncode == by_signal(signal.SIGINT), p.stderr
    assert "listing" not in p.stderr and "M=" not in p.stderr, p.stderr
    assert "Spark" not in p.stderr and p.stderr.strip().splitlines()[-1] == (
        "epochgc gc: interrupted by SIGINT: before the round started: nothing was written "
        "to the store, no key deleted"), p.stderr


def test_reset_says_of_a_damaged_lease_what_show_says(tmp_path: Path) -> None:
    """Old code: reset without --force refused "a round may still hold it" of a lease that
    the next round would simply take over (and `show` now says so)."""
    root = _store(tmp_path)
    LocalStore(root).put(LEASE_KEY, b"\xff\xfe")
    code, _out, err = _invoke_split("gc-admin", "reset", "--store", str(root))
    assert code == 1 and "may still hold it" not in err, err
    assert "not UTF-8" in err and "the next round replaces it; pass --force" in err, err


def test_expire_apply_cut_short_by_a_signal_says_how_far_it_got(tmp_path: Path) -> None:
    """newuser11 M12: `expire --apply` interrupted after 3 of 21 rounds said only
    "interrupted by SIGINT" after its per-round lines. The signal comes once it has removed
    one round and said so (the hook point `round-removed`); a second run removes the rest.
    Old code: no such point: both removed, exit 0."""
    import os
    import subprocess
    import sys

    from epochgc.impl.signals import HOOK_ENV

    root = tmp_path / "s"
    _refusals_after_a_round(root)
    p = subprocess.run([sys.executable, "-m", "epochgc", "gc-admin", "expire", "--store",
                        str(root), "--older-than", "0s", "--keep-last", "1", "--apply"],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2]),
                                **{HOOK_ENV: "round-removed:SIGINT"}))
    assert p.returncode == by_signal(signal.SIGINT), p.stderr
    assert p.stderr.strip().splitlines()[-1] == (
        "epochgc gc-admin expire: interrupted by SIGINT: 1 of 2 round(s) removed (each removed "
        "whole leaves the store consistent; one cut short mid-way is finished by the next "
        "run): `gc-admin expire --apply` again removes the rest"), p.stderr
    assert len(list(LocalStore(root).list_all(ROUNDS_PREFIX))) == 2
    code, out = _invoke("gc-admin", "expire", "--store", str(root), "--older-than", "0s",
                        "--keep-last", "1", "--apply", "--json")
    assert code == 0 and len(json.loads(out.strip().splitlines()[-1])["rounds"]) == 1, out
