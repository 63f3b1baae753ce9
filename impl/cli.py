"""`epochgc` command line: one group, subcommands registered from the modules that own them."""

from __future__ import annotations

import importlib

import click

# name -> "module:attribute"; imported lazily so `epochgc replay` never pays for Spark.
SUBCOMMANDS: dict[str, str] = {
    "replay": "model.replay_cli:replay",
    "gc": "impl.gc.cli:gc",
    "cluster": "impl.cluster.cli:cluster",
    "produce": "impl.cluster.cli:produce",
    "consume": "impl.cluster.cli:consume",
    "demo": "impl.demo:demo",
}


class _LazyGroup(click.Group):
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


if __name__ == "__main__":
    main()
