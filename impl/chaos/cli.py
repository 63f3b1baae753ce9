"""`epochgc chaos --nodes 3|5 --seconds N --seed S --json [--store DIR | --store s3://...
--s3-endpoint URL]`."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import click
from epochgc.impl.chaos.run import ChaosRun

FIELDS = ("seconds", "acked", "lost", "in_use_deleted", "faults", "leader_changes",
          "objects_created", "objects_deleted", "trace_divergences", "raft_divergences")


@click.command()
@click.option("--nodes", type=click.Choice(["3", "5"]), default="3", show_default=True)
@click.option("--seconds", type=click.FloatRange(10, 24 * 3600), default=120.0,
              show_default=True, help="how long the nemesis and the workload run")
@click.option("--seed", type=int, default=1, show_default=True, help="the nemesis's plan")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
@click.option("--store", default=None, help="a directory or s3://bucket/prefix "
              "(default: a fresh directory)")
@click.option("--s3-endpoint", default=None, help="the S3 server (a proxy goes in front)")
@click.option("--out", type=click.Path(file_okay=False), default="build/chaos",
              show_default=True, help="where result.json and history.txt go")
@click.option("--gc-engine", type=click.Choice(["auto", "spark", "model"]), default="auto",
              show_default=True)
@click.option("--keep-data", is_flag=True, help="keep the nodes' data (always kept on failure)")
@click.option("--quiet", is_flag=True, help="no progress on stderr (history.txt has it all)")
def chaos(nodes: str, seconds: float, seed: int, as_json: bool, store: str | None,
          s3_endpoint: str | None, out: str, gc_engine: str, keep_data: bool,
          quiet: bool) -> None:
    """A real cluster under a seeded nemesis, then independent checks; exit 1 on any loss
    or divergence. Progress (the history as it is written) goes to stderr, whatever --json
    says: a 20-minute run is not silent; stdout holds only the result."""
    run = ChaosRun(int(nodes), seconds, seed, Path(out), store, s3_endpoint,
                   gc_engine=gc_engine, echo=not quiet)
    res = run.run(keep_data)
    doc = asdict(res)
    head = {k: doc.pop(k) for k in FIELDS}
    head.update(doc)  # the extra counters after the fields
    (Path(out) / "result.json").write_text(json.dumps(head, indent=1) + "\n")
    click.echo(json.dumps(head) if as_json else json.dumps(head, indent=1))
    if not res.ok():
        click.echo(f"chaos: FAILED; history in {Path(out) / 'history.txt'}", err=True)
        sys.exit(1)
