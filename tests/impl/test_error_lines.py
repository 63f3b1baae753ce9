"""Every command's error is one line in one shape, its last on stderr: `epochgc CMD: error:
MESSAGE` (impl/errorline.py; the README's exit-code paragraph). Walked from the click
command tree, as the exit-code walk (tests/impl/test_exitcodes.py) is: a command added
later must name a failure path here, or this test fails.

newuser13 Q9, old code: "Error: epochgc gc: Java not found: ..." (two prefixes); `produce`,
`cluster`, `topic`, `barrier` and every usage error "Error: ..."; `gc` "epochgc gc: error:
..."; `gc-admin` "gc-admin: show: ..."; `replay`, `check-trace`, `conform` "epochgc CMD:
..." with no word saying it was an error; a failed stdout write "epochgc: cannot write to
stdout: ..." naming no command."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from epochgc.impl import errorline
from epochgc.impl.cli import main
from epochgc.impl.cluster.local import LocalCluster
from epochgc.impl.exitcodes import ExitCode
from epochgc.model import replay
from tests.impl.test_exitcodes import COMMANDS, _tree

NOWHERE = "/nonexistent-s27c"  # a path that is no store, cluster, file or program
NO_JAVA = {"JAVA_HOME": "/nonexistent-s27c-java"}

# A failure that is not a usage error, for every command that is not a group: its
# arguments (NOWHERE stands for a path under the test's tmp_path that does not exist),
# its environment, its exit code.
FAILURES: dict[str, tuple[list[str], dict[str, str], ExitCode]] = {
    "barrier": (["--data-dir", NOWHERE], {}, ExitCode.USAGE),
    "chaos": (["--gc-engine", "spark"], NO_JAVA, ExitCode.UNAVAILABLE),
    "check-trace": ([NOWHERE], {}, ExitCode.DATAERR),
    "cluster kill": (["1", "--data-dir", NOWHERE], {}, ExitCode.USAGE),
    "cluster start": (["--data-dir", NOWHERE, "--store", "/proc/epochgc-s27c"], {},
                      ExitCode.USAGE),
    "cluster status": (["--data-dir", NOWHERE], {}, ExitCode.USAGE),
    "cluster stop": (["--data-dir", NOWHERE], {}, ExitCode.USAGE),
    "conform": (["--vectors", "--", NOWHERE], {}, ExitCode.UNAVAILABLE),
    "consume": (["--data-dir", NOWHERE, "--partition", "t/0"], {}, ExitCode.USAGE),
    "demo": (["--gc-engine", "spark"], NO_JAVA, ExitCode.UNAVAILABLE),
    # The Q9 case: Java missing (the preflight's refusal, 69), and a store that is none
    # (the round's own failure line, 1).
    "gc": (["--store", NOWHERE], NO_JAVA, ExitCode.UNAVAILABLE),
    "gc-admin advance-epoch": (["--data-dir", NOWHERE, "--partition", "t/0"], {},
                               ExitCode.USAGE),
    "gc-admin expire": (["--store", NOWHERE], {}, ExitCode.FAILED),
    "gc-admin pause": (["--store", NOWHERE, "--reason", "x"], {}, ExitCode.FAILED),
    "gc-admin reset": (["--store", NOWHERE], {}, ExitCode.FAILED),
    "gc-admin resume": (["--store", NOWHERE], {}, ExitCode.FAILED),
    "gc-admin show": (["--store", NOWHERE], {}, ExitCode.FAILED),
    "gc-admin start": (["--store", NOWHERE], {}, ExitCode.FAILED),
    "gc-package": (["--out", "/proc/epochgc-s27c"], {}, ExitCode.USAGE),
    "produce": (["--data-dir", NOWHERE, "--partition", "t/0"], {}, ExitCode.USAGE),
    "replay": ([NOWHERE], {}, ExitCode.DATAERR),
    "topic create": (["x", "--partitions", "1", "--data-dir", NOWHERE], {}, ExitCode.USAGE),
    "topic delete": (["x", "--data-dir", NOWHERE], {}, ExitCode.USAGE),
}
MORE: list[tuple[str, list[str], dict[str, str], ExitCode]] = [
    ("gc", ["--store", NOWHERE], {}, ExitCode.FAILED),
]

LEAVES = [p for p in COMMANDS if not isinstance(dict(_tree())[p], click.Group)]


def _error_line(path: str, stderr: str) -> str:
    """The message of the last stderr line, which must be `path`'s error line; no line is
    click's `Error: ...`, and the message does not name the command again."""
    lines = [x for x in stderr.splitlines() if x.strip()]
    assert lines, f"{path}: nothing on stderr"
    assert not [x for x in lines if x.startswith("Error:")], stderr
    head = errorline.line(path, "")
    assert lines[-1].startswith(head), (path, lines[-1])
    message = lines[-1][len(head):]
    assert message and not message.startswith(("epochgc", "Error", "error")), lines[-1]
    return message


def test_every_leaf_command_has_a_failure_here() -> None:
    assert sorted(FAILURES) == LEAVES


@pytest.mark.parametrize("path", COMMANDS)
def test_a_usage_error_ends_in_the_error_line(path: str) -> None:
    r = CliRunner().invoke(main, [*path.split(), "--no-such-option-s27c"])
    assert r.exit_code == ExitCode.USAGE, (path, r.output)
    assert "No such option" in _error_line(path, r.stderr)
    assert "Usage:" in r.stderr  # a usage error keeps click's usage lines above it


@pytest.mark.parametrize(("path", "args", "env", "code"),
                         [(p, *FAILURES[p]) for p in sorted(FAILURES)] + MORE)
def test_a_failure_ends_in_the_error_line(path: str, args: list[str], env: dict[str, str],
                                          code: ExitCode, tmp_path: Path) -> None:
    args = [str(tmp_path / "none") if a == NOWHERE else a for a in args]
    r = CliRunner().invoke(main, [*path.split(), *args], env=env)
    assert r.exit_code == code, (path, r.exit_code, r.output)
    message = _error_line(path, r.stderr)
    if env is NO_JAVA:
        assert message.startswith("Java not found"), message


def test_the_models_replay_says_bad_input_in_the_shape() -> None:
    """model/ imports nothing of impl/: its copy of the head must be the shape's."""
    assert errorline.line("replay", "") == replay.ERROR_HEAD


def test_cluster_start_with_other_options_says_them_on_its_one_line(tmp_path: Path) -> None:
    """newuser17 T5: each differing option was a line of its own below the error line, so
    the last stderr line was not the error (old code: "...--data-dir):" then "  --nodes: 4
    (the cluster has 3)"). A cluster's file as `start` writes it; no node is started."""
    lc = LocalCluster(tmp_path / "c")
    lc.init(3, str(tmp_path / "store"), ["t/0"], 1.0)
    lc.save()
    r = CliRunner().invoke(main, ["cluster", "start", "--data-dir", str(lc.dir), "--store",
                                  str(tmp_path / "store"), "--nodes", "4",
                                  "--mint-interval", "2"])
    assert r.exit_code == ExitCode.USAGE, r.output
    message = _error_line("cluster start", r.stderr)
    assert message.endswith("(or use a new --data-dir): --nodes: 4 (the cluster has 3); "
                            "--mint-interval: 2.0 (the cluster has 1.0)"), message


def test_an_error_line_is_one_line_whatever_its_message_holds() -> None:
    """A message with newlines (another program's output quoted, a list of details) is one
    line: its lines joined with "; " (newuser17 T5, by construction for every command)."""
    assert errorline.line("gc", "first:\n  a\r\n\n  b\n") == "epochgc gc: error: first: a; b"
    assert errorline.line(None, "one line") == "epochgc: error: one line"
    assert errorline.line("gc", "") == "epochgc gc: error: "
