"""With --json a machine reads stdout: a command that fails before it has its own JSON to
print (a bad argument, a refusal, a missing extra, a signal) prints one object there too,
the human line staying on stderr (i41y: `gc-admin ... --json` printed nothing on failure).
The shape is the one `epochgc gc --json` gives a round that failed, less the round's counts:
`{"command", "outcome": "error" | "interrupted", "error", "exit_code"}`."""

from __future__ import annotations

import contextlib
import json

import click

# `ctx.meta` (shared by a context, its parent and its children): --json was asked.
_WANTS_JSON = "epochgc.wants_json"


def note_before_parsing(ctx: click.Context, command: click.Command, args: list[str]) -> None:
    """From the arguments as given, for a failure while they are parsed (a usage error).
    Only for a command that has a --json flag."""
    ctx.meta[_WANTS_JSON] = "--json" in args and any(
        p.name == "as_json" for p in command.params)


def note_parsed(ctx: click.Context) -> None:
    """From the parsed value (`pause --reason --json` gives a reason, not --json)."""
    ctx.meta[_WANTS_JSON] = bool(ctx.params.get("as_json"))


def say(ctx: click.Context, command: str | None, outcome: str, error: str, code: int) -> None:
    """The failure object on stdout, if --json was asked."""
    if not ctx.meta.get(_WANTS_JSON):
        return
    with contextlib.suppress(OSError):  # a closed stdout: the exit code still says it
        click.echo(json.dumps({"command": command, "outcome": outcome, "error": error,
                               "exit_code": int(code)}, sort_keys=True))
