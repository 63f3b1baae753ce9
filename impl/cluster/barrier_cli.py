"""`epochgc barrier --data-dir DIR`: run the epoch barrier (SPEC R36-R38) on a running
cluster on demand.

The controller leader mints with the barrier mint (every broker drops its cached epoch as
it applies it); each partition leader then drains its fence, writes
advance_gc_epoch(candidate) and moves LRLO over command entries. With `--wait S` the
command waits until every partition's leader has applied the candidate, then prints per
partition whether it is still pending (an unreconciled placeholder before the command) or
promoted, and M(p). Exit 0 when every partition applied it, 1 otherwise."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import click

from epochgc.impl.cluster.client import ProcClusterAccess, stderr_line
from epochgc.impl.cluster.local import LocalCluster
from epochgc.impl.cluster.statuspoll import StatusPoll
from epochgc.impl.finite import FiniteFloat


def barrier_rows(nodes: dict[int, Any], candidate: int) -> dict[str, dict[str, Any]]:
    """Per partition, as its leader reports it: the applied barrier epoch, the promoted
    safe epoch, M(p), and `state`: "promoted" (the promoted epoch is the candidate or
    above), "pending" (applied, not yet promoted) or "missing" (not applied, or no leader
    answered)."""
    out: dict[str, dict[str, Any]] = {}
    for n, st in sorted(nodes.items()):
        if st is None:
            continue
        for p, s in st["partitions"].items():
            if s["leader"] != n and p in out:
                continue
            b, g = s.get("barrier_epoch"), s.get("gc_safe_epoch")
            state = ("promoted" if g is not None and g >= candidate else
                     "pending" if b is not None and b >= candidate else "missing")
            row = {"barrier_epoch": b, "gc_safe_epoch": g, "inactive_epoch": s["inactive_epoch"],
                   "state": state, "leader": s["leader"] == n}
            if row["leader"] or p not in out:
                out[p] = row
    return out


async def _run(lc: LocalCluster, wait: float
               ) -> tuple[int, dict[str, dict[str, Any]], list[int]]:
    """The candidate, the rows once every partition applied it (or at `--wait`), and the
    nodes with no answer in them. The nodes are asked at once, each again as soon as it
    answers: a frozen node's read bound is its own, not the wait's (newuser10 L1)."""
    access = ProcClusterAccess(lc.client_addrs(), hint=lc.down_hint(), say=stderr_line)
    try:
        r = await access.controller_call(op="barrier")
        if r["status"] != "ok":
            raise click.ClickException(f"barrier refused: {r}")
        cand = int(r["candidate"])
        deadline = time.monotonic() + wait
        async with StatusPoll(access, lc.ids) as poll:
            while True:
                rows = barrier_rows(poll.latest, cand)
                left = deadline - time.monotonic()
                # At the deadline, once every node has answered or failed once (`--wait 0`
                # asks each once): its first request's bound started with the wait's.
                if _applied(rows) or (left <= 0 and poll.each_concluded()):
                    return cand, rows, poll.unanswered()
                await poll.next_answer(left if left > 0 else None)
    finally:
        await access.close()


def _applied(rows: dict[str, dict[str, Any]]) -> bool:
    return bool(rows) and all(x["state"] != "missing" for x in rows.values())


@click.command()
@click.option("--data-dir", required=True, type=click.Path(file_okay=False))
@click.option("--wait", default=10.0, show_default=True, type=FiniteFloat(0, 3600),
              help="seconds to wait for every partition to apply the candidate (0-3600)")
@click.option("--json", "as_json", is_flag=True)
def barrier(data_dir: str, wait: float, as_json: bool) -> None:
    """Run the epoch barrier now: invalidate every epoch cache, drain, write
    advance_gc_epoch(candidate) to every partition (SPEC R36-R38)."""
    lc = LocalCluster(data_dir)
    cand, rows, unanswered = asyncio.run(_run(lc, wait))
    ok = _applied(rows)
    if unanswered:
        # Every node holds every partition: the rows are whole without it, said as such.
        stderr_line(f"epochgc barrier: no answer from node(s) {', '.join(map(str, unanswered))}"
                    "; the table is from the nodes that answered")
    if as_json:
        click.echo(json.dumps({"candidate": cand, "partitions": rows, "applied": ok,
                               "unanswered": unanswered}))
        raise SystemExit(0 if ok else 1)
    click.echo(f"barrier candidate: {cand}")
    for p, x in sorted(rows.items()):
        click.echo(f"{p:8} {x['state']:8} barrier={x['barrier_epoch']} "
                   f"safe={x['gc_safe_epoch']} M(p)={x['inactive_epoch']}")
    raise SystemExit(0 if ok else 1)
