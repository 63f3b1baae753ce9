"""One exit-code table for every command (issue 41 item 6, impl/exitcodes.py): walked from
the click command tree itself, so a command added later is checked without being listed
here. Old code: a bad argument was 64 for `gc` and click's 2 everywhere else (2 is `gc`'s
"blocked"); `conform` exited 2 for a missing extra and 3 (`gc`'s "paused") for a broken
port; `replay` 2 for bad input; garbage in a health report was `error`, exit 1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from epochgc.impl import closedout, errorline
from epochgc.impl.cli import SUBCOMMANDS, main
from epochgc.impl.exitcodes import MEANING, SIGNAL_RULE, USES, ExitCode, codes_for
from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.metrics import export_metrics
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.gc.reports import HEALTH_PREFIX
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.url import StoreSpec
from epochgc.model import replay
from tests.gc.helpers import NOW, simple_cluster


def _tree() -> Iterator[tuple[str, click.Command]]:
    """Every command under `epochgc`, by full name, loaded as `epochgc` loads it."""
    ctx = click.Context(main)
    assert isinstance(main, click.Group)
    stack: list[tuple[str, click.Group, click.Context]] = [("", main, ctx)]
    while stack:
        prefix, group, gctx = stack.pop()
        for name in group.list_commands(gctx):
            cmd = group.get_command(gctx, name)
            assert cmd is not None, name
            path = f"{prefix} {name}".strip()
            yield path, cmd
            if isinstance(cmd, click.Group):
                stack.append((path, cmd, click.Context(cmd, parent=gctx, info_name=name)))


COMMANDS = sorted(path for path, _ in _tree())


def test_the_walk_sees_every_registered_command() -> None:
    top = {p for p in COMMANDS if " " not in p}
    assert top == set(SUBCOMMANDS)
    assert {"cluster start", "gc-admin show", "topic delete"} <= set(COMMANDS)


@pytest.mark.parametrize("path", COMMANDS)
def test_a_bad_argument_exits_64(path: str) -> None:
    """An unknown option on every command (and an unknown subcommand on every group):
    64, one error line (impl/errorline.py), never click's 2."""
    r = CliRunner().invoke(main, [*path.split(), "--no-such-option-41"])
    assert r.exit_code == ExitCode.USAGE, (path, r.exit_code, r.output)
    assert "No such option" in r.output
    cmd = dict(_tree())[path]
    if isinstance(cmd, click.Group):
        r = CliRunner().invoke(main, [*path.split(), "no-such-command-41"])
        assert r.exit_code == ExitCode.USAGE, (path, r.exit_code, r.output)


def test_unknown_command_and_bad_root_option_exit_64() -> None:
    assert CliRunner().invoke(main, ["no-such-command"]).exit_code == ExitCode.USAGE
    assert CliRunner().invoke(main, ["--bogus"]).exit_code == ExitCode.USAGE


_GROUPS = ["", *(p for p, c in _tree() if isinstance(c, click.Group))]


@pytest.mark.parametrize("group", _GROUPS, ids=lambda g: g or "epochgc")
def test_every_group_suggests_the_subcommand_a_typo_was_near(group: str) -> None:
    """newuser18's notes. Old code: `epochgc clutser start` said "No such command
    'clutser'." alone (the top group loads its commands lazily: click's suggestion, drawn
    from the loaded ones, had none), where `gc-admin shwo` got "Did you mean 'show'?"."""
    if not hasattr(click.exceptions, "NoSuchCommand"):
        pytest.skip("click < 8.2 suggests no command anywhere")
    names = sorted(p.rsplit(" ", 1)[-1] for p in COMMANDS
                   if p.startswith(f"{group} ".lstrip()) and p.count(" ") == group.count(" ")
                   + (1 if group else 0))
    assert names, group
    for name in names:
        typo = name + name[-1]  # its last letter typed twice: 'clusterr', 'gcc'
        r = CliRunner().invoke(main, [*group.split(), typo, "--help"])
        assert r.exit_code == ExitCode.USAGE, (group, typo, r.output)
        assert f"No such command '{typo}'." in r.output and f"'{name}'" in r.output \
            and "Did you mean" in r.output, (group, typo, r.output)


@pytest.mark.parametrize("path", ["epochgc", *COMMANDS])
def test_every_help_ends_with_its_exit_codes(path: str) -> None:
    args = [] if path == "epochgc" else path.split()
    r = CliRunner().invoke(main, [*args, "--help"], terminal_width=100)
    assert r.exit_code == 0, r.output
    rows, _, after = r.output.partition("Exit codes:\n")[2].partition("\n\n")
    assert rows, f"{path}: no exit-code table in --help"
    if path == "epochgc":  # the closed-stdout rule (newuser3 N2), the error line's shape
        # (newuser13 Q9) and how an interrupted command ends (issue 41, s27e), under the table
        assert [" ".join(p.split()) for p in after.split("\n\n")] == [
            closedout.RULE, errorline.RULE, SIGNAL_RULE], after
    listed = [int(line.split()[0]) for line in rows.splitlines() if line.strip()]
    assert listed == [int(c) for c in codes_for(path)], (path, listed)
    for code in codes_for(path):
        assert MEANING[code] in rows


def test_only_gc_admin_show_lists_blocked_and_paused() -> None:
    """newuser23 F5: every gc-admin command's --help listed 2 and 3, which only `show`
    gives (its M blocked, its store paused); the group lists what any of them gives."""
    for path in COMMANDS:
        if path.startswith("gc-admin "):
            has = {ExitCode.BLOCKED, ExitCode.PAUSED} <= set(codes_for(path))
            assert has == (path == "gc-admin show"), path
    assert {ExitCode.BLOCKED, ExitCode.PAUSED} <= set(codes_for("gc-admin"))


def test_every_command_declares_its_codes_and_every_code_is_used() -> None:
    for path in COMMANDS:
        codes_for(path)  # raises for a command USES does not know
    used = {c for codes in USES.values() for c in codes if codes is not USES["epochgc"]}
    assert used | {ExitCode.USAGE, ExitCode.SIGHUP, ExitCode.SIGINT,
                   ExitCode.SIGTERM} == set(ExitCode)


def test_no_one_liner_is_cut_mid_sentence() -> None:
    """Issue 41 item 11: `epochgc --help` cut most one-liners at ~45 characters ("...")."""
    for args in [[], *(p.split() for p in COMMANDS if isinstance(dict(_tree())[p], click.Group))]:
        r = CliRunner().invoke(main, [*args, "--help"], terminal_width=100)
        commands = r.output.partition("Commands:\n")[2].partition("Exit codes:")[0]
        assert commands.strip(), args
        assert "..." not in commands, (args, commands)


def test_replay_uses_the_table() -> None:
    """The model imports nothing of impl/: its copy of the numbers must agree."""
    assert (replay.EXIT_OK, replay.EXIT_MISMATCH, replay.EXIT_BAD_INPUT) == (
        ExitCode.OK, ExitCode.FAILED, ExitCode.DATAERR)


def test_replay_and_check_trace_bad_input_exit_65(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    assert CliRunner().invoke(main, ["replay", str(bad)]).exit_code == ExitCode.DATAERR
    assert CliRunner().invoke(main, ["check-trace", str(bad)]).exit_code == ExitCode.DATAERR


def _no_spark() -> None:
    raise AssertionError("a blocked round must not start Spark")


def test_garbage_in_a_health_report_blocks_the_round(tmp_path: Path) -> None:
    """impl/gc/README.md's fault table and `gc-admin show` call it blocked (2); the round
    said `error`, exit 1, and `epochgc_gc_round_safety_blocked` stayed 0."""
    store = LocalStore(tmp_path)
    simple_cluster(store, 50)
    store.put(f"{HEALTH_PREFIX}n1.json", b'{"node": "n1", "written_at": ')
    s = run_gc(_no_spark, StoreSpec("file", str(tmp_path)),  # type: ignore[arg-type]
               GcOptions(max_report_age_s=300.0), clock=lambda: NOW)
    assert (s.outcome, s.exit_code) == ("blocked", ExitCode.BLOCKED), (s.outcome, s.error)
    assert s.safety_blocked and s.deleted == 0 and "n1.json" in (s.blocked or "")
    [rec] = [o.key for o in store.list_all(ROUNDS_PREFIX)]
    doc = json.loads(store.get(rec))
    assert doc["outcome"] == "blocked" and doc["health"]["state"] == "unknown"
    metrics = tmp_path / "m.prom"
    export_metrics(s, str(metrics), None)
    assert "epochgc_gc_round_safety_blocked 1.0" in metrics.read_text()


def test_gc_admin_readme_lists_the_codes_its_help_lists() -> None:
    """Issue 41 item 11. Old code: impl/gc/README.md said 0/1/64/130/143 for every gc-admin
    command while `--help` (and `show`) used 2 and 3 too: `{2, 3} missing`."""
    import re

    text = (Path(__file__).resolve().parents[2] / "impl/gc/README.md").read_text()
    para = text.partition("Exit codes (every gc-admin command")[2].partition("\n\n")[0]
    assert para, "impl/gc/README.md: no gc-admin exit-code paragraph"
    said = {int(n) for n in re.findall(r"\b(\d{1,3})\b", para)}
    missing = {int(c) for c in codes_for("gc-admin show")} - said
    assert not missing, f"{missing} missing"


def _float_options() -> list[tuple[str, str]]:
    """(command, option) for every option of every command whose values are floats."""
    return sorted((path, param.opts[0]) for path, cmd in _tree() for param in cmd.params
                  if isinstance(param, click.Option)
                  and isinstance(param.type, click.types.FloatParamType))


def test_the_walk_sees_the_float_options() -> None:
    assert {("demo", "--seconds"), ("chaos", "--seconds"),
            ("cluster start", "--mint-interval")} <= set(_float_options())


@pytest.mark.parametrize(("path", "option"), _float_options())
@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e400"])
def test_every_float_option_refuses_a_value_that_is_not_finite(
        path: str, option: str, value: str) -> None:
    """newuser7 H6: `demo --seconds nan`, `chaos --seconds nan` ran and exited 0, and
    `cluster start --mint-interval nan` wrote NaN into cluster.json and never minted an
    epoch: click's FloatRange compares, and every comparison with NaN is false. Walked
    from the command tree, so a float option added later is checked too. Its type's own
    conversion is called (the command never runs)."""
    cmd = dict(_tree())[path]
    [param] = [p for p in cmd.params if isinstance(p, click.Option) and p.opts[0] == option]
    with pytest.raises(click.BadParameter) as e:
        param.type.convert(value, param, click.Context(cmd))
    assert "finite" in e.value.message or "range" in e.value.message, e.value.message


@pytest.mark.parametrize("argv", [
    ["demo", "--seconds", "nan"],
    ["chaos", "--seconds", "nan"],
    ["cluster", "start", "--mint-interval", "nan"],
    ["cluster", "start", "--mint-interval", "1e-300"],
    ["cluster", "start", "--mint-interval", "1e9"],
    ["cluster", "start", "--nodes", "100000"],
])
def test_non_finite_and_absurd_values_exit_64_in_one_line(
        argv: list[str], tmp_path: Path) -> None:
    """newuser7 H6, end to end: `cluster start --mint-interval 1e-300` minted ~100 epochs a
    second, `--nodes 100000` failed after 12 s with `OSError: Too many open files`
    (exit 1). Each is refused before anything starts: 64, one line naming the option."""
    if argv[0] == "cluster":
        argv = [*argv, "--data-dir", str(tmp_path / "c"), "--store", str(tmp_path / "s")]
    r = CliRunner().invoke(main, argv)
    assert r.exit_code == ExitCode.USAGE, (r.exit_code, r.output)
    [line] = [x for x in r.output.splitlines() if ": error: " in x]
    assert argv[argv.index(next(a for a in argv if a.startswith("--")))] in line, line
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("line", [
    "[" * 100_000 + "]" * 100_000,
    '{"op": ' + "[" * 990 + "]" * 990 + "}",
    '{"type": "placeholder", "epoch": ' + "[" * 990 + "]" * 990 + "}",
    '{"op": ' + "[" * 400 + "]" * 400 + "}",
    '{"type": "placeholder", "epoch": ' + "[" * 400 + "]" * 400 + "}",
])
def test_deeply_nested_json_in_replay_and_check_trace_exits_65(
        tmp_path: Path, line: str) -> None:
    """newuser8 I3: 100,000 '[' gave "Error: RecursionError", exit 1; nesting just under
    the interpreter's limit must not reach it elsewhere (a message quoting the value)."""
    deep = tmp_path / "deep.jsonl"
    deep.write_text(line + "\n")
    for command in ("replay", "check-trace"):
        r = CliRunner().invoke(main, [command, str(deep)])
        assert r.exit_code == ExitCode.DATAERR, (command, r.output[-300:])
        assert "RecursionError" not in r.output and f"{deep}:1" in r.output, r.output[-300:]


@pytest.mark.parametrize("line", [
    "1" * 5000,
    '{"op": "fence", "term": ' + "1" * 5000 + ', "epoch": 1}',
    '{"v": ' + "9" * 4301 + "}",
])
def test_an_integer_beyond_int_str_limit_in_replay_and_check_trace_exits_65(
        tmp_path: Path, line: str) -> None:
    """s28f (beside newuser16 S3): an integer of more than 4300 digits (CPython's bound on
    int(str)) gave exit 1 "error: Exceeds the limit (4300 digits) for integer string
    conversion ... use sys.set_int_max_str_digits()", no file or line, from both."""
    digits = tmp_path / "digits.jsonl"
    digits.write_text(line + "\n")
    for command in ("replay", "check-trace"):
        r = CliRunner().invoke(main, [command, str(digits)])
        assert r.exit_code == ExitCode.DATAERR, (command, r.output[-300:])
        assert f"{digits}:1: " in r.output, r.output[-300:]
        assert "an integer longer than 4300 digits" in r.output, r.output[-300:]
        assert "set_int_max_str_digits" not in r.output, r.output[-300:]


def _valued_options() -> list[tuple[str, str]]:
    """(command, option) for every option of every command that takes a value."""
    return [(path, p.opts[0]) for path, cmd in _tree() if not isinstance(cmd, click.Group)
            for p in cmd.params
            if isinstance(p, click.Option) and not p.is_flag and p.opts[0] != "--help"]


def test_the_walk_sees_the_valued_options() -> None:
    assert {("cluster status", "--data-dir"), ("gc", "--store"),
            ("gc-admin show", "--store")} <= set(_valued_options())


@pytest.mark.parametrize(("path", "option"), _valued_options())
def test_an_option_missing_its_value_names_the_command(path: str, option: str) -> None:
    """s29a: `epochgc cluster status --data-dir` (the value left off) said `epochgc: error:
    Option '--data-dir' requires an argument.`, with no usage lines: click's parser raises
    that error without a context, and the group shaped it as its own. It is the
    command's usage error: its usage, its hint, its name in the line, 64."""
    r = CliRunner().invoke(main, [*path.split(), option], prog_name="epochgc")
    assert r.exit_code == ExitCode.USAGE, (r.exit_code, r.output)
    last = r.stderr.strip().splitlines()[-1]
    assert last == f"epochgc {path}: error: Option '{option}' requires an argument.", last
    assert f"Usage: epochgc {path} " in r.stderr, r.stderr


@pytest.mark.parametrize("group", _GROUPS, ids=lambda g: g or "epochgc")
def test_a_group_without_a_command_shows_its_help_then_one_short_error_line(
        group: str) -> None:
    """newuser21 X3: `epochgc` alone (the first thing a new user types; `cluster`,
    `gc-admin`, `topic` the same) printed click's usage, then its whole help flattened into
    one 3,240-character "epochgc: error: Usage: ...; Options: ...; Commands: ..." line
    (click >= 8.2 raises a usage error whose message is the help). Now the help as
    `--help` shows it, then one short error line in the shape; a usage error, 64."""
    r = CliRunner().invoke(main, group.split(), terminal_width=100)
    assert r.exit_code == ExitCode.USAGE, (group, r.exit_code, r.output)
    lines = r.stderr.splitlines()
    who = f"epochgc {group}" if group else "epochgc"
    assert lines[-1] == f"{who}: error: give a command (listed above)", lines[-3:]
    helped = CliRunner().invoke(main, [*group.split(), "--help"], terminal_width=100)
    assert r.stderr == f"{helped.stdout}\n{lines[-1]}\n", r.stderr  # --help's text whole
    assert {"Commands:", "Exit codes:"} <= {x.strip() for x in lines}, r.stderr
    assert r.stdout == ""
