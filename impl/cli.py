"""`epochgc` command line: one group, subcommands registered from the modules that own them."""

from __future__ import annotations

import functools
import importlib
import os
import sys
from typing import Any

import click

from epochgc.impl import closedout, errorline, jsonfailure, signals
from epochgc.impl.cluster.errors import DamagedClusterFile, NoCluster
from epochgc.impl.entry import end_by
from epochgc.impl.exitcodes import SIGNAL_RULE, ExitCode, codes_for, table
from epochgc.impl.preflight import Refused
from epochgc.impl.store.base import StoreError

# name -> "module:attribute"; imported lazily so `epochgc replay` never pays for Spark.
SUBCOMMANDS: dict[str, str] = {
    "replay": "epochgc.model.replay_cli:replay",
    "gc": "epochgc.impl.gc.cli:gc",
    "gc-package": "epochgc.impl.gc.package_cli:gc_package",
    "gc-admin": "epochgc.impl.gc.admin_cli:gc_admin",
    "cluster": "epochgc.impl.cluster.cli:cluster",
    "produce": "epochgc.impl.cluster.cli:produce",
    "consume": "epochgc.impl.cluster.cli:consume",
    "topic": "epochgc.impl.cluster.topic_cli:topic",
    "demo": "epochgc.impl.demo:demo",
    "check-trace": "epochgc.impl.checktrace:check_trace",
    "conform": "epochgc.impl.conform.cli:conform",
    "chaos": "epochgc.impl.chaos.cli:chaos",
    "barrier": "epochgc.impl.cluster.barrier_cli:barrier",
}


# The entries of SUBCOMMANDS that are groups of subcommands (a signal's line names the
# subcommand before the group's module is loaded: `_subcommand_named`; a test checks it).
GROUPS = frozenset({"cluster", "topic", "gc-admin"})

# Commands (outside `impl`) whose output is their work: cut short, they exit 1
# (impl/closedout.py); `impl`'s own say so themselves.
_OUTPUT_IS_WORK = ("replay",)

_LOADING = "epochgc.loading"  # ctx.meta: the subcommand whose module is being loaded
BEFORE_BEGAN = signals.BEFORE_BEGAN  # a signal's line before the command's code began


class _LazyGroup(click.Group):
    """Subcommands load on first use; a failure the user can act on (bad input, an
    unreachable store or node, refused storage) is one line on stderr and exit 1, not a
    traceback (EPOCHGC_DEBUG=1 shows the traceback). Every error any command ends with is
    that line's shape, `epochgc CMD: error: MESSAGE` (impl/errorline.py)."""

    context_class = errorline.Context  # and every subcommand's (`_add_exit_codes`)

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: object) -> click.Context:
        if parent is None:
            # `epochgc --help` and `--version` write while the arguments are parsed, before
            # the group's body guards stdout (newuser8 J1: into /dev/full a click
            # traceback, exit 1; into a closed pipe exit 1 where `gc --help` exits 0).
            closedout.reopen_closed()
            closedout.guard()
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as e:
            raise errorline.usage_failure(e, e.ctx) from None
        except click.exceptions.Exit as e:
            code = closedout.exit_code(e.exit_code)
            if code:
                raise click.exceptions.Exit(code) from None
            raise

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # A command's --json, should its parsing fail; and for a signal's line while the
        # subcommand loads: click has emptied the context's arguments by then
        # (`Group.invoke`), newuser19 V6.
        jsonfailure.note_args(ctx, args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> object:
        # A closed stdout is not by itself a failure (impl/closedout.py): the command's
        # code stands, unless its output was its work and was cut short.
        # Every way out but a signal's is the command's result: complete, a signal from
        # here on does not change the exit code (impl/signals.py `complete`; newuser19 V1:
        # one while click's `sys.exit` unwound said "Aborted!" or a traceback, exit 1).
        # A command's code that returned or exited is complete already (`_ended`); an
        # error it ends with is, here.
        try:
            try:
                rv = self._invoke(ctx)
            except click.ClickException as e:  # with --json, also one object on stdout
                jsonfailure.say(ctx, None, "error", e.format_message(), e.exit_code)
                shaped = errorline.shaped(e, ctx)
                signals.complete(shaped.exit_code)  # its line is said as click exits
                raise shaped from None
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) or e.code is None else 1
            raise SystemExit(closedout.exit_code(code)) from None
        except click.exceptions.Exit as e:
            ctx.exit(closedout.exit_code(e.exit_code) or 0)
        final = closedout.exit_code(0)
        if final:
            ctx.exit(final)
        return rv

    def _invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except errorline.UsageFailure:
            raise
        except click.UsageError as e:
            # Every command's bad argument exits 64, not click's 2 (2 is "blocked"). Click's
            # parser raises "Option '--x' requires an argument." with no context: the
            # command's (the deepest made) gives its usage and name (s29a).
            raise errorline.shaped(e, ctx) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt as e:
            # SIGINT or SIGTERM (impl/signals.py): the command's cleanup has run and said
            # what it did; the exit code says which signal, 128 + its number.
            sig = e if isinstance(e, signals.Interrupted) else signals.interrupted()
            # Issue 41 F12: a signal while the command's module loads comes before click
            # sets `invoked_subcommand` ("epochgc None: interrupted by SIGINT").
            said = interrupted_line(ctx, sig.name, sig.detail)
            click.echo(said, err=True)
            if not closedout.wrote():  # with --json, one object (not a second after its own)
                jsonfailure.say(ctx, None, "interrupted",
                                interrupted_message(sig.name, sig.detail), sig.exit_code)
            signals.ignore_further()  # its cleanup is done: the exit code is decided
            end_by(sig.signum)  # and the process ends by the signal (impl/entry.py)
            ctx.exit(sig.exit_code)
        except NoCluster as e:  # a --data-dir that holds no cluster: a bad argument
            raise Refused(str(e), ExitCode.USAGE) from None
        except DamagedClusterFile as e:  # newuser10 L7: bad input data, one line naming it
            raise Refused(str(e), ExitCode.DATAERR) from None
        except BrokenPipeError:
            # A write that bypassed the guarded stdout (impl/closedout.py) found its reader
            # gone and ended the command before its work did: say nothing more on a closed
            # pipe and end as Python's documentation advises (stdout to /dev/null, so the
            # exit-time flush cannot fail again), exit 1: the work was cut short.
            closedout.to_devnull(sys.stdout.fileno())
            ctx.exit(ExitCode.FAILED)
        except (OSError, RuntimeError, ValueError, StoreError) as e:
            if os.environ.get("EPOCHGC_DEBUG"):
                raise
            raise click.ClickException(_in_words(e)) from e

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        """Click's near-name suggestion ("Did you mean 'cluster'?") is drawn from
        `self.commands`, empty in this lazy group: `epochgc clutser start` said only "No
        such command 'clutser'." where `gc-admin shwo` and `cluster strat` get one
        (newuser18's notes). Raised again with the names it has (click >= 8.2's
        NoSuchCommand; click 8.1 suggests no command anywhere)."""
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError:
            nosuch = getattr(click.exceptions, "NoSuchCommand", None)
            name = args[0] if args else ""
            if nosuch is None or name in SUBCOMMANDS or ctx.resilient_parsing:
                raise
            raise nosuch(name, possibilities=self.list_commands(ctx), ctx=ctx) from None

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = SUBCOMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attr = target.split(":")
        ctx.meta[_LOADING] = cmd_name  # for a signal that comes while it loads
        signals.checkpoint(signals.LOAD_POINT)
        cmd = getattr(importlib.import_module(module), attr)
        assert isinstance(cmd, click.Command)
        _add_exit_codes(cmd, cmd_name)
        return cmd


def interrupted_line(ctx: click.Context, signame: str, detail: str | None) -> str:
    """`epochgc CMD: interrupted by SIGNAL: WHAT WAS DONE`, the last line of a command a
    signal ended. Never bare (newuser15 S3): `detail`, else what the command said it had
    done (`signals.doing`, set as its code begins, `BEFORE_BEGAN` until then). CMD is the
    command's full name, as its error lines say it ("gc-admin pause", not "gc-admin")."""
    name = command_name(ctx)
    who = f"epochgc {name}" if name else "epochgc"
    return f"{who}: {interrupted_message(signame, detail)}"


def interrupted_message(signame: str, detail: str | None) -> str:
    """`interrupted by SIGNAL: WHAT WAS DONE` (`interrupted_line` without its command; the
    `error` of --json's object)."""
    return f"interrupted by {signame}: {detail or signals.done_so_far()}"


def command_name(ctx: click.Context) -> str | None:
    """The running command's full name (`gc-admin pause`), from the deepest context made;
    while its module loads, the name being loaded and, for a group, the subcommand its
    arguments name (issue 41 F12: click had not set `invoked_subcommand` yet)."""
    name = errorline.command_of(errorline.deepest(ctx))
    if name is not None:
        return name
    loading = ctx.meta.get(_LOADING) or ctx.invoked_subcommand
    if not loading:
        return None
    return " ".join([str(loading), *_subcommand_named(ctx, str(loading))])


def _subcommand_named(ctx: click.Context, group: str) -> list[str]:
    """The subcommand of `group` the command line names (its first word after the
    group's that is one), if the group's module is loaded; before it is (a signal while it
    loads), the first word after the group's that is not an option, for a group in
    `GROUPS` (newuser19 V6: "epochgc cluster: interrupted", where later lines said
    "epochgc cluster start"; these groups take no option of their own but --help)."""
    module, attr = SUBCOMMANDS[group].split(":")
    cmd = getattr(sys.modules.get(module), attr, None)
    args = jsonfailure.given_args(ctx) or [*ctx.protected_args, *ctx.args]
    after = args[args.index(group) + 1:] if group in args else args
    if not isinstance(cmd, click.Group):
        if cmd is None and group in GROUPS:
            return next(([a] for a in after if not a.startswith("-")), [])
        return []
    return next(([a] for a in after if a in cmd.commands), [])


def _mark_begun(cmd: click.Command) -> None:
    """A command's own code (its callback; not a group's, which only passes on) notes
    that it has begun: a signal before then did nothing (`BEFORE_BEGAN`)."""
    inner = cmd.callback
    if inner is None or isinstance(cmd, click.Group):
        return

    @functools.wraps(inner)
    def begun(*args: Any, **kwargs: Any) -> Any:
        # From here a signal's line says what was done; nothing yet (newuser15 S3).
        signals.doing(signals.NOTHING_YET)
        signals.checkpoint(signals.BEGAN_POINT)  # the signal tests' point (newuser15 S3)
        try:
            rv = inner(*args, **kwargs)
        except SystemExit as e:  # its result, unless a signal's (`complete` knows)
            _ended(e.code if isinstance(e.code, int) or e.code is None else 1)
            raise
        except click.exceptions.Exit as e:
            _ended(e.exit_code)
            raise
        _ended(0)
        return rv

    cmd.callback = begun


def _ended(code: int | None) -> None:
    """A command's code has returned or exited with `code`: its work is complete
    (`signals.complete`; a command may say so before, where its result was decided: its
    verdict written). newuser19 V2: a signal there said "interrupted ... nothing was
    written yet" after check-trace's verdict."""
    signals.complete(code)
    signals.checkpoint(signals.ENDED_POINT)  # the signal tests' point: the work complete


def _in_words(e: BaseException) -> str:
    """A failure in words, not a Python class (newuser7 H8: `Error: OSError: [Errno 24]
    Too many open files`, `Error: RuntimeError: cluster not ready ...`): an OSError as the
    C library says it, with its file; anything else its own message."""
    if isinstance(e, OSError):
        return errorline.os_error(e)
    return str(e) or type(e).__name__


def _add_exit_codes(cmd: click.Command, path: str) -> None:
    """Each command's help ends with the exit codes it can give (impl/exitcodes.py), its
    subcommands' too; once per command object. Its line in its group's list is its whole
    first sentence (click cuts it at ~45 characters, mid-sentence)."""
    if getattr(cmd, "_epochgc_exit_codes", False):
        return
    cmd.context_class = errorline.Context  # its errors name it (impl/errorline.py)
    if cmd.short_help is None:
        cmd.short_help = cmd.get_short_help_str(limit=1000)
    rows = table(codes_for(path))
    cmd.epilog = f"{cmd.epilog}\n\n{rows}" if cmd.epilog else rows
    cmd._epochgc_exit_codes = True  # type: ignore[attr-defined]
    _mark_begun(cmd)
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            _add_exit_codes(sub, f"{path} {name}")


@click.group(cls=_LazyGroup, epilog=f"{table(codes_for('epochgc'))}\n\n{closedout.RULE}\n\n"
                                    f"{errorline.RULE}\n\n{SIGNAL_RULE}")
@click.version_option(package_name="epochgc")
def main() -> None:
    """epochgc: windowed epoch fencing and epoch-based GC of L0 objects."""
    # SIGINT and SIGTERM (a scheduler's timeout, `timeout`, `kill`) unwind alike, so every
    # command's cleanup runs: `demo` and `chaos` stop the broker processes they started
    # (their own sessions, so nothing else would) instead of leaving them running; the
    # exit code is 130 or 143 (impl/signals.py). A command with its own handling (`gc`:
    # stop at a batch boundary) installs its own.
    signals.install()
    ctx = click.get_current_context()
    signals.named(lambda: command_name(ctx))  # a late signal's line names the command
    closedout.named(ctx)
    closedout.guard()
    closedout.guard_stderr()
    if click.get_current_context().invoked_subcommand in _OUTPUT_IS_WORK:
        closedout.output_is_work()


if __name__ == "__main__":  # `python -m epochgc.impl.cli`: ended as the entry point ends it
    from epochgc.impl import entry

    entry.register_first()
    entry.run(main)
