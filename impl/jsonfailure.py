"""With --json a machine reads stdout: a command that fails before it has its own JSON to
print (a bad argument, a refusal, a missing extra, a signal) prints one object there too,
the human line staying on stderr (i41y: `gc-admin ... --json` printed nothing on failure).
The shape is the one `epochgc gc --json` gives a round that failed, less the round's counts:
`{"command", "outcome": "error" | "interrupted", "error", "exit_code"}`.

By construction for every command with a --json flag (newuser17 T4: `chaos`, `demo` and
`conform` printed nothing on failure): the `epochgc` group notes its arguments
(`note_args`) and, for any failure it ends a command with, asks the failing command's own
context whether --json was given (`wanted`); `gc` and `gc-admin` note it themselves and
say their own objects first."""

from __future__ import annotations

import contextlib
import json

import click

from epochgc.impl import errorline

# `ctx.meta` (shared by a context, its parent and its children): --json was asked.
_WANTS_JSON = "epochgc.wants_json"
_SAID = "epochgc.json_said"  # the failure object was printed
_NAME = "epochgc.json_command"  # the name `note_parsed` noted (gc, gc-admin's subcommand)
_ARGS = "epochgc.args"  # the arguments after `epochgc` as given (`note_args`)


def _asked(args: list[str]) -> bool:
    """--json among `args`, before a `--` (after it: `conform`'s port's own arguments)."""
    head = args[:args.index("--")] if "--" in args else args
    return "--json" in head


def has_json(command: click.Command) -> bool:
    return any(p.name == "as_json" for p in command.params)


def note_args(ctx: click.Context, args: list[str]) -> None:
    """The `epochgc` group's arguments, before it parses them: for a failure while the
    command's own are parsed, whether --json was among them (and, `given_args`, for a
    signal's line while the subcommand loads)."""
    ctx.meta[_ARGS] = list(args)


def given_args(ctx: click.Context) -> list[str]:
    """The arguments `note_args` noted (empty if none were)."""
    return list(ctx.meta.get(_ARGS, ()))


def wanted(ctx: click.Context) -> bool:
    """Whether the command that fails asked for --json: as its own code noted it, else as
    the deepest context made (the failing command's, impl/errorline.py) parsed it, else
    (parsing failed before the flag) as given. False for a command without the flag."""
    if _WANTS_JSON in ctx.meta:
        return bool(ctx.meta[_WANTS_JSON])
    leaf = errorline.deepest(ctx)
    if not has_json(leaf.command):
        return False
    if "as_json" in leaf.params:  # parsed (`--reason --json` is a reason, not --json)
        return bool(leaf.params["as_json"])
    return _asked(given_args(ctx))


def note_before_parsing(ctx: click.Context, command: click.Command, args: list[str]) -> None:
    """From the arguments as given, for a failure while they are parsed (a usage error).
    Only for a command that has a --json flag."""
    ctx.meta[_WANTS_JSON] = _asked(args) and has_json(command)


def note_parsed(ctx: click.Context) -> None:
    """From the parsed value (`pause --reason --json` gives a reason, not --json); and the
    command's full name (`gc-admin show`, as `cluster status` is named; newuser23 F5:
    gc-admin's objects said `show` alone)."""
    ctx.meta[_WANTS_JSON] = bool(ctx.params.get("as_json"))
    ctx.meta.setdefault(_NAME, errorline.command_of(ctx) or ctx.info_name)


def say(ctx: click.Context, command: str | None, outcome: str, error: str, code: int) -> None:
    """The failure object on stdout, if --json was asked; once (the command's own handler
    and the `epochgc` group's both call it). `command` None: the name `note_parsed` noted,
    else the failing command's path below `epochgc`."""
    if ctx.meta.get(_SAID) or not wanted(ctx):
        return
    ctx.meta[_SAID] = True
    name = command or ctx.meta.get(_NAME) or errorline.command_of(errorline.deepest(ctx))
    with contextlib.suppress(OSError):  # a closed stdout: the exit code still says it
        click.echo(json.dumps({"command": name, "outcome": outcome,
                               "error": errorline.one_line(error), "exit_code": int(code)},
                              sort_keys=True))

