"""The cluster and the object store as the conformance harness instruments them: a store
with injectable put and read failures that records every L0 object written, a SimCluster
that records every fence decision, admission and apply (with the incarnation), and the
simulator's own network and event counts flushed into `STATS`."""

from __future__ import annotations

from collections import Counter
from typing import Any

from epochgc.impl.partition.commands import Placeholder
from epochgc.impl.partition.fence import FenceDecision
from epochgc.impl.partition.statemachine import ApplyEvent
from epochgc.impl.raft.messages import MsgType
from epochgc.impl.sim.cluster import SimCluster
from epochgc.impl.sim.network import BrokerSimulator
from epochgc.impl.store.base import DeleteResult, ListPage, ObjectInfo, ObjectStore, StoreError
from epochgc.impl.store.local import LocalStore
from epochgc.model import partition as mp
from epochgc.model.keys import DATA_PREFIX
from epochgc.model.partition import PartitionState
from tests.conformance.deployment import STATS


class FaultyStore(ObjectStore):
    """The local store with one injectable fault: the next `put` (of a key with a given
    prefix) fails. Records every L0 key that was durably written."""

    def __init__(self, inner: LocalStore) -> None:
        self.inner = inner
        self.fail_next_put: str | None = None  # key prefix, or None
        # Every read (get, head, list) under this prefix fails while set (issue 31: a GC
        # task's re-read of the reports that fails must not let its deletes go ahead).
        self.fail_reads: str | None = None
        self.written: list[str] = []

    def _read(self, key: str) -> None:
        if self.fail_reads is not None and key.startswith(self.fail_reads):
            STATS["fault.store_read_failed"] += 1
            raise StoreError(f"injected read failure for {key!r}")

    def describe(self) -> str:
        return self.inner.describe()

    def put(self, key: str, data: bytes) -> None:
        if self.fail_next_put is not None and key.startswith(self.fail_next_put):
            self.fail_next_put = None
            STATS["fault.store_put_failed"] += 1
            raise StoreError(f"injected put failure for {key!r}")
        self.inner.put(key, data)
        if key.startswith(DATA_PREFIX):
            self.written.append(key)

    def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        self._read(key)
        return self.inner.get(key, start, end)

    def head(self, key: str) -> ObjectInfo | None:
        self._read(key)
        return self.inner.head(key)

    def list_page(
        self, prefix: str, start_after: str | None = None, max_keys: int = 1000,
        until: str | None = None,
    ) -> ListPage:
        self._read(prefix)
        return self.inner.list_page(prefix, start_after, max_keys, until)

    def delete_batch(self, keys: list[str]) -> DeleteResult:
        return self.inner.delete_batch(keys)


class HarnessCluster(SimCluster):
    """SimCluster plus one observer: the applied state each fence decided on (read at the
    moment of the decision). (The Raft checker's state-machine-safety hook on the broker
    groups comes with the simulator.)"""

    def __init__(self, **kw: Any) -> None:
        self.fence_inputs: list[tuple[int, str, FenceDecision, PartitionState]] = []
        self.admitted: dict[tuple[str, str], set[int]] = {}
        self.last_admitted: dict[tuple[int, str], str] = {}
        self.admissions: list[tuple[int, str, Placeholder, int]] = []
        self.apply_groups: list[int] = []  # the group (incarnation) of each apply_log record
        # Placeholders whose apply-time rejection an injected fault explains (LandedChecks).
        self.explained: set[tuple[str, str]] = set()
        # (node, group, term) where a fence slid the seen window and the injected replicate
        # failure then kept its placeholder out of the log (F1's phantom): for the rest of
        # that term (R8) the seen window holds bounds the log never saw, so in-window writes
        # it admits can land out of window order and be rejected at apply (REFERENCE F1; the
        # fence is liveness only, spec section 3).
        self.phantom_terms: set[tuple[int, int, int]] = set()
        self._decided: dict[tuple[int, str], FenceDecision] = {}
        super().__init__(**kw)

    def _on_apply(self, nid: int, name: str, ev: ApplyEvent) -> None:
        # The replica applying is the one in the broker's table: a deleted incarnation's is
        # removed before a re-created one is added (and a deleted one reports nothing).
        super()._on_apply(nid, name, ev)
        self.apply_groups.append(self.brokers[nid].replicas[name].info.group)

    def _on_admitted(self, nid: int, name: str, ph: Placeholder, term: int) -> None:
        self.admitted.setdefault((name, ph.key), set()).add(term)
        self.last_admitted[(nid, name)] = ph.key
        b = self.brokers.get(nid)
        rep = b.replicas.get(name) if b is not None else None
        if rep is not None:
            self.admissions.append((nid, name, ph, rep.info.creation_revision))
            # The fence reports its decision just before it returns to this hook.
            d = self._decided.get((nid, name))
            if (d is not None and d.kind == "in_window"
                    and (nid, rep.info.group, term) in self.phantom_terms):
                self.explained.add((name, ph.key))
                STATS["fault.admitted_under_phantom_slide"] += 1

    def fail_next_replicate(self, partition: str, nid: int | None = None) -> None:
        """As SimCluster's, and when the failure hits a write whose fence slid the seen
        window, that node's term of the group is marked as holding a phantom slide."""
        super().fail_next_replicate(partition, nid)
        nid = nid if nid is not None else self.leader(partition)
        assert nid is not None
        rep = self.brokers[nid].replicas[partition]
        fence, fail = rep.fence, rep.fence.fail_replicate
        assert fail is not None

        def once(epoch: int) -> bool:
            d = self._decided.get((nid, partition))
            if d is not None and d.slid and d.epoch == epoch:
                self.phantom_terms.add((nid, rep.info.group, d.term))
            return fail(epoch)

        fence.fail_replicate = once

    def _on_fence(self, nid: int, name: str, d: FenceDecision) -> None:
        super()._on_fence(nid, name, d)
        self._decided[(nid, name)] = d
        b = self.brokers.get(nid)
        state = b.replicas[name].sm.state if b is not None else mp.INITIAL
        self.fence_inputs.append((nid, name, d, state))


# The simulator's own counts of what its network faults did (`count_net`), as STATS names.
_NET_STATS = {
    "net_scheduled": "net.delivered_or_queued", "net_reordered": "fault.net_reordered",
    "net_delayed": "fault.net_delayed", "net_duplicated": "fault.net_duplicated",
    "net_dropped": "fault.net_dropped", "net_lost": "fault.net_lost_at_delivery",
    # The simulator's events by kind (issue 14's profile: where a harness step's time goes).
    "ev_tick": "sim.event.tick", "ev_flush": "sim.event.batched_ready",
    **{f"ev_{t.name.lower()}": f"sim.event.{t.name.lower()}" for t in MsgType},
}


def _count_network(sim: BrokerSimulator) -> None:
    """Count what the simulator's seeded network faults did (instrumentation only): the
    simulator counts them itself (a wrapper around every event was ~5% of the CPU)."""
    sim.count_net = True


def _flush_network_counts(sim: BrokerSimulator, seen: Counter[str]) -> None:
    for k, name in _NET_STATS.items():
        n = sim.stats[k]
        if n != seen[k]:
            STATS[name] += n - seen[k]
            seen[k] = n
