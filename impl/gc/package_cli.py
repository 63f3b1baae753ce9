"""`epochgc gc-package`: the zip and entry script for running `epochgc gc` via spark-submit."""

from __future__ import annotations

import os
import shlex

import click

from epochgc.impl import closedout, pathopt, signals
from epochgc.impl.exitcodes import ExitCode
from epochgc.impl.gc.package import ENTRY_SCRIPT, build_zip, write_entry_script
from epochgc.impl.preflight import Refused, writable_dir

ZIP = "epochgc.zip"


@click.command("gc-package")
@click.option(
    "--out",
    "out_dir",
    type=pathopt.Path(file_okay=False),
    default="dist",
    show_default=True,
    help=f"Directory for {ZIP} and the entry script ({ENTRY_SCRIPT}); made if missing. "
         "Other files in it are left alone.",
)
@click.option("--force", is_flag=True,
              help=f"Replace {ZIP} and {ENTRY_SCRIPT} if --out already holds them (without "
                   "it they are never overwritten, as --list and --manifest are not).")
def gc_package(out_dir: str, force: bool) -> None:
    """Build what spark-submit needs to run `epochgc gc` on a cluster."""
    out = writable_dir(out_dir, "--out")  # before anything is built (issue 41 item 5)
    # newuser13 Q9: a second `gc-package --out pkg` replaced the package silently, where
    # every other output path refuses an existing target (preflight.creatable_path): a
    # package a running spark-submit reads, or another version's, is not replaced unasked.
    there = [n for n in (ZIP, ENTRY_SCRIPT) if os.path.lexists(out / n)]
    if there and not force:
        raise Refused(f"--out {out_dir}: {' and '.join(there)} already there; refusing to "
                      "overwrite (--force replaces them)", ExitCode.USAGE)
    # What a signal's line says from here (newuser15 S3), until the package is written.
    signals.doing(f"{out / ZIP} and {out / ENTRY_SCRIPT} may have been written (the package "
                  "was being written)")
    z = build_zip(out / ZIP)
    entry = write_entry_script(out / ENTRY_SCRIPT)
    # newuser13 Q9: `> /dev/full` said only "cannot write to stdout", not that the package
    # was written (impl/closedout.py says this with that line).
    closedout.done(f"the package was written: {z} and {entry}")
    # Its last output under `finishing`: a signal as it is written no longer turns a
    # package written into "interrupted" (newuser22 Y4's class, as `cluster kill`).
    with signals.finishing(0):
        click.echo(f"wrote {z} and {entry}; run it with, for example:")
        click.echo(
            f"  spark-submit --master spark://HOST:7077 --py-files {shlex.quote(str(z))} "
            f"{shlex.quote(str(entry))} --store s3://BUCKET/PREFIX --json"
        )
