"""The producer's and consumer's access to broker processes over the RPC protocol."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from epochgc.impl.cluster.errors import ClusterDown
from epochgc.impl.cluster.rpc import APPLIED_ONCE_SENT, CHANGES_CONTROLLER, RpcClient
from epochgc.impl.partition.commands import Placeholder
from epochgc.impl.partition.fence import (
    NotLeaderError,
    PartitionDeleted,
    ReplicateFailed,
    StaleEpoch,
)
from epochgc.impl.partition.statemachine import PlaceholderResult
from epochgc.impl.store.base import StoreError
from epochgc.impl.store.patience import Patience, waiting, waiting_line_after_s

# `CHANGES_CONTROLLER` (rpc.py): one sent and not answered may have been applied (the node
# carries it out whole, even if this client goes away), so it is not re-sent.
# Requests a live node answers from what it holds (memory, its own disk), with no Raft
# round: bounded at QUICK_S, so a node that accepts and never answers (SIGSTOPped: its
# listening socket still completes the handshake, the kernel does it; newuser9 K12) costs
# one bound, not the 30 s of a change, again and again.
QUICK_OPS = frozenset({"status", "epoch", "meta", "read", "in_use"})
QUICK_S = 10.0
# Requests only the controller leader carries out (a follower answers `not_leader`): sent
# to the leader as a node's `status` names it first, the others after. The changes, so
# that a signal never leaves one unsent though said sent (newuser10 L2); the barrier's
# mint, so that it does not wait on a follower first, a frozen one its whole bound
# (newuser10 L10).
LEADER_FIRST = CHANGES_CONTROLLER | {"barrier"}
# A request's own bound when it is not a quick one (`RpcClient.call`'s default: "waits up
# to 30 s for its node", docs/operations.md).
_CHANGE_S = 30.0


def stderr_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class ProcClusterAccess:
    def __init__(self, nodes: dict[int, tuple[str, int]], via: int | None = None,
                 hint: str = "", say: Callable[[str], None] | None = None) -> None:
        """`hint`: what to do when no node answers (`LocalCluster.down_hint`); `say`: where
        a node that does not answer in time is said (once per node), if anywhere."""
        self.nodes = nodes
        self.hint = hint
        self.say = say
        self._silent: set[int] = set()  # nodes that did not answer in time: asked last
        self.via = via if via is not None else min(nodes)
        self._clients: dict[int, RpcClient] = {}
        self._leaders: dict[str, int] = {}
        self._fresh = False
        # The node a request it may act on (APPLIED_ONCE_SENT) was sent to and has not
        # answered: what a command stopped by a signal says of it (newuser10 L2).
        self.change_unanswered: int | None = None

    async def client(self, nid: int) -> RpcClient:
        c = await self._usable(nid)
        if c is not None:
            return c
        host, port = self.nodes[nid]
        new = await RpcClient.connect(host, port)
        # Callers share this access: another may have connected while this one waited.
        c = await self._usable(nid)
        if c is not None:
            await new.close()
            return c
        self._clients[nid] = new
        return new

    async def _usable(self, nid: int) -> RpcClient | None:
        """The node's connection if it is usable; one that is not is dropped."""
        c = self._clients.get(nid)
        if c is not None and not c.usable():
            await self._drop(nid, c)
            return None
        return c

    async def call(self, nid: int, **req: Any) -> dict[str, Any]:
        c = None
        written = False  # the request handed to the connection (`RpcClient.call` writes it
        # before its first await)
        if req.get("op") in QUICK_OPS:
            req.setdefault("timeout", QUICK_S)
        try:
            c = await self.client(nid)
            change = req.get("op") in APPLIED_ONCE_SENT
            if change:
                self.change_unanswered = nid
            with self._waiting(nid, req):
                written = True
                answer_ok = await c.call(**req)
            if change:
                self.change_unanswered = None
            self._silent.discard(nid)
            return answer_ok
        except (OSError, ConnectionError, TimeoutError) as e:
            if c is not None:
                await self._drop(nid, c)
                if isinstance(e, TimeoutError):
                    # A change is not re-sent (`controller_call`, advance-epoch): no
                    # "trying the others" (newuser10 L10: said, then exit 1).
                    self._not_answering(nid, say=req.get("op") not in APPLIED_ONCE_SENT)
            answer: dict[str, Any] = {"status": "unreachable", "message": _os_reason(e)}
            if c is not None and (isinstance(e, TimeoutError) or (
                    written and req.get("op") in APPLIED_ONCE_SENT)):
                # Sent and not answered in time, or its connection lost after it was sent
                # (newuser17 T2: `cluster stop` during a create; the node carries a change
                # on though its client goes, `serve_client`): the node may have acted on it.
                answer["sent"] = True
            return answer

    def _waiting(self, nid: int, req: dict[str, Any]) -> contextlib.AbstractContextManager[None]:
        """A request still unanswered is said after `waiting_line_after_s` (10 s), as the
        store's reads and writes are (`patience.waiting`: "waiting for ENDPOINT: no answer
        yet (WHAT, N s)"). newuser10 L10: `gc-admin advance-epoch` to a frozen leader said
        nothing for its 30 s bound. A quick request needs none: its bound is QUICK_S, and
        its end is said (`_not_answering`)."""
        if self.say is None or req.get("op") in QUICK_OPS:
            return contextlib.nullcontext()
        try:
            after_s = waiting_line_after_s()
        except StoreError:  # a bad setting: the store's commands name it; here the default
            after_s = Patience.say_after_s
        host, port = self.nodes[nid]
        name = req.get("partition") or req.get("topic")
        what = f"{req.get('op')} {name!r}" if name else str(req.get("op"))
        return waiting(self.say, f"node {nid} ({host}:{port})", what, after_s)

    def _not_answering(self, nid: int, say: bool) -> None:
        if say and nid not in self._silent and self.say is not None:
            host, port = self.nodes[nid]
            self.say(f"node {nid} ({host}:{port}) does not answer; trying the others")
        self._silent.add(nid)

    def _order(self, first: int | None = None) -> list[int]:
        """Every node, `first` first, the ones that did not answer in time last."""
        ids = sorted(self.nodes, key=lambda n: (n != first, n))
        return [n for n in ids if n not in self._silent] + [n for n in ids if n in self._silent]

    async def _drop(self, nid: int, c: RpcClient) -> None:
        """Close `c` and forget it if it is still the node's connection (not one another
        caller made since). Left open, a dropped client's socket and pending reader task
        lived on until the garbage collector destroyed them."""
        if self._clients.get(nid) is c:
            del self._clients[nid]
        await c.close()

    async def any_call(self, **req: Any) -> dict[str, Any]:
        answers: dict[int, dict[str, Any]] = {}
        for nid in self._order(self.via):
            answers[nid] = await self.call(nid, **req)
            if answers[nid]["status"] == "ok":
                return answers[nid]
        raise self._none_answered("no broker", req.get("op"), answers)

    async def controller_call(self, within_s: float | None = None, **req: Any
                              ) -> dict[str, Any]:
        """The controller leader's answer (ok or an error of its own), trying every node:
        unlike `any_call`, an error from the leader is returned, not passed over.
        `within_s`: a bound on the whole call, its nodes and its rounds together (each
        request's own bound cut to what is left of it), for a request sent again after no
        answer: the barrier's took 30 s per attempt, ~20 attempts, 10 min 12 s with its
        leader alive and not committing (newuser21 X9). Past it, a `NoAnswerWithin` says
        what each node last answered."""
        answers: dict[int, dict[str, Any]] = {}
        looked: dict[int, dict[str, Any]] = {}
        # The leader search is bounded on its own (every node at once, QUICK_S): it took
        # QUICK_S per frozen node, in turn, from `within_s` (review41c C2: 7 nodes, 3 frozen
        # asked first, a healthy majority refused "not started" in 30.3 s). `within_s` is
        # the request's once the search is over.
        first = (await self._controller_leader(looked) if req.get("op") in LEADER_FIRST
                 else None)
        deadline = None if within_s is None else time.monotonic() + within_s
        for _ in range(50):  # an election in progress: a few rounds
            for nid in self._order(first):
                bound = _left(deadline, _CHANGE_S)
                if bound <= 0:
                    raise self._not_within(req.get("op"), within_s, answers, looked)
                answers[nid] = await self.call(nid, **req, **(
                    {} if deadline is None else {"timeout": bound}))
                if answers[nid]["status"] not in ("not_leader", "unreachable"):
                    return answers[nid]
                if answers[nid].get("sent") and req.get("op") in CHANGES_CONTROLLER:
                    # Never sent again (newuser9 K9: a create of 1,024 partitions got no
                    # answer in 30 s, was sent again, and was refused: "already exists",
                    # made by its own first request). Said as what it is.
                    return {"status": "no_answer", "node": nid,
                            "reason": answers[nid]["message"],
                            "message": f"node {nid}: {answers[nid]['message']}"}
            if all(a["status"] == "unreachable" for a in answers.values()):
                break  # no node listens: no election to wait for (newuser7 H8: 5.3 s)
            await asyncio.sleep(min(0.1, max(0.0, _left(deadline, 0.1))))
        raise self._none_answered("no controller leader", req.get("op"), answers)

    async def _controller_leader(self, looked: dict[int, dict[str, Any]] | None = None
                                 ) -> int | None:
        """The controller leader as the first node that answers `status` naming one sees
        it (None: none known): a change goes to it first, not to a node that only says "not
        the leader" (a signal while that answer is awaited left the change unsent, though
        said sent; newuser10 L2). Every node is asked at once, each bounded by QUICK_S, so
        the search takes at most one QUICK_S (+ a connect's 2 s) whatever the number of
        frozen nodes; the requests still out when a leader is named are cancelled (the
        connection stays usable: `RpcClient.call` forgets a cancelled call's answer).
        `looked`: filled with the answers that came (node -> answer)."""
        order = self._order(self.via)
        tasks = {asyncio.create_task(self.call(nid, op="status")): nid for nid in order}
        pending = set(tasks)
        try:
            while pending:
                done, pending = await asyncio.wait(pending,
                                                   return_when=asyncio.FIRST_COMPLETED)
                for t in sorted(done, key=lambda t: order.index(tasks[t])):
                    answer = t.result()
                    if looked is not None:
                        looked[tasks[t]] = answer
                    st = answer.get("data")
                    leader = (st.get("controller") or {}).get("leader") if st else None
                    if leader in self.nodes:
                        return int(leader)
            return None
        finally:
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    def _not_within(self, op: object, within_s: float | None,
                    answers: dict[int, dict[str, Any]],
                    looked: dict[int, dict[str, Any]] | None = None) -> NoAnswerWithin:
        """The bound of `controller_call` passed: what it waited for, node by node; a node
        not asked the request, by its answer to the leader search (`looked`), if any."""
        def words(a: dict[str, Any]) -> str:
            if a["status"] == "not_leader":
                return "not the controller leader"
            if a["status"] == "ok" and "data" in a:  # a `status` answer of the search
                leader = ((a["data"] or {}).get("controller") or {}).get("leader")
                return f"status: controller leader {leader}" if leader else "status: no leader"
            return str(a.get("message") or a["status"])

        last = {**(looked or {}), **answers}
        # Every node, also one neither asked nor answering the search before it ended
        # (newuser22 Y7: node 2, frozen, left out of the list while node 1 took the bound).
        said = "; ".join(
            f"node {n} ({self.nodes[n][0]}:{self.nodes[n][1]}): "
            + (words(last[n]) if n in last
               else f"not asked {op}: the bound passed before its turn")
            for n in sorted(self.nodes))
        return NoAnswerWithin(
            f"no controller leader answered {op} within {within_s:g} s"
            + (f" ({said})" if said else ""),
            sent=any(a.get("sent") for a in answers.values()))

    def _none_answered(self, who: str, op: object, answers: dict[int, dict[str, Any]]
                       ) -> ConnectionError:
        """In words (newuser7 H8: a dict's repr): every node unreachable is a cluster not
        running, said with the way on; else the last answer."""
        if answers and all(a["status"] == "unreachable" for a in answers.values()):
            why = sorted({str(a.get("message")) for a in answers.values()})
            return ClusterDown(
                f"no node of the cluster answered ({len(answers)} node(s), on ports "
                + ", ".join(str(self.nodes[n][1]) for n in sorted(answers))
                + f": {'; '.join(why)})" + (f"; {self.hint}" if self.hint else ""))
        nid = list(answers)[-1] if answers else 0
        last = _answer_reason(nid, answers[nid]) if answers else "no node to ask"
        return ConnectionError(f"{who} answered {op}: {last}")

    async def cluster_epoch(self) -> int:
        fresh, self._fresh = self._fresh, False
        return int((await self.any_call(op="epoch", fresh=fresh))["epoch"])

    async def creation_revision(self, partition: str) -> int:
        meta = await self.any_call(op="meta")
        if partition not in meta["partitions"]:
            if partition in meta.get("deleted", []):
                raise PartitionDeleted(partition, "upload: no such partition")
            raise KeyError(f"unknown partition {partition!r}")
        return int(meta["partitions"][partition]["revision"])

    async def _leader(self, partition: str) -> int:
        if partition in self._leaders:
            return self._leaders[partition]
        meta = await self.any_call(op="meta")
        info = meta["partitions"].get(partition)
        leader = int(info["leader"]) if info else 0
        if leader not in self.nodes:
            raise NotLeaderError(0)
        self._leaders[partition] = leader
        return leader

    async def replicate(self, partition: str, ph: Placeholder) -> PlaceholderResult:
        nid = await self._leader(partition)
        r = await self.call(nid, op="replicate", partition=partition, epoch=ph.epoch,
                            key=ph.key, start=ph.start, end=ph.end, count=ph.count)
        st = r["status"]
        if st == "ok":
            return PlaceholderResult(True, int(r["base"]), None)
        if st == "stale":
            w = r["window"]
            raise StaleEpoch(ph.epoch, None if w is None else (int(w[0]), int(w[1])), r["at"])
        self._leaders.pop(partition, None)
        if st == "deleted":
            raise PartitionDeleted(partition, str(r.get("at", "fence")))
        if st == "not_leader":
            if int(r["leader"]) in self.nodes:
                self._leaders[partition] = int(r["leader"])
            raise NotLeaderError(int(r["leader"]))
        if st == "unreachable":
            raise NotLeaderError(0, str(r.get("message") or "unreachable"))
        raise ReplicateFailed(r.get("message", st))

    def invalidate_epoch(self) -> None:
        self._fresh = True

    async def read_partition(self, partition: str, retries: int = 100) -> list[tuple[int, bytes]]:
        """Every record of the partition, page by page; `retries` bounds the failed reads,
        not the pages (it bounded both: a partition over 100 pages, 50,000 records, was
        "could not read" though every read succeeded; issue 41)."""
        out: list[tuple[int, bytes]] = []
        failures = 0
        last = ""  # the last failure's reason (i41o: "could not read t/0" said none)
        while failures < retries:
            try:
                nid = await self._leader(partition)
            except (NotLeaderError, ConnectionError) as e:
                failures += 1
                last = _reason(e)
                await asyncio.sleep(0.2)
                continue
            r = await self.call(nid, op="read", partition=partition, offset=len(out))
            if r["status"] != "ok":
                self._leaders.pop(partition, None)
                failures += 1
                last = _answer_reason(nid, r)
                await asyncio.sleep(0.2)
                continue
            recs = r["records"]
            if not recs:
                return out
            out.extend((int(o), base64.b64decode(b)) for o, b in recs)
        raise ConnectionError(_could_not_read(partition, len(out), failures, last))

    async def read_checked(
        self, partition: str, retries: int = 100
    ) -> tuple[dict[int, bytes], list[int]]:
        """Every record of the partition, and the offsets whose bytes could not be read
        (their object is gone): a checker must count those, not give up on the rest."""
        out: dict[int, bytes] = {}
        unreadable: list[int] = []
        offset = 0
        failures = 0
        last = ""
        while failures < retries:
            try:
                nid = await self._leader(partition)
            except (NotLeaderError, ConnectionError) as e:
                failures += 1
                last = _reason(e)
                await asyncio.sleep(0.2)
                continue
            r = await self.call(nid, op="read", partition=partition, offset=offset)
            if r["status"] == "error":  # the store failed this offset: skip one record
                if len(unreadable) >= 1_000_000:
                    raise ConnectionError(f"{partition}: {r.get('message')}")
                unreadable.append(offset)
                offset += 1
                continue
            if r["status"] != "ok":
                self._leaders.pop(partition, None)
                failures += 1
                last = _answer_reason(nid, r)
                await asyncio.sleep(0.2)
                continue
            if not r["records"]:
                return out, unreadable
            for o, b in r["records"]:
                out[int(o)] = base64.b64decode(b)
            offset = max(out) + 1
        raise ConnectionError(_could_not_read(partition, offset, failures, last))

    async def close(self) -> None:
        for c in self._clients.values():
            await c.close()
        self._clients.clear()


class NoAnswerWithin(ConnectionError):
    """`controller_call`'s whole bound passed; `sent`: some node was sent the request and
    did not answer it, so it may have acted on it."""

    def __init__(self, message: str, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


def _left(deadline: float | None, cap: float) -> float:
    """What is left of `deadline` (monotonic), at most `cap`; `cap` with no deadline."""
    return cap if deadline is None else min(cap, deadline - time.monotonic())


def _os_reason(e: BaseException) -> str:
    """An unreachable node in words: the C library's for its errno (`[Errno 111] Connect
    call failed ('127.0.0.1', 33323)` is "Connection refused")."""
    if isinstance(e, OSError) and e.errno:
        return os.strerror(e.errno)
    if isinstance(e, TimeoutError):
        return str(e) or "no answer in time"
    return str(e) or type(e).__name__


def _reason(e: BaseException) -> str:
    if isinstance(e, NotLeaderError):
        return "no leader known for it"
    return str(e) or type(e).__name__


def _answer_reason(nid: int, r: dict[str, Any]) -> str:
    """A failed read's answer in a few words: its status and message."""
    message = r.get("message") or r.get("error")
    return f"node {nid} answered {r.get('status')}" + (f": {message}" if message else "")


def _could_not_read(partition: str, offset: int, failures: int, last: str) -> str:
    return (f"could not read {partition} at offset {offset:,} ({failures} failed read(s)"
            + (f"; the last: {last}" if last else "") + ")")
