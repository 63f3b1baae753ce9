"""One broker process: RaftServer (TCP + DiskStorage) with the controller and every
partition group, the broker services, the client RPC port and a Prometheus endpoint.

  python -m epochgc.impl.cluster.node_main --id 1 --peers 1=127.0.0.1:7001,... --client-port 8001 \
      --data-dir DIR --store URL --cluster-id ID [--partitions t/0,t/1] [--metrics-port 9001]

Prints "READY <raft port> <client port>" once serving. A corrupted journal or snapshot, or a
data directory of another node or cluster (impl/raft/identity.py), makes it exit with status
2 and a message naming the file, before anything is served.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import logging
import os
import shutil
import signal
import sys
import threading
import time

from epochgc.impl.broker.broker import Broker, BrokerConfig
from epochgc.impl.broker.logs import setup_json_logging
from epochgc.impl.broker.metrics import NodeMetrics
from epochgc.impl.broker.raftport import thread_io
from epochgc.impl.chaos.faultfile import ENV as FAULT_ENV
from epochgc.impl.chaos.faultfile import NodeFaults
from epochgc.impl.cluster.local import DETACH
from epochgc.impl.cluster.rpc import serve_client
from epochgc.impl.controller.epochcache import EpochCache
from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.identity import (
    LEGACY_CLUSTER_ID,
    IdentityMismatch,
    IdentityMissing,
    IdentityUnreadable,
)
from epochgc.impl.raft.node import Config
from epochgc.impl.raft.node_main import parse_peers
from epochgc.impl.raft.server import RaftServer
from epochgc.impl.raft.storage import StorageCorruption, StorageFailed
from epochgc.impl.raft.transport import TransportConfig
from epochgc.impl.store.faulty import FaultyStore
from epochgc.impl.store.url import open_store

log = logging.getLogger("epochgc.node")


async def run(args: argparse.Namespace) -> int:
    peers = parse_peers(args.peers)
    host, port = peers.pop(args.id)
    secret = os.environ.get("EPOCHGC_RAFT_SECRET", "").encode() or None
    tcfg = TransportConfig(args.id, LEGACY_CLUSTER_ID, port, peers, host=host, secret=secret)
    faults = _test_faults()
    factory = None
    if faults is not None:
        fs = faults.fs

        def factory(d: str) -> DiskStorage:
            return DiskStorage(d, fs=fs, group_commit=server.group_commit)
    # The data directory must name this cluster (DATA_DIR/cluster.json's id, newuser21 X1).
    # One naming no cluster (an older version's 'epochgc', or format 3 without the file)
    # takes it only with --adopt-legacy-identity, which `cluster start` gives only to a
    # cluster that may hold such a directory (LocalCluster.legacy_allowed, review41c C1).
    # The transport keeps the constant: a node restarted by this version still talks to
    # peers an older one started.
    legacy = args.adopt_legacy_identity
    try:
        server = RaftServer(tcfg, args.data_dir, Config(), tick_interval=args.tick,
                            snapshot_interval=args.snapshot_interval, storage_factory=factory,
                            cluster_id=args.cluster_id,
                            adopt_clusters={LEGACY_CLUSTER_ID} if legacy else (),
                            adopt_unnamed=legacy)
    except (IdentityMismatch, IdentityMissing, IdentityUnreadable) as e:
        print(f"refusing to start: {e}", file=sys.stderr, flush=True)
        return 2
    store = open_store(args.store, args.s3_endpoint)
    wall = time.time
    if faults is not None:
        store = faults.wrap(FaultyStore(store))
        wall = faults.wall
    cfg = BrokerConfig(
        node_name=f"n{args.id}",
        mint_interval=args.mint_interval or None,
        initial_partitions=tuple(p for p in args.partitions.split(",") if p),
        epoch_cache_ttl=args.cache_ttl,
        bench_ops=args.bench_ops,
        release_at_enqueue=not args.hold_through_replicate,
        barrier_after=args.barrier_after or None,
    )
    metrics = NodeMetrics()
    loop = asyncio.get_running_loop()
    try:
        check_storage(args.data_dir)
        hooks = None
        if args.trace:  # NDJSON trace of window transitions and decisions (impl/trace.py)
            from epochgc.impl.trace import TraceWriter, broker_hooks

            hooks = broker_hooks(TraceWriter(args.trace, args.id), lambda: broker)
        broker = Broker(server, store, cfg, loop, wall, thread_io, metrics, hooks)
        if faults is not None:  # the epoch cache's expiry runs on the shifted clock too
            broker.cache = EpochCache(lambda: broker.controller.epoch,
                                      lambda: faults.clock(loop.time()), cfg.epoch_cache_ttl)
        broker.sync_partitions()
    except StorageCorruption as e:
        print(f"refusing to start: corrupted Raft storage: {e}", file=sys.stderr, flush=True)
        return 2
    stop = asyncio.Event()
    fatal: list[Exception] = []
    if args.owned:
        watch_owner(loop, stop)

    def on_error(lp: asyncio.AbstractEventLoop, ctx: dict[str, object]) -> None:
        # A group opened later (a partition created while running) found damaged storage:
        # stop serving rather than run with part of the node's state missing.
        exc = ctx.get("exception")
        if isinstance(exc, StorageCorruption | StorageFailed):
            # StorageFailed: a write or fsync failed (disk full, I/O error); nothing of that
            # batch was acknowledged, and a node must not carry on after a failed fsync.
            print(f"stopping: Raft storage: {exc}", file=sys.stderr, flush=True)
            fatal.append(exc)
            stop.set()
        else:
            lp.default_exception_handler(ctx)

    loop.set_exception_handler(on_error)
    # A port another program holds is named with its listener on stdout, where `cluster
    # start` reads READY (impl/cluster/local.py), instead of an OSError's last log line.
    listener = "raft"
    try:
        await server.start()
        broker.start()
        listener = "client"
        srv = await asyncio.start_server(functools.partial(serve_client, broker), host,
                                         args.client_port)
        if args.metrics_port:
            from prometheus_client import start_http_server

            listener = "metrics"
            start_http_server(args.metrics_port, addr=host, registry=metrics.registry)
    except OSError as e:
        taken = {"raft": port, "client": args.client_port, "metrics": args.metrics_port}
        print(f"LISTEN-FAILED {listener} {taken[listener]} {e.strerror or e}", flush=True)
        return 3
    print(f"READY {server.transport.port} {srv.sockets[0].getsockname()[1]}", flush=True)
    log.info("serving", extra={"node": args.id})
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    broker.stop()
    srv.close()
    try:
        await asyncio.wait_for(server.close(), 5.0)
    except TimeoutError:  # a peer that never answers must not keep a stopped node alive
        log.warning("transport did not close in 5 s; exiting anyway")
        server.host.close()
    return 2 if fatal else 0


def watch_owner(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    """`--owned`: stop as on SIGTERM once stdin, a pipe whose write end only the process
    that started this node holds, reaches EOF before the line `detach`. The kernel closes
    that end whatever way the owner ends, `kill -9` included: "If all file descriptors
    referring to the write end of a pipe have been closed, then an attempt to read(2) from
    the pipe will see end-of-file" (pipe(7)). Issue 41 (F2b): after a SIGKILL of `epochgc
    demo`'s process group, its brokers (each in its own session) ran on for 8 minutes.
    Not prctl(PR_SET_PDEATHSIG): it fires when the parent *thread* that forked the child
    exits ("the 'parent' in this case is considered to be the thread that created this
    process", PR_SET_PDEATHSIG(2const), CAVEATS; prctl(2) in older man-pages), and the demo
    restarts a node from a worker thread (`asyncio.to_thread`)."""

    def read() -> None:
        line = sys.stdin.buffer.readline()
        if line == DETACH.encode():  # handed over: runs until `cluster stop`
            return
        log.warning("stopping: the process that started this node is gone",
                    extra={"node": "owner"})
        with contextlib.suppress(RuntimeError):  # the loop already closed: stopping anyway
            loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=read, name="owner-watch", daemon=True).start()


def _test_faults() -> NodeFaults | None:
    """Test hook (impl/chaos/faultfile.py): EPOCHGC_FAULT_FILE names a control file through
    which `epochgc chaos` fails this node's fsyncs, fills its disk, breaks its object store
    or shifts its clocks. Unset (production): None, the plain `os` and store."""
    path = os.environ.get(FAULT_ENV)
    if not path:
        return None
    faults = NodeFaults(path)
    faults.start()
    return faults


def check_storage(data_dir: str) -> None:
    """Open every Raft group stored under data_dir before serving anything. Partition
    groups are otherwise opened only when the controller log replays, which happens after
    the node is already serving: a damaged partition journal would then go unnoticed."""
    if not os.path.isdir(data_dir):
        return
    for name in sorted(os.listdir(data_dir)):
        path = os.path.join(data_dir, name)
        if name.startswith("g") and name[1:].isdigit() and os.path.isdir(path):
            if os.path.exists(os.path.join(data_dir, "removed", name)):
                # A deleted partition's group whose removal a crash interrupted: finish it.
                shutil.rmtree(path, ignore_errors=True)
                continue
            storage = DiskStorage(path)
            storage.load()  # raises StorageCorruption naming the file and offset
            storage.close()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--id", type=int, required=True)
    ap.add_argument("--peers", required=True)
    ap.add_argument("--client-port", type=int, default=0)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--cluster-id", required=True,
                    help="the cluster's id (DATA_DIR/cluster.json): the one the data "
                         "directory's node-identity must name")
    ap.add_argument("--adopt-legacy-identity", action="store_true",
                    help="a data directory naming no cluster (written by an older version) "
                         "takes --cluster-id; without it such a directory is refused")
    ap.add_argument("--s3-endpoint", default=None)
    ap.add_argument("--partitions", default="")
    ap.add_argument("--mint-interval", type=float, default=3.0)
    ap.add_argument("--cache-ttl", type=float, default=2.0)
    ap.add_argument("--tick", type=float, default=0.05)
    ap.add_argument("--snapshot-interval", type=int, default=2000)
    ap.add_argument("--metrics-port", type=int, default=0)
    ap.add_argument("--trace", default=None, help="append an NDJSON trace to this file")
    ap.add_argument("--barrier-after", type=float, default=0.0,
                    help="the controller leader runs the epoch barrier when the minimum M(p) "
                         "has not moved for this many seconds (0: only on demand)")
    ap.add_argument("--bench-ops", action="store_true", help="serve the benchmark's "
                    "unfenced-propose baseline (never in production)")
    ap.add_argument("--hold-through-replicate", action="store_true",
                    help="the fence holds a placeholder's shared lock until its replicate "
                    "completes (the design notes' rule) instead of releasing it once the "
                    "placeholder is queued into Raft (the default)")
    ap.add_argument("--owned", action="store_true",
                    help="stop when stdin reaches EOF before a line `detach` (the process "
                         "that started this node ended without handing it over)")
    ap.add_argument("--log-level", default="WARNING", type=str.upper,
                    choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                    help="the JSON log's level on stderr (default WARNING)")
    args = ap.parse_args(argv)
    setup_json_logging(getattr(logging, args.log_level))
    code = 1
    try:
        code = asyncio.run(run(args))
    except StorageCorruption as e:
        print(f"refusing to start: corrupted Raft storage: {e}", file=sys.stderr, flush=True)
        code = 2
    except KeyboardInterrupt:
        code = 0
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    sys.exit(code)


if __name__ == "__main__":
    main()
