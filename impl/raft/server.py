"""RaftServer: a MultiRaftHost on an asyncio event loop with one tick timer and a TCP
transport. Proposals return asyncio futures resolved when the entry is committed and applied
(or failed: refused, leadership lost, overwritten).

Each group stores its log under `data_dir/g<group id>` (DiskStorage). The Ready loop runs
once per event-loop iteration in which something happened, so all messages that arrived
together share one durability barrier: with `group_commit` "parallel" (the default) the fsyncs
of every group of the node that wrote in the batch, issued concurrently (each file reports its
own write-back errors); with "syncfs" (opt-in, Linux >= 5.8) one syncfs on a descriptor held
since start, which also stops the node on another program's write-back error on the same file
system; with False one fsync per group in turn.

A storage failure (disk full, failed fsync) is fatal: the server stops ticking and sending,
sets `failed`, resolves `stopped`, and re-raises StorageFailed so the event loop's exception
handler sees it. Nothing of the failed batch was acknowledged.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Callable, Collection
from typing import Any

from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.fileio import FileIO, OsFileIO
from epochgc.impl.raft.groupcommit import GroupCommit, syncfs_usable
from epochgc.impl.raft.host import MultiRaftHost, Proposal, StateMachine
from epochgc.impl.raft.identity import ensure_identity
from epochgc.impl.raft.messages import ENTRY_NORMAL, Message
from epochgc.impl.raft.node import Config
from epochgc.impl.raft.removal import group_path, remove_group_files, tombstone_path
from epochgc.impl.raft.storage import Storage, StorageFailed
from epochgc.impl.raft.transport import Transport, TransportConfig


class RaftServer:
    def __init__(
        self,
        transport_config: TransportConfig,
        data_dir: str,
        config: Config | None = None,
        tick_interval: float = 0.1,
        snapshot_interval: int = 10_000,
        seed: int | None = None,
        storage_factory: Callable[[str], Storage] | None = None,
        group_commit: bool | str | None = None,
        fileio: FileIO | None = None,
        cluster_id: str | None = None,
        adopt_clusters: Collection[str] = (),
        adopt_unnamed: bool = True,
    ) -> None:
        """`group_commit`: one barrier per batch for all groups: "syncfs", "parallel" (the
        groups' fsyncs issued concurrently), True (= "parallel"), False (one fsync per group
        in turn), None (the default: "parallel"). `fileio`: the file system calls of a
        group's removal (the real ones by default). `cluster_id`: the cluster the data
        directory's `node-identity` must name (default: the transport's), `adopt_clusters`:
        the ids it may name instead, rewritten at this start (`ensure_identity`),
        `adopt_unnamed`: whether a format-3 directory without the file is adopted."""
        self.fileio: FileIO = fileio or OsFileIO()
        self.node_id = transport_config.node_id
        self.voters = sorted([self.node_id, *transport_config.peers])
        self.data_dir = data_dir
        # Refuses a data directory of another node or cluster (impl/raft/identity.py); makes
        # the directory durable in its parent first.
        self.identity = ensure_identity(data_dir, cluster_id or transport_config.cluster_id,
                                        self.node_id, adopt=adopt_clusters,
                                        adopt_unnamed=adopt_unnamed)
        self.tick_interval = tick_interval
        self.transport = Transport(transport_config, self._on_message)
        rng = random.Random(seed if seed is not None else int.from_bytes(os.urandom(8), "big"))
        self.host = MultiRaftHost(self.node_id, self.transport.send, rng, config, snapshot_interval)
        if group_commit is None or group_commit is True:
            group_commit = "parallel"
        if group_commit == "syncfs" and not syncfs_usable():
            group_commit = "parallel"  # syncfs does not report errors before Linux 5.8
        if group_commit:
            self.group_commit: GroupCommit | None = GroupCommit(data_dir, mode=str(group_commit))
        else:
            self.group_commit = None
        self._storage_factory = storage_factory or (
            lambda d: DiskStorage(d, group_commit=self.group_commit)
        )
        self.failed: StorageFailed | None = None
        self._closer: asyncio.Task[None] | None = None
        self.stopped: asyncio.Event = asyncio.Event()
        self._flush_scheduled = False
        self._ticker: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def add_group(self, group_id: int, sm: StateMachine) -> None:
        if self.removed(group_id):
            raise ValueError(f"group {group_id} was removed from {self.data_dir}")
        storage = self._storage_factory(group_path(self.data_dir, group_id))
        self.host.add_group(group_id, self.voters, storage, sm)
        self._schedule_flush()

    def remove_group(self, group_id: int) -> None:
        """Stop the group and delete its log directory. A tombstone is made durable first,
        so a crash midway never brings the group back on restart (see `removed`)."""
        def stop_group() -> None:
            self.host.remove_group(group_id)

        remove_group_files(self.fileio, self.data_dir, group_id, stop_group)

    def removed(self, group_id: int) -> bool:
        return self.fileio.exists(tombstone_path(self.data_dir, group_id))

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self.transport.start()
        self._ticker = self._loop.call_later(self.tick_interval, self._tick)
        self._schedule_flush()

    async def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
        await self.transport.close()
        if self.failed is None:
            self.host.close()
        if self.group_commit is not None:
            self.group_commit.close()

    # ---- application API -------------------------------------------------------------------

    def propose(
        self,
        group_id: int,
        data: bytes,
        entry_type: int = ENTRY_NORMAL,
        expected_term: int | None = None,
    ) -> asyncio.Future[Any]:
        """Future of the apply result; raises ProposalRefused at once if not accepted."""
        assert self._loop is not None
        fut: asyncio.Future[Any] = self._loop.create_future()
        p = self.host.propose(group_id, data, entry_type, expected_term)
        p.on_done(lambda done: _settle(fut, done))
        self._schedule_flush()
        return fut

    def propose_cb(
        self,
        group_id: int,
        data: bytes,
        entry_type: int = ENTRY_NORMAL,
        expected_term: int | None = None,
    ) -> Proposal:
        """Like `propose` but returns the host's Proposal handle (attach `on_done`)."""
        p = self.host.propose(group_id, data, entry_type, expected_term)
        self._schedule_flush()
        return p

    def transfer_leadership(self, group_id: int, target: int) -> None:
        self.host.transfer_leadership(group_id, target)
        self._schedule_flush()

    def compact(self, group_id: int, index: int, data: bytes) -> None:
        self.host.compact(group_id, index, data)
        self._schedule_flush()

    def is_leader(self, group_id: int) -> bool:
        return self.host.is_leader(group_id)

    def leader(self, group_id: int) -> int:
        return self.host.leader(group_id)

    def term(self, group_id: int) -> int:
        return self.host.term(group_id)

    # ---- loop plumbing ---------------------------------------------------------------------

    def _on_message(self, frm: int, group: int, msg: Message) -> None:
        if self.failed is not None:
            return
        self.host.receive(group, msg)
        self._schedule_flush()

    def _tick(self) -> None:
        assert self._loop is not None
        self.host.tick()
        self._schedule_flush()
        self._ticker = self._loop.call_later(self.tick_interval, self._tick)

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled and self._loop is not None:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self.failed is not None:
            return
        try:
            self.host.process_ready()
        except StorageFailed as e:
            self._fatal(e)
            raise
        if self.host.has_work():
            self._schedule_flush()

    def _fatal(self, e: StorageFailed) -> None:
        self.failed = e
        if self._ticker is not None:
            self._ticker.cancel()
        if self._loop is not None:  # stop talking to peers: this node is out until restarted
            self._closer = self._loop.create_task(self.transport.close())
        self.stopped.set()


def _settle(fut: asyncio.Future[Any], p: Proposal) -> None:
    if fut.done():
        return
    if p.error is None:
        fut.set_result(p.result)
    else:
        fut.set_exception(p.error)
