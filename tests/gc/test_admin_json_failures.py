"""i41y item 4: `gc-admin <command> --json` that fails prints one JSON object on stdout (a
machine reads stdout), with the same exit code as without --json; the human line stays on
stderr. One shape for every subcommand, as `epochgc gc --json` gives its failure:
`{"command", "outcome", "error", "exit_code"}`. Old code: stdout empty."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.gc.lease import LEASE_KEY, Lease
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import lease_of_a_dead_driver, simple_cluster
from tests.interrupted import by_signal

ROOT = Path(__file__).resolve().parents[2]


def _store(tmp_path: Path) -> str:
    root = tmp_path / "store"
    simple_cluster(LocalStore(root, create=True), 100)
    return str(root)


def _not_a_store(tmp_path: Path) -> str:
    return str(tmp_path)


def _held(tmp_path: Path) -> str:
    """A live lease whose holder exited: `reset` without --force refuses (1)."""
    root = _store(tmp_path)
    lease_of_a_dead_driver(Path(root), "r-dead")
    return root


# (subcommand and its arguments after --store, the store it is given, the exit code)
CASES: dict[str, tuple[list[str], Callable[[Path], str], int]] = {
    "show: not a store": (["show"], _not_a_store, 1),
    "pause: not a store": (["pause"], _not_a_store, 1),
    "start: not a store": (["start"], _not_a_store, 1),
    "resume: not a store": (["resume"], _not_a_store, 1),
    "reset: not a store": (["reset"], _not_a_store, 1),
    "expire: not a store": (["expire"], _not_a_store, 1),
    "reset: a live lease": (["reset"], _held, 1),
    "pause: a reason too long": (["pause", "--reason", "x" * 501], _store, 64),
    "reset: --even-if-running alone": (["reset", "--even-if-running"], _store, 64),
    "expire: --older-than not a duration": (["expire", "--older-than", "soon"], _store, 64),
    "expire: --older-than past 100 years": (["expire", "--older-than", "200000d"], _store, 64),
    "show: --max-report-age 0": (["show", "--max-report-age", "0"], _store, 64),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_failure_with_json_is_one_object_on_stdout(case: str, tmp_path: Path) -> None:
    args, where, code = CASES[case]
    store = where(tmp_path)
    argv = ["gc-admin", args[0], "--store", store, *args[1:]]
    plain = CliRunner().invoke(main, argv)
    assert plain.exit_code == code, plain.output
    assert plain.stdout == "", plain.stdout  # without --json: the line on stderr only
    r = CliRunner().invoke(main, [*argv, "--json"])
    assert r.exit_code == code, r.output
    doc = json.loads(r.stdout)  # the whole of stdout: one object
    assert doc == {"command": f"gc-admin {args[0]}", "outcome": "error", "error": doc["error"],
                   "exit_code": code}, doc
    assert doc["error"] and doc["error"] in r.stderr, (doc, r.stderr)


def test_reset_refused_by_its_live_lease_names_it_in_json(tmp_path: Path) -> None:
    store = _held(tmp_path)
    r = CliRunner().invoke(main, ["gc-admin", "reset", "--store", store, "--json"])
    assert r.exit_code == 1 and "--force" in json.loads(r.stdout)["error"], r.output
    assert LocalStore(Path(store)).head(LEASE_KEY) is not None  # refused: nothing removed


def test_an_interrupted_command_with_json_says_so_on_stdout(tmp_path: Path) -> None:
    """A signal (the test hook, after the reset removed the lease): the process ends by it
    (130 in a shell), and the object says `interrupted`, 130; stderr keeps its lines."""
    from epochgc.impl.signals import HOOK_ENV

    root = _store(tmp_path)
    Lease(lambda: LocalStore(root), "r-held").acquire()  # held by this (running) process
    p = subprocess.run([sys.executable, "-m", "epochgc", "gc-admin", "reset", "--store", root,
                        "--force", "--even-if-running", "--json"], capture_output=True,
                       text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(ROOT),
                                **{HOOK_ENV: "reset-removed:SIGINT"}))
    assert p.returncode == by_signal(signal.SIGINT), p.stderr
    assert json.loads(p.stdout) == {"command": "gc-admin reset", "outcome": "interrupted",
                                    "error": "interrupted by SIGINT: removed "
                                    "_cluster/gc/lease.json", "exit_code": 130}
    # newuser15 S3: the full command, and what was done (the lease removed: it was bare).
    assert p.stderr.splitlines()[-1] == ("epochgc gc-admin reset: interrupted by SIGINT: "
                                         "removed _cluster/gc/lease.json"), p.stderr


def test_gc_json_carries_the_same_fields_on_failure(tmp_path: Path) -> None:
    """`epochgc gc --json` on a location that is not a store: `outcome`, `error` and
    `exit_code` (new), as gc-admin's failure object."""
    r = CliRunner().invoke(main, ["gc", "--store", str(tmp_path), "--grace", "0s",
                                  "--i-know-grace-is-short", "--json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    assert (doc["outcome"], doc["exit_code"]) == ("error", 1), doc
    assert "not an epochgc store" in doc["error"], doc


@pytest.mark.parametrize("args", [
    ["--grace", "0s"],  # below the safety minimum without its flag: refused in the command
    ["--grace", "soon"],  # not a duration: refused while parsing
    ["--grace", "0s", "--i-know-grace-is-short", "--master", "local[0]"],
])
def test_gc_refusing_its_arguments_with_json_says_so_on_stdout(args: list[str],
                                                               tmp_path: Path) -> None:
    """A bad argument (64) is refused before the round, which has no JSON of its own yet:
    the failure object, as gc-admin's. Old code: stdout empty."""
    argv = ["gc", "--store", _store(tmp_path), *args]
    plain = CliRunner().invoke(main, argv)
    assert (plain.exit_code, plain.stdout) == (64, ""), plain.output
    r = CliRunner().invoke(main, [*argv, "--json"])
    assert r.exit_code == 64, r.output
    doc = json.loads(r.stdout)
    assert doc == {"command": "gc", "outcome": "error", "error": doc["error"],
                   "exit_code": 64}, doc
    assert doc["error"] in r.stderr, (doc, r.stderr)


def test_advance_epoch_has_json_and_its_failure_is_one_object(tmp_path: Path) -> None:
    """newuser13 Q8: `gc-admin advance-epoch ... --json` was "No such option '--json'" (64),
    the only gc-admin command without it. Here its refusal (no cluster there, 64)."""
    want = f"no cluster under {tmp_path}: start one with `epochgc cluster start`"
    r = CliRunner().invoke(main, ["gc-admin", "advance-epoch", "--data-dir", str(tmp_path),
                                  "--partition", "t/0", "--json"])
    assert r.exit_code == 64 and json.loads(r.stdout) == {
        "command": "gc-admin advance-epoch", "outcome": "error", "error": want, "exit_code": 64}, \
        r.output
