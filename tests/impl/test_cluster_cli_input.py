"""`epochgc cluster` refuses bad input before it does anything (no node is started here):
an unknown node, a negative count, options that differ from the existing cluster's, and a
status with every node down exits non-zero with M printed as a value, not a dict."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.cluster.cli import MAX_BATCH_BYTES, MAX_COUNT, check_batch_bytes
from epochgc.impl.cluster.local import LocalCluster


def cli(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.output


@pytest.fixture
def made(tmp_path: Path) -> tuple[str, Path]:
    """A cluster directory as `cluster start` leaves it, with no node running."""
    store = tmp_path / "store"
    store.mkdir()
    lc = LocalCluster(tmp_path / "c")
    lc.init(3, str(store), ["t/0", "t/1"], 1.0, [])
    lc.meta["s3_endpoint"] = None
    lc.save()
    return str(tmp_path / "c"), store


def test_kill_of_a_node_that_does_not_exist_is_refused(made: tuple[str, Path]) -> None:
    code, out = cli("cluster", "kill", "--data-dir", made[0], "9")
    assert code == 64 and "no node 9" in out and "1, 2, 3" in out


@pytest.mark.parametrize("count", ["-5", "0"])
def test_produce_refuses_a_count_below_one(made: tuple[str, Path], count: str) -> None:
    code, out = cli("produce", "--data-dir", made[0], "--partition", "t/0", "--count", count)
    assert code == 64 and "--count" in out


@pytest.mark.parametrize(("option", "value", "saved"), [
    ("--nodes", "5", "3"),
    ("--partitions", "t/0", "['t/0', 't/1']"),
    ("--mint-interval", "9", "1.0"),
])
def test_start_refuses_options_that_differ_from_the_cluster(
        made: tuple[str, Path], option: str, value: str, saved: str) -> None:
    data, store = made
    code, out = cli("cluster", "start", "--data-dir", data, "--store", str(store), option, value)
    assert code == 64, out
    assert option in out and saved in out
    assert LocalCluster(data).meta["pids"] == {}  # nothing was started


def test_start_refuses_another_store(made: tuple[str, Path], tmp_path: Path) -> None:
    data, _ = made
    code, out = cli("cluster", "start", "--data-dir", data, "--store", str(tmp_path / "other"))
    assert code == 64 and "--store" in out
    assert not (tmp_path / "other").exists()


def test_a_relative_store_is_compared_as_the_absolute_path(
        made: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    data, store = made
    monkeypatch.chdir(store.parent)
    code, out = cli("cluster", "start", "--data-dir", data, "--store", "store", "--nodes", "4")
    # Refused for --nodes only: the relative store is the cluster's own.
    assert code == 64 and "--nodes" in out and "--store" not in out


def test_bad_store_url_is_a_usage_error(made: tuple[str, Path]) -> None:
    code, out = cli("cluster", "start", "--data-dir", made[0], "--store", "ftp://x/y")
    assert code == 64 and "unsupported store URL scheme" in out


def test_status_with_every_node_down_exits_non_zero(made: tuple[str, Path]) -> None:
    code, out = cli("cluster", "status", "--data-dir", made[0])
    assert code == 1, out
    assert out.count("unreachable") == 3
    line = next(x for x in out.splitlines() if x.startswith("cluster M:"))
    assert "{" not in line, line  # a value and a reason, not a Python dict
    code, out = cli("cluster", "status", "--data-dir", made[0], "--json")
    assert code == 1 and json.loads(out)["healthy"] is False


@pytest.mark.parametrize("command", [["cluster", "status"], ["cluster", "stop"], ["barrier"]])
def test_a_directory_that_holds_no_cluster_is_a_usage_error(
        tmp_path: Path, command: list[str]) -> None:
    """Issue 41 item 11. Old code: `Error: RuntimeError: no cluster under ...`, exit 1."""
    code, out = cli(*command, "--data-dir", str(tmp_path))
    assert code == 64, out
    assert out.strip() == (f"epochgc {' '.join(command)}: error: no cluster under {tmp_path}: "
                           "start one with "
                           "`epochgc cluster start`")


@pytest.mark.parametrize("command", [["cluster", "status"], ["barrier"]])
def test_a_failure_with_json_is_one_object_on_stdout(
        tmp_path: Path, command: list[str]) -> None:
    """newuser13 Q8: `cluster status --json` and `barrier --json` printed nothing on stdout
    when they failed, where `gc --json` and `gc-admin ... --json` print one object; and a
    bad argument too."""
    from click.testing import CliRunner

    from epochgc.impl.cli import main

    want = f"no cluster under {tmp_path}: start one with `epochgc cluster start`"
    r = CliRunner().invoke(main, [*command, "--data-dir", str(tmp_path), "--json"])
    assert r.exit_code == 64 and json.loads(r.stdout) == {
        "command": " ".join(command), "outcome": "error", "error": want, "exit_code": 64}, \
        r.output
    r = CliRunner().invoke(main, [*command, "--data-dir", str(tmp_path)])
    assert r.exit_code == 64 and r.stdout == "", r.stdout  # without --json: stderr only
    if command == ["barrier"]:
        r = CliRunner().invoke(main, [*command, "--data-dir", str(tmp_path), "--json",
                                      "--wait", "abc"])
        doc = json.loads(r.stdout)
        assert (r.exit_code, doc["exit_code"], doc["command"]) == (64, 64, "barrier"), r.output


@pytest.mark.parametrize("count", ["99999999999999999999", "1000000001", "1e20"])
def test_produce_refuses_a_count_over_its_maximum(made: tuple[str, Path], count: str) -> None:
    """An outside tester (issue 41): `--count 99999999999999999999` was accepted and ran
    until killed."""
    code, out = cli("produce", "--data-dir", made[0], "--partition", "t/0", "--count", count)
    assert code == 64 and "--count" in out, out


def test_produce_refuses_a_batch_too_big_to_build_in_memory(made: tuple[str, Path]) -> None:
    """A batch is built in memory before its upload: --batch x --size x partitions is
    bounded, and only what one batch holds counts (--count smaller than --batch: one batch
    of --count records)."""
    args = ("produce", "--data-dir", made[0], "--partition", "t/0", "--partition", "t/1")
    code, out = cli(*args, "--count", "3000", "--batch", "3000", "--size", "50000")
    assert code == 64, out
    assert "300,000,000 bytes of record bodies (--batch 3000 x --size 50000 x 2 " in out
    assert "give a smaller --batch" in out
    # The bound itself, without producing: exactly MAX_BATCH_BYTES is allowed.
    half = MAX_BATCH_BYTES // 2
    check_batch_bytes(half, MAX_COUNT, 1, 2)
    check_batch_bytes(MAX_COUNT, half, 1, 2)
    with pytest.raises(click.UsageError):
        check_batch_bytes(half + 1, MAX_COUNT, 1, 2)


@pytest.mark.parametrize("command", [
    ["produce", "--partition", "t/0", "--count", "10"],
    ["consume", "--partition", "t/0"],
    ["barrier", "--wait", "0"],
    ["topic", "create", "--partitions", "1", "u"],
])
def test_a_stopped_cluster_is_said_in_plain_words_with_the_way_on(
        made: tuple[str, Path], command: list[str]) -> None:
    """newuser7 H8: on a stopped cluster, `produce` (also `consume`, `barrier`, `topic
    create`) said `Error: ConnectionError: no broker answered epoch: {'status':
    'unreachable', 'message': "[Errno 111] Connect call failed ('127.0.0.1', 33323)"}`:
    a Python class, a dict's repr, and not a word of `cluster start`."""
    data, store = made
    code, out = cli(*command, "--data-dir", data)
    assert code == 1, out
    name = " ".join(command[:2]) if command[0] == "topic" else command[0]
    [line] = [x for x in out.splitlines() if x.startswith(f"epochgc {name}: error: ")]
    assert "ConnectionError" not in line and "{" not in line and "Errno" not in line, line
    assert "no node of the cluster" in line and "answered" in line, line
    assert f"epochgc cluster start --data-dir {Path(data).absolute()} --store {store}" in line, line


_FAILURES: dict[str, Exception] = {
    "runtime": RuntimeError("cluster not ready after 60s: no leader for t/0"),
    "oserror": OSError(24, "Too many open files"),
    "file": FileNotFoundError(2, "No such file or directory", "/x/y"),
}


@click.command()
@click.argument("kind")
def _fails(kind: str) -> None:
    raise _FAILURES[kind]


def test_an_unexpected_failure_is_one_plain_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """newuser7 H8 (and H5, H6): `Error: RuntimeError: cluster not ready after 60s ...`,
    `Error: OSError: [Errno 24] Too many open files`: the top-level handler printed the
    exception's class; now its words (an OSError's strerror and file, as the C library
    says it), exit 1. A command of this module's, loaded as `epochgc` loads its own."""
    from epochgc.impl import cli as cli_mod
    from epochgc.impl import exitcodes

    monkeypatch.setitem(cli_mod.SUBCOMMANDS, "fails", f"{__name__}:_fails")
    monkeypatch.setitem(exitcodes.USES, "fails", (exitcodes.ExitCode.FAILED,))
    monkeypatch.delenv("EPOCHGC_DEBUG", raising=False)
    said = {}
    for kind in _FAILURES:
        r = CliRunner().invoke(main, ["fails", kind])
        assert r.exit_code == 1, r.output
        said[kind] = r.output.strip()
    assert said == {
        "runtime": "epochgc fails: error: cluster not ready after 60s: no leader for t/0",
        "oserror": "epochgc fails: error: Too many open files",
        "file": "epochgc fails: error: /x/y: No such file or directory",
    }, said
