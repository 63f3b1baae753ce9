"""`epochgc cluster start|status|stop|kill NODE`, `epochgc produce`, `epochgc consume`."""

from __future__ import annotations

import asyncio
import json
import random
import signal
from typing import Any

import click

from impl.cluster.client import ProcClusterAccess
from impl.cluster.local import LocalCluster
from impl.gc.reports import read_cluster_view


@click.group()
def cluster() -> None:
    """A local multi-process cluster on loopback."""


@cluster.command()
@click.option("--data-dir", required=True, type=click.Path(file_okay=False))
@click.option("--store", required=True, help="store URL or directory")
@click.option("--nodes", default=3, show_default=True)
@click.option("--partitions", default="t/0,t/1,t/2,t/3,t/4,t/5,t/6,t/7", show_default=True)
@click.option("--mint-interval", default=3.0, show_default=True)
def start(data_dir: str, store: str, nodes: int, partitions: str, mint_interval: float) -> None:
    lc = LocalCluster(data_dir)
    if not lc.meta:
        lc.init(nodes, store, [p for p in partitions.split(",") if p], mint_interval)
    for n in lc.ids:
        if str(n) not in lc.meta["pids"]:
            click.echo(f"node {n}: pid {lc.start(n)}")


@cluster.command()
@click.option("--data-dir", required=True, type=click.Path(file_okay=False))
def stop(data_dir: str) -> None:
    LocalCluster(data_dir).stop_all()


@cluster.command()
@click.option("--data-dir", required=True, type=click.Path(file_okay=False))
@click.argument("node", type=int)
def kill(data_dir: str, node: int) -> None:
    """SIGKILL one node."""
    LocalCluster(data_dir).kill(node, signal.SIGKILL)


@cluster.command()
@click.option("--data-dir", required=True, type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True)
def status(data_dir: str, as_json: bool) -> None:
    """Per partition: leader, term, applied window, seen window, LRO, M(p); and cluster M."""
    lc = LocalCluster(data_dir)

    async def gather() -> dict[int, Any]:
        access = ProcClusterAccess(lc.client_addrs())
        out = {}
        for n in lc.ids:
            r = await access.call(n, op="status")
            out[n] = r.get("data")
        await access.close()
        return out

    nodes = asyncio.run(gather())
    from impl.store.url import open_store

    try:
        import time

        m = read_cluster_view(open_store(lc.meta["store"]), time.time(), 60).gc_epoch()
        cluster_m: Any = {"M": m.M, "blocked": m.blocked}
    except Exception as e:  # reports not published yet
        cluster_m = {"M": None, "error": str(e)}
    if as_json:
        click.echo(json.dumps({"nodes": nodes, "cluster": cluster_m}, default=str))
        return
    for n, st in nodes.items():
        if st is None:
            click.echo(f"node {n}: unreachable")
            continue
        for p, s in st["partitions"].items():
            if s["leader"] != n:
                continue
            click.echo(
                f"{p:8} leader={n} term={s['term']} applied={s['applied_window']} "
                f"seen={s['seen_window']} LRO={s['lro']} M(p)={s['inactive_epoch']}"
            )
    click.echo(f"cluster M: {cluster_m}")


@click.command()
@click.option("--data-dir", required=True, type=click.Path(file_okay=False))
@click.option("--partition", "partitions", multiple=True, required=True)
@click.option("--count", default=10, show_default=True)
@click.option("--epoch", type=int, default=None, help="override the stamp (tests)")
def produce(data_dir: str, partitions: tuple[str, ...], count: int, epoch: int | None) -> None:
    """Produce `count` records to each partition in one L0 object."""
    from impl.broker.producer import ProduceError, Producer, check_epoch
    from impl.broker.raftport import thread_io
    from impl.store.url import open_store

    lc = LocalCluster(data_dir)
    if epoch is not None:
        try:
            check_epoch(epoch)
        except ProduceError as e:
            raise click.ClickException(str(e)) from e

    async def go() -> None:
        access = ProcClusterAccess(lc.client_addrs())
        prod = Producer(access, open_store(lc.meta["store"]), thread_io, random.Random())
        try:
            acks = await prod.produce(
                {p: [f"{p}:{i}".encode() for i in range(count)] for p in partitions}, epoch
            )
        except ProduceError as e:
            raise click.ClickException(str(e)) from e
        finally:
            await access.close()
        for a in acks.values():
            click.echo(json.dumps({"partition": a.partition, "base": a.base, "count": a.count,
                                   "epoch": a.epoch, "key": a.key}))

    asyncio.run(go())


@click.command()
@click.option("--data-dir", required=True, type=click.Path(file_okay=False))
@click.option("--partition", "partitions", multiple=True, required=True)
@click.option("--verify", is_flag=True, help="check offsets are dense from 0")
def consume(data_dir: str, partitions: tuple[str, ...], verify: bool) -> None:
    """Read every record of the partitions (L1 below LRO, L0 above)."""
    lc = LocalCluster(data_dir)

    async def go() -> None:
        access = ProcClusterAccess(lc.client_addrs())
        try:
            for p in partitions:
                recs = await access.read_partition(p)
                if verify and [o for o, _ in recs] != list(range(len(recs))):
                    raise click.ClickException(f"{p}: offsets are not dense")
                click.echo(json.dumps({"partition": p, "records": len(recs)}))
        finally:
            await access.close()

    asyncio.run(go())
