"""The broker's client protocol: newline-delimited JSON over TCP, requests carry an id so a
client can pipeline. Record bytes travel base64-encoded."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
from typing import Any

from epochgc.impl.broker.breakglass import (
    BreakGlassRefused,
    NothingToAdvance,
    break_glass_advance,
)
from epochgc.impl.broker.broker import Broker
from epochgc.impl.partition.commands import Placeholder
from epochgc.impl.partition.fence import (
    NotLeaderError,
    PartitionDeleted,
    ReplicateFailed,
    StaleEpoch,
)
from epochgc.impl.raft.host import ProposalFailed
from epochgc.impl.raft.node import ProposalRefused
from epochgc.impl.store.base import StoreError

log = logging.getLogger("epochgc.rpc")

# The longest answer line a client takes. asyncio's StreamReader refuses a longer line ("By
# default the limit is set to 64 KiB", docs.python.org/3.11/library/asyncio-stream.html,
# open_connection), and a `read` page of 500 records of 48-byte bodies is already ~64 KiB
# base64-encoded (issue 41: `consume --verify` waited 30 s per call on the page after
# offset 1000). Requests stay small, so the broker's own reader keeps the default.
ANSWER_LIMIT = 64 << 20
# The record bodies of one `read` page: base64 makes them 4/3 as long, JSON adds ~20 bytes a
# record, so a page's answer stays far under ANSWER_LIMIT; a single record above it is
# still one page (`produce --size` is at most MAX_RECORD_BYTES, whose answer fits).
READ_PAGE_BYTES = 4 << 20
MAX_RECORD_BYTES = 16 << 20


async def handle(broker: Broker, req: dict[str, Any]) -> dict[str, Any]:
    op = req.get("op")
    try:
        if op == "status":
            return {"status": "ok", "data": broker.status()}
        if op == "epoch":
            if req.get("fresh"):
                broker.cache.invalidate()  # the caller just saw a stale rejection
            return {"status": "ok", "epoch": broker.cluster_epoch()}
        if op == "meta":
            parts = {
                n: {"revision": r.info.creation_revision,
                    "leader": broker.port.leader(r.info.group),
                    "term": broker.port.term(r.info.group)}
                for n, r in broker.replicas.items() if not r.sm.deleted
            }
            return {"status": "ok", "partitions": parts,
                    "revision": broker.controller.revision,
                    "deleted": sorted({d.name for d in broker.controller.deleted.values()}),
                    # name -> the revision its (latest) deletion was applied at, the
                    # `deletion_revision` `topic delete` printed (newuser18's notes)
                    "deletions": {d.name: d.deletion_revision for d in sorted(
                        broker.controller.deleted.values(), key=lambda d: d.deletion_revision)}}
        if op == "replicate":
            ph = Placeholder(int(req["epoch"]), str(req["key"]), int(req["start"]),
                             int(req["end"]), int(req["count"]))
            res = await broker.replicate(str(req["partition"]), ph)
            return {"status": "ok", "base": res.base}
        if op == "bench_propose":
            ph = Placeholder(int(req["epoch"]), str(req["key"]), int(req["start"]),
                             int(req["end"]), int(req["count"]))
            res = await broker.propose_unfenced(str(req["partition"]), ph)
            return {"status": "ok" if res.accepted else "stale", "base": res.base,
                    "epoch": ph.epoch, "window": res.window, "at": "apply"}
        if op == "read":
            recs = broker.read(str(req["partition"]), int(req["offset"]),
                               int(req.get("max", 500)), READ_PAGE_BYTES)
            return {"status": "ok", "records": [[o, base64.b64encode(r).decode()] for o, r in recs]}
        if op == "in_use":
            # The L0 keys this replica's applied (= committed) state still references: the
            # accepted placeholders not yet reconciled, with the applied index they are as of.
            return {"status": "ok", "partitions": {
                n: {"applied": r.sm.last_index, "keys": sorted({p.key for p in r.sm.placeholders})}
                for n, r in broker.replicas.items() if not r.sm.deleted
            }}
        if op == "break_glass_advance":  # issue 30: `epochgc gc-admin advance-epoch`
            r = await break_glass_advance(broker, str(req["partition"]))
            return {"status": "ok", "partition": r.partition, "cached_epoch": r.cached_epoch,
                    "advanced_to": r.advanced_to, "inactive_epoch": r.inactive_epoch}
        if op == "mint":
            return {"status": "ok", "epoch": await broker.mint()}
        if op == "barrier":  # the epoch barrier (R36): controller leader only
            return {"status": "ok", "candidate": await broker.barrier()}
        if op == "create":
            return {"status": "ok", "revision": await broker.create_partition(str(req["name"]))}
        if op == "create_topic":
            return {"status": "ok", "partitions": await broker.create_topic(
                str(req["topic"]), int(req["partitions"]))}
        if op == "delete_topic":
            return {"status": "ok", "partitions": await broker.delete_topic(str(req["topic"]))}
        if op == "delete":
            return {"status": "ok", "revision": await broker.delete_partition(str(req["name"]))}
        return {"status": "error", "message": f"unknown op {op!r}"}
    except NothingToAdvance as e:  # before its base class: not a refusal
        return {"status": "nothing", "message": str(e)}
    except BreakGlassRefused as e:
        return {"status": "refused", "message": str(e)}
    except StaleEpoch as e:
        return {"status": "stale", "epoch": e.epoch, "window": e.window, "at": e.at}
    except PartitionDeleted as e:
        return {"status": "deleted", "partition": e.partition, "at": e.at, "message": str(e)}
    except NotLeaderError as e:
        return {"status": "not_leader", "leader": e.leader_hint}
    except (ReplicateFailed, ProposalFailed, ProposalRefused) as e:
        return {"status": "failed", "message": str(e)}
    except (StoreError, KeyError, ValueError) as e:
        return {"status": "error", "message": str(e)}


# The controller requests that change its table. One a client has sent is carried out whole
# though the client goes away (its task is not cancelled when the connection ends): a
# topic's partitions are proposed one by one, and a Ctrl-C 0.3 s into `topic create
# --partitions 64` left 12 of 64 partitions for good, the retry refused "already exists"
# (newuser10 L2; `delete_topic` the same).
CHANGES_CONTROLLER = frozenset({"create_topic", "delete_topic", "create", "delete"})
# Requests a node may have acted on once sent, answered or not: the controller's changes and
# a partition's break-glass advance (one proposal). A client stopped while one is out says
# so (`ProcClusterAccess.change_unanswered`).
APPLIED_ONCE_SENT = CHANGES_CONTROLLER | {"break_glass_advance"}
# The carried-on changes' tasks (the event loop keeps only weak references to tasks).
_carried: set[asyncio.Task[None]] = set()


async def serve_client(
    broker: Broker, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    tasks: set[asyncio.Task[None]] = set()
    changes: set[asyncio.Task[None]] = set()

    async def one(req: dict[str, Any]) -> None:
        resp = await handle(broker, req)
        resp["id"] = req.get("id")
        if not writer.is_closing():
            writer.write(json.dumps(resp).encode() + b"\n")

    try:
        while line := await reader.readline():
            try:
                req = json.loads(line)
            except json.JSONDecodeError:
                writer.write(b'{"status": "error", "message": "bad json"}\n')
                continue
            t = asyncio.create_task(one(req))
            tasks.add(t)
            t.add_done_callback(tasks.discard)
            if req.get("op") in CHANGES_CONTROLLER:
                changes.add(t)
                t.add_done_callback(changes.discard)
    except ConnectionError:
        pass
    except asyncio.CancelledError:
        # The node stops (asyncio.run cancels every task left): the connection ends here,
        # quietly. Not re-raised: Python 3.11's StreamReaderProtocol calls `task.exception()`
        # on this task when it is done (Lib/asyncio/streams.py, `connection_made`'s
        # callback), which raises for a cancelled task, and the loop logged that as
        # "Exception in callback ..." with a traceback, at error, after a node's one
        # "stopping: Raft storage: ..." line (newuser16 S12).
        pass
    finally:
        for t in tasks:
            if t in changes:
                _carried.add(t)
                t.add_done_callback(_carried.discard)
            else:
                t.cancel()
        with contextlib.suppress(Exception):
            writer.close()


class RpcClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self._next = 0
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._task = asyncio.create_task(self._read())

    @classmethod
    async def connect(cls, host: str, port: int, timeout: float = 2.0) -> RpcClient:
        async with asyncio.timeout(timeout):  # not wait_for: see `call`
            r, w = await asyncio.open_connection(host, port, limit=ANSWER_LIMIT)
        return cls(r, w)

    async def call(self, timeout: float = 30.0, **req: Any) -> dict[str, Any]:
        self._next += 1
        rid = req["id"] = self._next
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        self.writer.write(json.dumps(req).encode() + b"\n")
        try:
            if req.get("op") in APPLIED_ONCE_SENT:  # only a client sends one: not in a node
                from epochgc.impl.signals import checkpoint

                checkpoint("change-sent")  # the signal tests' point: a change is on its way
            # Not `asyncio.wait_for`: on Python 3.11 it returns the answer when the task is
            # cancelled in the iteration the answer arrives (CPython gh-86296, fixed in 3.12
            # by building wait_for on asyncio.timeout), losing Ctrl-C (issue 41).
            async with asyncio.timeout(timeout):
                return await fut
        except TimeoutError:
            # Said with its bound (newuser9 K9: a caller tells an unanswered change by it).
            # `.2g`: a bound cut to what is left of a whole one (`controller_call`'s
            # `within_s`) is said "0.5 s", not "0.49987 s".
            raise TimeoutError(f"no answer within {timeout:.2g} s") from None
        finally:
            # A call left by a signal (or a cancel) takes its future with it: failed later
            # by `close` with no one awaiting it, asyncio printed "Future exception was
            # never retrieved" and a ConnectionError traceback (s25d; newuser11 M11's run).
            self._waiting.pop(rid, None)
            fut.cancel()

    async def _read(self) -> None:
        try:
            while line := await self.reader.readline():
                resp = json.loads(line)
                fut = self._waiting.get(resp.get("id"))
                if fut is not None and not fut.done():
                    fut.set_result(resp)
        except (ConnectionError, json.JSONDecodeError):
            pass
        except ValueError as e:
            # An answer over ANSWER_LIMIT (StreamReader.readline raises ValueError): the
            # stream is out of step, so the connection is given up and every call waiting
            # on it fails now, not each at its own timeout as a silent hang.
            self._fail_waiting(f"broker answer over {ANSWER_LIMIT:,} bytes: {e}")
            self.writer.close()
            return
        self._fail_waiting()

    def _fail_waiting(self, why: str = "broker connection closed") -> None:
        for fut in self._waiting.values():
            if not fut.done():
                fut.set_exception(ConnectionError(why))

    def usable(self) -> bool:
        return not (self.writer.is_closing() or self._task.done())

    async def close(self) -> None:
        self._task.cancel()
        self._fail_waiting()  # the calls waiting on it fail now, not at their own timeouts
        with contextlib.suppress(Exception):
            self.writer.close()
