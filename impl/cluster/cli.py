"""`epochgc cluster start|status|stop|kill NODE`, `epochgc produce`, `epochgc consume`."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import uuid
from pathlib import Path
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
@click.option("--trace", default=None, type=click.Path(dir_okay=False),
              help="every node appends an NDJSON trace here (epochgc check-trace FILE)")
@click.option("--s3-endpoint", default=None,
              help="endpoint of an S3-compatible server, for s3:// stores")
def start(data_dir: str, store: str, nodes: int, partitions: str, mint_interval: float,
          trace: str | None, s3_endpoint: str | None) -> None:
    lc = LocalCluster(data_dir)
    if store.startswith("file://") or "://" not in store:
        # The default store is a local directory: make it, as a new user expects.
        Path(store.removeprefix("file://")).mkdir(parents=True, exist_ok=True)
    if not lc.meta:
        extra = ["--trace", str(Path(trace).absolute())] if trace else []
        if s3_endpoint:
            extra += ["--s3-endpoint", s3_endpoint]
        lc.init(nodes, store, [p for p in partitions.split(",") if p], mint_interval, extra)
        lc.meta["s3_endpoint"] = s3_endpoint
        lc.save()
    for n in lc.ids:
        if str(n) not in lc.meta["pids"]:
            click.echo(f"node {n}: pid {lc.start(n)}")
    asyncio.run(_until_ready(lc, list(lc.meta["partitions"])))
    click.echo("cluster ready: every partition has a leader")


async def _until_ready(lc: LocalCluster, partitions: list[str], timeout_s: float = 60.0) -> None:
    """`start` returns when the cluster can take writes: the controller has created every
    partition and each has a leader (so a `produce` right after it succeeds)."""
    access = ProcClusterAccess(lc.client_addrs())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    missing = partitions
    try:
        while loop.time() < deadline:
            try:
                meta = await access.any_call(op="meta")
            except ConnectionError:
                meta = {"partitions": {}}
            known = meta.get("partitions", {})
            gone = set(meta.get("deleted", [])) - set(known)  # deleted since (epochgc topic)
            missing = [p for p in partitions
                       if p not in gone and not (known.get(p) or {}).get("leader")]
            if not missing:
                return
            await asyncio.sleep(0.2)
    finally:
        await access.close()
    raise RuntimeError(f"cluster not ready after {timeout_s:.0f}s: no leader for "
                       + ", ".join(missing))


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

        store = open_store(lc.meta["store"], lc.meta.get("s3_endpoint"))
        m = read_cluster_view(store, time.time(), 60).gc_epoch()
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
@click.option("--size", default=48, show_default=True, help="payload body bytes per record")
@click.option("--epoch", type=int, default=None, help="override the stamp (tests)")
def produce(data_dir: str, partitions: tuple[str, ...], count: int, size: int,
            epoch: int | None) -> None:
    """Produce `count` verifiable records to each partition in one L0 object.

    Records are deterministic and checksummed (impl/cluster/payload.py); every acknowledged
    run is appended to DATA_DIR/acked.jsonl, which `consume --verify` checks byte for byte."""
    from impl.broker.producer import PartitionDeletedError, ProduceError, Producer, check_epoch
    from impl.broker.raftport import thread_io
    from impl.cluster.payload import AckedRun, append_manifest, make_record
    from impl.store.url import open_store

    lc = LocalCluster(data_dir)
    if epoch is not None:
        try:
            check_epoch(epoch)
        except ProduceError as e:
            raise click.ClickException(str(e)) from e
    name = f"cli-{uuid.uuid4().hex[:12]}"  # a fresh producer id: its seqs start at 0

    async def go() -> None:
        access = ProcClusterAccess(lc.client_addrs())
        store = open_store(lc.meta["store"], lc.meta.get("s3_endpoint"))
        prod = Producer(access, store, thread_io, random.Random())
        try:
            acks = await prod.produce(
                {p: [make_record(name, p, i, size) for i in range(count)] for p in partitions},
                epoch,
            )
        except PartitionDeletedError as e:
            # What the other partitions acknowledged is kept (the manifest is what was acked).
            append_manifest(data_dir, [
                AckedRun(a.partition, a.base, a.count, name, 0, size, a.epoch, a.key)
                for a in e.acks.values()])
            raise click.ClickException(str(e)) from e
        except ProduceError as e:
            raise click.ClickException(str(e)) from e
        finally:
            await access.close()
        runs = [AckedRun(a.partition, a.base, a.count, name, 0, size, a.epoch, a.key)
                for a in acks.values()]
        append_manifest(data_dir, runs)  # only after every ack: the manifest is what was acked
        for a in acks.values():
            click.echo(json.dumps({"partition": a.partition, "base": a.base, "count": a.count,
                                   "epoch": a.epoch, "key": a.key, "producer": name}))

    asyncio.run(go())


@click.command()
@click.option("--data-dir", required=True, type=click.Path(file_okay=False))
@click.option("--partition", "partitions", multiple=True, required=True)
@click.option("--verify", is_flag=True,
              help="dense offsets, every record's checksum, and every acknowledged record "
                   "(DATA_DIR/acked.jsonl) present with exactly its produced bytes")
def consume(data_dir: str, partitions: tuple[str, ...], verify: bool) -> None:
    """Read every record of the partitions (L1 below LRO, L0 above)."""
    from impl.cluster.payload import PayloadError, check_record, compare, read_manifest

    lc = LocalCluster(data_dir)
    runs = read_manifest(data_dir) if verify else []

    async def go() -> list[str]:
        problems: list[str] = []
        access = ProcClusterAccess(lc.client_addrs())
        try:
            meta = await access.any_call(op="meta")
            for p in partitions:
                if p not in meta["partitions"]:
                    gone = p in meta.get("deleted", [])
                    raise click.ClickException(
                        f"partition {p!r} " + ("was deleted" if gone else "does not exist")
                        + f" (controller revision {meta.get('revision')}): nothing to read")
                crev = int(meta["partitions"][p]["revision"])
                recs = await access.read_partition(p)
                out: dict[str, object] = {"partition": p, "records": len(recs)}
                if verify:
                    if [o for o, _ in recs] != list(range(len(recs))):
                        problems.append(f"{p}: offsets are not dense")
                    for o, data in recs:
                        try:
                            check_record(data, p)
                        except PayloadError as e:
                            problems.append(f"{p}@{o}: {e}")
                    # Runs of an earlier, deleted incarnation of the name were deleted with it
                    # (R33): their epochs are below this incarnation's creation revision.
                    mine = [r for r in runs if r.partition == p and r.epoch >= crev]
                    problems += compare(mine, {p: dict(recs)})
                    out["acked_checked"] = sum(r.count for r in mine)
                click.echo(json.dumps(out))
        finally:
            await access.close()
        return problems

    problems = asyncio.run(go())
    if problems:
        for line in problems[:20]:
            click.echo(f"verify: {line}", err=True)
        raise click.ClickException(f"verification failed: {len(problems)} problem(s)")
