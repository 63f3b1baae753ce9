"""`epochgc gc-package`: the zip and entry script for running `epochgc gc` via spark-submit."""

from __future__ import annotations

import shlex

import click

from epochgc.impl.gc.package import ENTRY_SCRIPT, build_zip, write_entry_script
from epochgc.impl.preflight import writable_dir


@click.command("gc-package")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default="dist",
    show_default=True,
    help="Directory for epochgc.zip and the entry script.",
)
def gc_package(out_dir: str) -> None:
    """Build what spark-submit needs to run `epochgc gc` on a cluster."""
    out = writable_dir(out_dir, "--out")  # before anything is built (issue 41 item 5)
    z = build_zip(out / "epochgc.zip")
    entry = write_entry_script(out / ENTRY_SCRIPT)
    click.echo(f"wrote {z} and {entry}; run it with, for example:")
    click.echo(
        f"  spark-submit --master spark://HOST:7077 --py-files {shlex.quote(str(z))} "
        f"{shlex.quote(str(entry))} --store s3://BUCKET/PREFIX --json"
    )
