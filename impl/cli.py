"""`epochgc` command line: one group, subcommands registered from the modules that own them."""

from __future__ import annotations

import importlib
import os

import click
from epochgc.impl import signals
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


class _LazyGroup(click.Group):
    """Subcommands load on first use; a failure the user can act on (bad input, an
    unreachable store or node, refused storage) is one line on stderr and exit 1, not a
    traceback (EPOCHGC_DEBUG=1 shows the traceback)."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt as e:
            # SIGINT or SIGTERM (impl/signals.py): the command's cleanup has run and said
            # what it did; the exit code says which signal, 128 + its number.
            sig = e if isinstance(e, signals.Interrupted) else signals.interrupted()
            click.echo(f"epochgc {ctx.invoked_subcommand}: interrupted by {sig.name}",
                       err=True)
            ctx.exit(sig.exit_code)
        except (OSError, RuntimeError, ValueError, StoreError) as e:
            if os.environ.get("EPOCHGC_DEBUG"):
                raise
            raise click.ClickException(f"{type(e).__name__}: {e}") from e

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = SUBCOMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attr = target.split(":")
        cmd = getattr(importlib.import_module(module), attr)
        assert isinstance(cmd, click.Command)
        return cmd


@click.group(cls=_LazyGroup)
@click.version_option(package_name="epochgc")
def main() -> None:
    """epochgc: windowed epoch fencing and epoch-based GC of L0 objects."""
    # SIGINT and SIGTERM (a scheduler's timeout, `timeout`, `kill`) unwind alike, so every
    # command's cleanup runs: `demo` and `chaos` stop the broker processes they started
    # (their own sessions, so nothing else would) instead of leaving them running; the
    # exit code is 130 or 143 (impl/signals.py). A command with its own handling (`gc`:
    # stop at a batch boundary) installs its own.
    signals.install()


if __name__ == "__main__":
    main()
