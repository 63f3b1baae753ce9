"""`epochgc replay [--variant NAME] FILE.jsonl`: replay conformance vectors through the
model (spec/VECTORS.md). A thin click wrapper over `model.replay.run`."""

from __future__ import annotations

import os

import click

import epochgc
from epochgc.model.replay import ReplayError, resolve_variant, run

VECTORS = ("spec", "vectors")


@click.command("replay")
@click.option(
    "--variant",
    "variant_name",
    metavar="NAME",
    default=None,
    help="Model variant to replay under (default: the file's `# variant: NAME` header, "
    "else a `-NAME.jsonl` file name suffix, else reference).",
)
@click.option(
    "--vector",
    metavar="NAME",
    default=None,
    help="A vector file shipped with epochgc, by name (e.g. fence-window-reference), "
    "instead of FILE.jsonl.",
)
@click.argument("file", metavar="FILE.jsonl", required=False)
def replay(variant_name: str | None, vector: str | None, file: str | None) -> None:
    """Replay FILE.jsonl (`-` for stdin), or a shipped vector (--vector NAME), step by
    step, one JSON result line per step.

    Exit 0 when every expect holds, 1 when one disagrees, 65 on bad input.
    """
    if (vector is None) == (file is None):
        raise click.UsageError("give FILE.jsonl or --vector NAME (one of them)")
    if variant_name is not None:
        # A bad option value is a usage error (64), as `conform --variant` says it; 65 is
        # for the file (a `# variant:` header naming no variant). newuser21 X2: 65, and
        # "variant:", not "--variant:".
        try:
            resolve_variant(variant_name)
        except ReplayError as e:
            raise click.UsageError(f"--variant: {e.message}") from None
    if vector is not None:
        # By name only (newuser9 K10: the tour found the path with `python -c`, which a
        # `pipx install` does not put on PATH): no path, so no file outside the vectors.
        name = vector.removesuffix(".jsonl")
        shipped = epochgc.data_path(*VECTORS)
        names = sorted(n.removesuffix(".jsonl") for n in os.listdir(shipped)
                       if n.endswith(".jsonl"))
        if name == "list":  # the names, one a line
            for n in names:
                click.echo(n)
            raise SystemExit(0)
        if name not in names:
            raise click.BadParameter(f"{vector!r} is not a shipped vector; "
                                     "`epochgc replay --vector list` names them",
                                     param_hint="--vector")
        file = os.path.join(shipped, name + ".jsonl")
    assert file is not None  # one of them, checked above
    # The CLI's interrupted line (the model itself imports nothing of impl).
    from epochgc.impl import signals

    written = 0

    def out(line: str) -> None:
        nonlocal written
        click.echo(line)
        written += 1
        signals.checkpoint("result")  # the signal tests' point: a step's result written

    def done() -> str:
        # newuser16 S10: after results were written the line said "nothing was written
        # yet" (before: a bare "interrupted by SIGINT"), not how far the replay got.
        if not written:
            return signals.NOTHING_YET
        # The count goes up once a line is out: the next line may be out too, in whole
        # or in part, if the signal came as it was written.
        # "if any": the last step is known only once the input has ended (newuser19 V2:
        # "the steps after them were not replayed" after the last one). "Written", not
        # "replayed": a result is written once the next step is replayed (`run`).
        return (f"the results of the first {written:,} step(s) were written (and perhaps "
                "the next one's); the results of the steps after them, if any, were not")

    signals.doing(done)
    # The last result and the summary under `finishing`: once the input has ended and
    # they are written, a signal no longer changes the exit code (newuser20 W3).
    code = run(file, variant_name, out=out, err=lambda line: click.echo(line, err=True),
               finishing=signals.finishing)
    raise SystemExit(code)

