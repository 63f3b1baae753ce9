"""The produce path: one L0 object for a batch over several partitions, one placeholder per
partition, acknowledged only once committed and accepted.

Epoch = max(cached cluster epoch, every partition's creation revision): the creation
revision floor is what keeps a new partition's objects above any earlier GC snapshot's M.
A stale rejection (at the fence or at apply time) retries the partitions it hit with a fresh
epoch and a NEW object; the old object becomes an orphan the GC later deletes.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from epochgc.impl.broker.raftport import IoRunner
from epochgc.impl.partition.commands import Placeholder, encode_records
from epochgc.impl.partition.fence import (
    NotLeaderError,
    PartitionDeleted,
    ReplicateFailed,
    StaleEpoch,
)
from epochgc.impl.partition.statemachine import PlaceholderResult
from epochgc.impl.store.base import ObjectStore, StoreError
from epochgc.impl.store.patience import Patience, waiting, waiting_line_after_s
from epochgc.model.keys import MAX_EPOCH, PREFIXES, format_key

log = logging.getLogger("epochgc.producer")


class ProduceError(Exception):
    """Nothing in the failed part of the batch was acknowledged."""


class UnknownPartitionError(ProduceError):
    """A partition the broker does not know: a bad name (issue 41 F12: `produce --partition
    t/99` exited 1, where the exit-code table puts a bad name at 64). Nothing uploaded."""


class PartitionDeletedError(ProduceError):
    """Some partitions of the batch were deleted (R34): their records were refused and are
    not acknowledged (never retried); `acks` holds what the rest of the batch got."""

    def __init__(self, deleted: dict[str, str], acks: dict[str, Ack]) -> None:
        names = ", ".join(f"{p!r} ({why})" for p, why in sorted(deleted.items()))
        # In words (newuser16 S6: "acknowledged: []" after 13,000 records read as nothing).
        super().__init__(f"partition deleted: {names}: those records were refused, not "
                         f"acknowledged; acknowledged in this batch: "
                         f"{', '.join(sorted(acks)) or 'none'}")
        self.deleted = deleted
        self.acks = acks


class NotAcknowledgedError(ProduceError):
    """Partitions of the batch still unacknowledged after every attempt (their records may
    have been applied: an answer lost is not a refusal); `acks` holds what the rest of the
    batch got, to be recorded as acknowledged."""

    def __init__(self, message: str, acks: dict[str, Ack]) -> None:
        super().__init__(message)
        self.acks = acks


class ClusterAccess(Protocol):
    """How a producer reaches the cluster (in-process brokers or RPC to broker processes)."""

    async def cluster_epoch(self) -> int: ...

    async def creation_revision(self, partition: str) -> int: ...

    async def replicate(self, partition: str, ph: Placeholder) -> PlaceholderResult: ...

    def invalidate_epoch(self) -> None: ...


@dataclass(frozen=True)
class Ack:
    partition: str
    base: int  # record offset of the first record
    count: int
    epoch: int
    key: str


@dataclass
class ProduceStats:
    objects_created: int = 0
    stale_rejections: int = 0
    retries: int = 0
    keys: list[str] = field(default_factory=list)


@dataclass
class _Tries:
    """A batch's attempts so far, read by the waiting line's thread (plain values, each
    replaced whole: no container it could see half-changed)."""

    max_attempts: int
    attempt: int = 0
    pending: tuple[str, ...] = ()
    last_error: str = ""

    def state(self) -> str:
        return (f"{', '.join(self.pending) or 'the batch'} not acknowledged yet, attempt "
                f"{self.attempt} of {self.max_attempts}"
                + (f", last error: {self.last_error}" if self.last_error else ""))


def check_epoch(epoch: int) -> int:
    if isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 <= epoch <= MAX_EPOCH:
        raise ProduceError(f"refusing to produce with epoch {epoch!r}: must be in [0, {MAX_EPOCH}]")
    return epoch


class Producer:
    def __init__(
        self,
        cluster: ClusterAccess,
        store: ObjectStore,
        io: IoRunner,
        rng: random.Random,
        max_attempts: int = 8,
        not_leader_backoff: float = 0.05,
        not_leader_wait: float = 10.0,
    ) -> None:
        self.cluster = cluster
        self.store = store
        self.io = io
        self.rng = rng
        self.max_attempts = max_attempts
        self.not_leader_backoff = not_leader_backoff
        self.not_leader_wait = not_leader_wait
        self.stats = ProduceStats()
        # (key, "upload") just before an object's upload, (key, "stored") once it is in the
        # store, (key, "settled") once every placeholder of that attempt has an outcome:
        # upload..settled is when the object is an in-flight write (the demo's independent
        # GC safety check uses it).
        self.on_attempt: Callable[[str, str], None] | None = None
        # Where a batch still unacknowledged after `waiting_line_after_s` (10 s) is said,
        # and again each 10 s, with its attempt (newuser12 P13: `produce` to a cluster
        # without a quorum said nothing for 71 s). None: nothing is said.
        self.say: Callable[[str], None] | None = None

    def new_key(self, epoch: int) -> str:
        name = uuid.UUID(int=self.rng.getrandbits(128), version=4).hex
        return format_key(self.rng.randrange(PREFIXES), epoch, name)

    async def produce(
        self, batch: dict[str, list[bytes]], epoch: int | None = None
    ) -> dict[str, Ack]:
        """Acks for every partition of the batch, or ProduceError (after retries) naming
        what was not acknowledged. `epoch` overrides the stamp (tests, the CLI)."""
        if epoch is not None:
            check_epoch(epoch)
        pending = {p: recs for p, recs in batch.items() if recs}
        acks: dict[str, Ack] = {}
        deleted: dict[str, str] = {}  # partition -> where it was refused
        incarnation: dict[str, int] = {}  # the creation revision the batch was meant for
        tries = _Tries(self.max_attempts)
        try:
            after_s = waiting_line_after_s()
        except StoreError:  # a bad setting: the store's commands name it; here the default
            after_s = Patience.say_after_s
        with waiting(self.say, "the cluster", "produce", after_s, state=tries.state):
            await self._attempts(epoch, pending, acks, deleted, incarnation, tries)
        if deleted:
            raise PartitionDeletedError(deleted, acks)
        if pending:
            # In words, not Python lists (newuser12 P13: "['t/0', 't/1'] ...
            # acknowledged: []").
            raise NotAcknowledgedError(
                f"not acknowledged after {self.max_attempts} attempts: "
                f"{', '.join(sorted(pending))} (last error: {tries.last_error}); "
                f"acknowledged in this batch: {', '.join(sorted(acks)) or 'none'}", acks)
        return acks

    async def _attempts(self, epoch: int | None, pending: dict[str, list[bytes]],
                        acks: dict[str, Ack], deleted: dict[str, str],
                        incarnation: dict[str, int], tries: _Tries) -> None:
        """The attempts of `produce`: fill `acks` and `deleted`, empty `pending`; `tries`
        holds the attempt and the last error (the waiting line reads them)."""
        for attempt in range(self.max_attempts):
            if not pending:
                break
            tries.attempt, tries.pending = attempt + 1, tuple(sorted(pending))
            if attempt:
                self.stats.retries += 1
            stamp = epoch
            if stamp is None:
                stamp = await self.cluster.cluster_epoch()
                for p in sorted(pending):
                    try:
                        crev = await self.cluster.creation_revision(p)
                    except PartitionDeleted as e:  # refused before any upload
                        deleted[p] = e.at
                        continue
                    except KeyError as e:  # this broker has not learnt of the partition yet
                        raise UnknownPartitionError(
                            f"partition {p!r} is unknown to the cluster: nothing was "
                            "uploaded or acknowledged") from e
                    # A retry never moves to a re-created partition of the same name (R35).
                    if incarnation.setdefault(p, crev) != crev:
                        deleted[p] = (f"re-created at revision {crev}; this batch was for "
                                      f"the incarnation created at {incarnation[p]}")
                        continue
                    stamp = max(stamp, crev)
                for p in deleted:
                    pending.pop(p, None)
                if not pending:
                    break
            check_epoch(stamp)
            key, placeholders, data = self._build(stamp, pending)
            self._note(key, "upload")
            try:
                try:
                    await self.io(functools.partial(self.store.put, key, data))
                except StoreError as e:
                    raise ProduceError(
                        f"object store unreachable ({e}); nothing acknowledged"
                    ) from e
                self._note(key, "stored")
                self.stats.objects_created += 1
                self.stats.keys.append(key)
                names = sorted(placeholders)
                results = await asyncio.gather(
                    *(self._replicate(p, placeholders[p]) for p in names), return_exceptions=True
                )
            finally:
                self._note(key, "settled")
            stale = False
            for p, r in zip(names, results, strict=True):
                if isinstance(r, PlaceholderResult):
                    acks[p] = Ack(p, r.base, placeholders[p].count, stamp, key)
                    del pending[p]
                elif isinstance(r, PartitionDeleted):  # final: never retried (R34)
                    deleted[p] = r.at
                    del pending[p]
                elif isinstance(r, StaleEpoch):
                    self.stats.stale_rejections += 1
                    stale = True
                    tries.last_error = str(r)
                elif isinstance(r, Exception):
                    tries.last_error = f"{p}: {r}"  # outcome unknown: retried with a new object
                else:
                    raise r  # CancelledError and other BaseExceptions propagate
            if stale:
                self.cluster.invalidate_epoch()

    def _note(self, key: str, phase: str) -> None:
        if self.on_attempt is not None:
            self.on_attempt(key, phase)

    def _build(
        self, epoch: int, pending: dict[str, list[bytes]]
    ) -> tuple[str, dict[str, Placeholder], bytes]:
        key = self.new_key(epoch)
        parts: list[bytes] = []
        placeholders: dict[str, Placeholder] = {}
        off = 0
        for p in sorted(pending):
            blob = encode_records(pending[p])
            placeholders[p] = Placeholder(epoch, key, off, off + len(blob), len(pending[p]))
            parts.append(blob)
            off += len(blob)
        return key, placeholders, b"".join(parts)

    async def _replicate(self, partition: str, ph: Placeholder) -> PlaceholderResult:
        """Route to the leader; a missing leader is waited for (bounded), anything else is
        the caller's to judge."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.not_leader_wait
        while True:
            try:
                return await self.cluster.replicate(partition, ph)
            except NotLeaderError:
                if loop.time() >= deadline:
                    raise
                await asyncio.sleep(self.not_leader_backoff)
            except ReplicateFailed:
                raise
