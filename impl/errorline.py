"""Every command's error is one line, the last it writes to stderr, in one shape:

    epochgc CMD: error: MESSAGE

CMD the command's full name (`gc`, `gc-admin show`, `cluster start`). newuser13 Q9:
"Error: epochgc gc: Java not found" (click's prefix on a message that carried its own),
`produce` ended "Error: ..." where `gc` said "epochgc gc: error: ...", `gc-admin` said
"gc-admin: show: ...", `replay`/`check-trace`/`conform` "epochgc replay: ..." with no word
saying it was an error. The shape is the GNU Coding Standards' "Formatting Error Messages"
(`program: message` when no source file is involved), with the command as the program, the
way `gc` already said its failures and every command its interruptions ("epochgc gc:
interrupted by SIGINT"): a line that names its command reads alone in a scheduler's log
where several commands write.

A usage error keeps click's usage and "Try ... --help" lines above its error line. A
verdict (a check that ran and found a disagreement, a GC round blocked or paused) is the
command's own report, not an error (docs/exit-codes in the README).
"""

from __future__ import annotations

import errno
import functools
import traceback
from typing import IO, Any

import click

from epochgc.impl.exitcodes import ExitCode
from epochgc.impl.gc.text import echo_safe

PROG = "epochgc"
# Said in `epochgc --help` under the exit-code table, and in the README.
RULE = ("An error is one line, the last on stderr: `epochgc CMD: error: MESSAGE` (a usage "
        "error has click's usage lines above it); a signal's is `epochgc CMD: interrupted "
        "by SIGNAL: ...`.")
_DEEPEST = "epochgc.deepest_context"  # ctx.meta: the last context made (`Context`)


def line(command: str | None, message: str) -> str:
    """The error line of `command` (None: the `epochgc` group itself). One line whatever
    `message` holds: its lines joined with "; " (newuser17 T5: `cluster start`'s refusal
    put each differing option on a line of its own, so the last stderr line was not the
    error; a message quoting another program's output may hold newlines too)."""
    message = one_line(message)
    return f"{PROG} {command}: error: {message}" if command else f"{PROG}: error: {message}"


def os_error(e: OSError, with_file: bool = True) -> str:
    """An OSError as the C library says it, with its file, not as Python's class and errno
    (newuser7 H8: `Error: OSError: [Errno 24] Too many open files`). EFBIG names the
    limit that gives it (newuser25 H5: `OSError: [Errno 27] File too large` from Spark's
    own temporary file under `ulimit -f`, no file named: setrlimit(2) RLIMIT_FSIZE, "the
    maximum size in bytes of files that the process may create"). `with_file` False: the
    caller names the file itself."""
    if not e.strerror:
        return str(e) or type(e).__name__
    said = f"{e.filename}: {e.strerror}" if e.filename and with_file else e.strerror
    if e.errno == errno.EFBIG:
        said += (" (a file reached this process's file-size limit, `ulimit -f`, or the "
                 "largest file its file system holds)")
    return said


def in_spark(e: BaseException) -> bool:
    """Whether `e` was raised inside PySpark's own code (a temporary file of the driver's,
    its gateway): the line then says so, as no file of ours is named."""
    return any("/pyspark/" in frame.filename for frame in traceback.extract_tb(e.__traceback__))


def one_line(message: str) -> str:
    """`message`'s non-blank lines, each stripped, joined with "; " (with a space after
    one that ends in ":", which introduces what follows)."""
    if "\n" not in message and "\r" not in message:
        return message
    parts = [s for s in (x.strip() for x in message.splitlines()) if s]
    if not parts:
        return ""
    out = parts[0]
    for p in parts[1:]:
        out += f" {p}" if out.endswith(":") else f"; {p}"
    return out


def command_of(ctx: click.Context | None) -> str | None:
    """`gc-admin show`: the names of `ctx` and its parents below the `epochgc` group. A
    command run alone (`gc` under spark-submit, prog_name "epochgc gc") is its root."""
    names: list[str] = []
    while ctx is not None and ctx.parent is not None:
        names.insert(0, ctx.info_name or "")
        ctx = ctx.parent
    if ctx is not None and not names and (ctx.info_name or "").startswith(f"{PROG} "):
        return (ctx.info_name or "")[len(PROG) + 1:]
    return " ".join(n for n in names if n) or None


class Context(click.Context):
    """A context that notes itself as the deepest one made (contexts are made root first,
    and share `meta`): an error raised by a command's code carries no context, and by the
    time it reaches the `epochgc` group the command's context has been left."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.meta[_DEEPEST] = self


def deepest(ctx: click.Context) -> click.Context:
    found = ctx.meta.get(_DEEPEST)
    return found if isinstance(found, click.Context) else ctx


class Failure(click.ClickException):
    """A ClickException shown in the shape (`shaped`); its class carries the exit code."""

    command: str | None = None

    def show(self, file: IO[Any] | None = None) -> None:
        # Never raises for the text (a key with a lone surrogate, an ASCII stream).
        echo_safe(line(self.command, self.format_message()), err=True, file=file)


@functools.cache
def _failure_class(code: int) -> type[Failure]:
    return type(f"Failure{code}", (Failure,), {"exit_code": code})


class UsageFailure(click.UsageError):
    """A usage error: click's usage and hint lines, then the error line (exit 64)."""

    exit_code = ExitCode.USAGE

    def show(self, file: IO[Any] | None = None) -> None:
        if self.ctx is not None:
            hint = ""
            if self.ctx.command.get_help_option(self.ctx) is not None:
                names = self.ctx.command.get_help_option_names(self.ctx)
                hint = f"Try '{self.ctx.command_path} {max(names, key=len)}' for help.\n"
            echo_safe(f"{self.ctx.get_usage()}\n{hint}", err=True, file=file)
        echo_safe(line(command_of(self.ctx), self.format_message()), err=True, file=file)


class NoCommand(UsageFailure):
    """A group run without a command (`epochgc`, `epochgc cluster`): its help, as click
    shows it, then the error line in the shape, exit 64 (a usage error). Click >= 8.2
    raises a usage error whose message IS the help; shown as one error line that was a
    3,240-character line (newuser21 X3)."""

    def __init__(self, ctx: click.Context) -> None:
        super().__init__(f"give a command: `{ctx.command_path} --help` lists them", ctx)

    def show(self, file: IO[Any] | None = None) -> None:
        assert self.ctx is not None
        echo_safe(self.ctx.get_help() + "\n", err=True, file=file)
        echo_safe(line(command_of(self.ctx), "give a command (listed above)"), err=True,
                  file=file)


def usage_failure(e: click.UsageError, ctx: click.Context | None) -> UsageFailure:
    """`e` as a usage error in the shape (`ctx`: its context when `e` has none)."""
    where = e.ctx or ctx
    no_args = getattr(click.exceptions, "NoArgsIsHelpError", None)  # click >= 8.2
    if no_args is not None and isinstance(e, no_args) and where is not None:
        return NoCommand(where)
    return UsageFailure(e.format_message(), where)


def shaped(e: click.ClickException, ctx: click.Context) -> click.ClickException:
    """`e` as an exception that shows itself in the shape, with its exit code; `ctx` any
    context of the run (its deepest names the command)."""
    if isinstance(e, Failure | UsageFailure):
        return e
    if isinstance(e, click.UsageError):
        return usage_failure(e, deepest(ctx))
    f = _failure_class(e.exit_code)(e.format_message())
    f.command = command_of(deepest(ctx))
    return f
