"""With --json a failing command prints one object on stdout, whatever command it is
(impl/jsonfailure.py): `{"command", "outcome", "error", "exit_code"}`, `exit_code` the
process's own. Walked from the click command tree (tests/impl/test_exitcodes.py): a command
given --json later is checked here without being named.

newuser17 T4, old code: `chaos --json` (1), `demo --json` (69) and `conform --json` (69)
printed nothing on stdout when they failed, while gc, gc-admin, barrier and cluster status
printed the object; a script parsing their --json had to special-case an empty stdout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from epochgc.impl import jsonfailure
from epochgc.impl.cli import main
from epochgc.impl.exitcodes import ExitCode
from epochgc.impl.signals import BEGAN_POINT, HOOK_ENV
from tests.impl.test_error_lines import FAILURES, NOWHERE
from tests.impl.test_exitcodes import _tree
from tests.interrupted import by_signal

ROOT = Path(__file__).resolve().parents[2]
WITH_JSON = sorted(p for p, cmd in _tree() if jsonfailure.has_json(cmd))


def _object(path: str, r: Result) -> dict[str, Any]:
    """stdout, which must be exactly one failure object of `path` with r's exit code; its
    error is the one on stderr's last line."""
    doc = json.loads(r.stdout)  # the whole of stdout: one object
    assert isinstance(doc, dict), r.stdout
    assert sorted(doc) == ["command", "error", "exit_code", "outcome"], doc
    # Its full name: gc-admin's named the subcommand alone (`show`; newuser23 F5).
    assert doc["command"] == path, (path, doc)
    assert doc["exit_code"] == r.exit_code and doc["outcome"] == "error", (path, doc)
    assert doc["error"] and doc["error"] in r.stderr.splitlines()[-1], (doc, r.stderr)
    return doc


def test_the_walk_has_the_commands_of_the_issue() -> None:
    assert {"chaos", "demo", "conform", "gc", "barrier", "cluster status",
            "gc-admin show"} <= set(WITH_JSON)


@pytest.mark.parametrize("path", WITH_JSON)
def test_a_failure_with_json_is_one_object(path: str, tmp_path: Path) -> None:
    """Each command's failure of tests/impl/test_error_lines.py (a refusal, a missing
    extra, a missing cluster), --json first (before `conform`'s `--`)."""
    args, env, code = FAILURES[path]
    args = [str(tmp_path / "none") if a == NOWHERE else a for a in args]
    r = CliRunner().invoke(main, [*path.split(), "--json", *args], env=env)
    assert r.exit_code == code, (path, r.exit_code, r.output)
    _object(path, r)


@pytest.mark.parametrize("path", WITH_JSON)
def test_a_usage_error_with_json_is_one_object(path: str) -> None:
    """An unknown option: parsing fails, the --json flag given is what says it."""
    r = CliRunner().invoke(main, [*path.split(), "--json", "--no-such-option-s28p"])
    assert r.exit_code == ExitCode.USAGE, (path, r.output)
    assert "No such option" in _object(path, r)["error"]


def test_a_bad_value_found_after_parsing_is_one_object() -> None:
    """chaos checks its --store as its code begins (a usage error after parsing)."""
    r = CliRunner().invoke(main, ["chaos", "--store", "s3://gcb/p", "--json"])
    assert r.exit_code == ExitCode.USAGE, r.output
    assert "--s3-endpoint" in _object("chaos", r)["error"]


def test_json_after_conforms_double_dash_is_the_ports() -> None:
    """`conform -- PORT --json`: the port's argument, not conform's: no object."""
    r = CliRunner().invoke(main, ["conform", "--vectors", "--", NOWHERE, "--json"])
    assert r.exit_code == ExitCode.UNAVAILABLE and r.stdout == "", r.output
    r = CliRunner().invoke(main, ["conform", "--json", "--vectors", "--", NOWHERE])
    assert r.exit_code == ExitCode.UNAVAILABLE, r.output
    assert _object("conform", r)["error"] == f"cannot start {NOWHERE!r}: No such file or directory"


def test_without_json_stdout_stays_empty() -> None:
    r = CliRunner().invoke(main, ["demo", "--gc-engine", "spark"],
                           env={"JAVA_HOME": "/nonexistent-s28p-java"})
    assert r.exit_code == ExitCode.UNAVAILABLE and r.stdout == "", r.output


def test_an_interrupted_command_with_json_says_so_on_stdout() -> None:
    """A signal as `chaos`'s code begins (the test hook): the object says `interrupted`
    and the shell's code; the process still ends by the signal. Old code: stdout empty."""
    p = subprocess.run([sys.executable, "-m", "epochgc", "chaos", "--json"],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(ROOT),
                                **{HOOK_ENV: f"{BEGAN_POINT}:SIGINT"}))
    assert p.returncode == by_signal(signal.SIGINT), p.stderr
    assert json.loads(p.stdout) == {"command": "chaos", "outcome": "interrupted",
                                    "error": "interrupted by SIGINT: nothing was written yet",
                                    "exit_code": 130}, p.stdout
    assert p.stderr.splitlines()[-1] == ("epochgc chaos: interrupted by SIGINT: nothing was "
                                         "written yet"), p.stderr


def test_conform_without_its_vectors_is_refused_in_one_object(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An installation without spec/vectors (none listed): refused, 69. Old code: with
    --json, the summary `{"result": "pass", ...}` on stdout, then exit 69."""
    from epochgc.impl.conform import driver

    monkeypatch.setattr(driver, "vector_files", lambda root=driver.VECTORS_DIR: [])
    r = CliRunner().invoke(main, ["conform", "--json", "--vectors", "--", sys.executable,
                                  "-c", "pass"])
    assert r.exit_code == ExitCode.UNAVAILABLE, r.output
    assert "does not ship spec/vectors" in _object("conform", r)["error"]
