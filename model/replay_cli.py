"""`epochgc replay [--variant NAME] FILE.jsonl`: replay conformance vectors through the
model (spec/VECTORS.md). A thin click wrapper over `model.replay.run`."""

from __future__ import annotations

import click

from epochgc.model.replay import run


@click.command("replay")
@click.option(
    "--variant",
    "variant_name",
    metavar="NAME",
    default=None,
    help="Model variant to replay under (default: the file's `# variant: NAME` header, "
    "else a `-NAME.jsonl` file name suffix, else reference).",
)
@click.argument("file", metavar="FILE.jsonl")
def replay(variant_name: str | None, file: str) -> None:
    """Replay FILE.jsonl (`-` for stdin) step by step, one JSON result line per step.

    Exit 0 when every expect holds, 1 when one disagrees, 65 on bad input.
    """
    code = run(
        file,
        variant_name,
        out=click.echo,
        err=lambda line: click.echo(line, err=True),
    )
    raise SystemExit(code)
