"""A Raft node process serving the KV application on every group, for tests and benchmarks.

  python -m epochgc.impl.raft.node_main --id 1 --peers 1=127.0.0.1:7001,2=...,3=... \
      --client-port 8001 --data-dir /tmp/n1 [--groups 1] [--cluster-id c] [--tick 0.1]

Prints "READY <raft port> <client port>" on stdout once listening.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import struct

from epochgc.impl.raft.host import Proposal
from epochgc.impl.raft.kv import (
    OP_GET,
    OP_LEADER,
    OP_PUT,
    ST_ERROR,
    ST_FAILED,
    ST_NOT_LEADER,
    ST_OK,
    KVStateMachine,
    decode_request,
    encode_command,
    encode_response,
)
from epochgc.impl.raft.node import Config, NotLeader, ProposalRefused
from epochgc.impl.raft.server import RaftServer
from epochgc.impl.raft.transport import TransportConfig


def parse_peers(spec: str) -> dict[int, tuple[str, int]]:
    out = {}
    for part in spec.split(","):
        nid, addr = part.split("=")
        host, port = addr.rsplit(":", 1)
        out[int(nid)] = (host, int(port))
    return out


class NodeProcess:
    def __init__(self, args: argparse.Namespace) -> None:
        peers = parse_peers(args.peers)
        host, port = peers.pop(args.id)
        secret = os.environ.get("EPOCHGC_RAFT_SECRET", "").encode() or None
        tcfg = TransportConfig(args.id, args.cluster_id, port, peers, host=host, secret=secret)
        cfg = Config(
            election_tick=args.election_tick,
            heartbeat_tick=args.heartbeat_tick,
            max_inflight=args.max_inflight,
        )
        self.server = RaftServer(
            tcfg,
            args.data_dir,
            cfg,
            tick_interval=args.tick,
            snapshot_interval=args.snapshot_interval,
            group_commit={"auto": None, "off": False}.get(args.group_commit, args.group_commit),
        )
        self.groups = list(range(1, args.groups + 1))
        for g in self.groups:
            self.server.add_group(g, KVStateMachine())
        self.client_port = args.client_port
        self.client_host = host

    async def run(self) -> None:
        await self.server.start()
        srv = await asyncio.start_server(self._client, self.client_host, self.client_port)
        port = srv.sockets[0].getsockname()[1]
        print(f"READY {self.server.transport.port} {port}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        stopped = asyncio.ensure_future(self.server.stopped.wait())
        await asyncio.wait(
            [asyncio.ensure_future(stop.wait()), stopped], return_when=asyncio.FIRST_COMPLETED
        )
        srv.close()
        await self.server.close()
        if self.server.failed is not None:
            raise SystemExit(f"stopping: {self.server.failed}")

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (n,) = struct.unpack(">I", await reader.readexactly(4))
                self._handle(await reader.readexactly(n), writer)
        except (asyncio.IncompleteReadError, ConnectionError, struct.error):
            pass
        finally:
            writer.close()

    def _handle(self, body: bytes, writer: asyncio.StreamWriter) -> None:
        # Answered from a proposal callback rather than a task per request: cheaper when
        # thousands of requests are pipelined.
        req_id, op, group, key, value = decode_request(body)
        host = self.server.host
        leader = host.leader(group) if group in host.groups else 0
        if op == OP_LEADER:
            writer.write(encode_response(req_id, ST_OK, leader))
            return
        if op not in (OP_PUT, OP_GET) or group not in host.groups:
            writer.write(encode_response(req_id, ST_ERROR, leader))
            return
        try:
            p = self.server.propose_cb(group, encode_command(op, key, value))
        except NotLeader as e:
            writer.write(encode_response(req_id, ST_NOT_LEADER, e.leader_hint))
            return
        except ProposalRefused:
            writer.write(encode_response(req_id, ST_FAILED, leader))
            return

        def reply(done: Proposal) -> None:
            if writer.is_closing():
                return
            if done.error is None:
                writer.write(encode_response(req_id, ST_OK, self.server.node_id, done.result))
            else:
                writer.write(encode_response(req_id, ST_FAILED, host.leader(group)))

        p.on_done(reply)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--id", type=int, required=True)
    ap.add_argument("--peers", required=True)
    ap.add_argument("--client-port", type=int, default=0)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--groups", type=int, default=1)
    ap.add_argument("--cluster-id", default="epochgc-raft")
    ap.add_argument("--tick", type=float, default=0.1)
    ap.add_argument("--election-tick", type=int, default=10)
    ap.add_argument("--heartbeat-tick", type=int, default=2)
    ap.add_argument("--max-inflight", type=int, default=64)
    ap.add_argument("--snapshot-interval", type=int, default=10_000)
    ap.add_argument(
        "--group-commit",
        choices=["auto", "parallel", "syncfs", "off"],
        default="auto",
        help="one barrier per batch for all groups: the groups' fsyncs issued concurrently "
        "(parallel, the default) or one syncfs; off: one fsync per group in turn",
    )
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    profile = os.environ.get("EPOCHGC_RAFT_PROFILE")  # a path prefix: dump cProfile stats
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(NodeProcess(args).run())
    if profile:
        prof.disable()
        prof.dump_stats(f"{profile}.{args.id}")


if __name__ == "__main__":
    main()
