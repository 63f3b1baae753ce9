"""Unit tests: command encoding, the partition state machine, the RW lock, the controller
state machine, the epoch cache, report documents."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from epochgc.impl.broker.health import ReplicaReport, health_document, health_key
from epochgc.impl.controller.epochcache import EpochCache
from epochgc.impl.controller.publisher import partitions_document
from epochgc.impl.controller.statemachine import (
    ControllerCommandError,
    ControllerStateMachine,
    encode_create,
    encode_mint,
)
from epochgc.impl.gc.reports import PARTITIONS_KEY, parse_health, parse_partitions
from epochgc.impl.partition import commands as c
from epochgc.impl.partition.rwlock import EXCLUSIVE, SHARED, RWLock
from epochgc.impl.partition.statemachine import PartitionStateMachine
from epochgc.impl.raft.messages import Entry, Snapshot
from epochgc.model import partition as mp


@pytest.mark.parametrize(
    "cmd",
    [
        c.Placeholder(7, "level_zero/data/001/000000000000000007/ab", 3, 10, 2),
        c.AdvanceEpoch(10**18 - 1),
        c.AdvanceReconciled(-1, 5),
        c.AdvanceReconciled(9, 12, "level_one/t/000000/x", 0, 10),
        c.SetStartOffset(4),
        c.Barrier(),
    ],
)
def test_command_roundtrip(cmd: c.Command) -> None:
    assert c.decode(c.encode(cmd)) == cmd


@pytest.mark.parametrize(
    "data", [b"", b"\x02\x01", b"\x01\x09", c.encode(c.AdvanceEpoch(3)) + b"x",
             c.encode(c.Placeholder(1, "k", 0, 1, 1))[:-1]]
)
def test_command_decode_refuses_garbage(data: bytes) -> None:
    with pytest.raises(c.CommandError):
        c.decode(data)


def test_records_roundtrip() -> None:
    recs = [b"", b"a", b"x" * 300]
    assert c.decode_records(c.encode_records(recs)) == recs
    with pytest.raises(c.CommandError):
        c.decode_records(c.encode_records(recs)[:-1])


def _e(index: int, cmd: c.Command) -> Entry:
    return Entry(index, 1, 1, c.encode(cmd))


def test_state_machine_applies_model_rules_and_snapshots() -> None:
    sm = PartitionStateMachine()
    r = sm.apply(_e(1, c.Placeholder(5, "k1", 0, 4, 2)))
    assert r is not None and r.accepted and r.base == 0
    sm.apply(_e(2, c.Placeholder(8, "k2", 0, 4, 1)))
    assert mp.window(sm.state) == (5, 8)
    r = sm.apply(_e(3, c.Placeholder(4, "k3", 0, 4, 1)))  # below the window: apply-time reject
    assert r is not None and not r.accepted and r.window == (5, 8)
    assert sm.next_offset == 3 and len(sm.placeholders) == 2
    # Same result as the model on the same inputs.
    s = mp.apply_placeholder(mp.INITIAL, 5, 1).state
    s = mp.apply_placeholder(s, 8, 2).state
    assert sm.state == s
    assert sm.housekeeping_lrlo() == 0  # the first unreconciled placeholder is at index 1
    sm.apply(_e(4, c.AdvanceReconciled(1, 1, "l1", 0, 2)))
    assert [p.log_index for p in sm.placeholders] == [2]
    assert sm.locate(0) is not None and sm.locate(0)[0] == "l1"  # type: ignore[index]
    assert sm.locate(2) is not None and sm.locate(2)[0] == "l0"  # type: ignore[index]
    assert sm.locate(3) is None
    snap = sm.snapshot()
    other = PartitionStateMachine()
    other.restore(Snapshot(4, 1, snap))
    assert other.snapshot() == snap and other.state == sm.state
    other.restore(Snapshot(0, 0, b""))
    assert other.state == mp.INITIAL
    with pytest.raises(ValueError):
        other.restore(Snapshot(4, 1, b"junk"))


def test_rwlock_shared_exclusive_downgrade_fifo() -> None:
    async def body() -> None:
        lk = RWLock()
        await lk.acquire(SHARED)
        await lk.acquire(SHARED)
        order: list[str] = []

        async def want(mode: str, tag: str) -> None:
            await lk.acquire(mode)
            order.append(tag)

        w = asyncio.create_task(want(EXCLUSIVE, "w"))
        r = asyncio.create_task(want(SHARED, "r"))  # queued behind the writer (fair)
        await asyncio.sleep(0)
        assert order == []
        lk.release(SHARED)
        lk.release(SHARED)
        await asyncio.sleep(0)
        assert order == ["w"]
        lk.downgrade()
        await asyncio.sleep(0)
        assert order == ["w", "r"] and lk.readers == 2 and not lk.writer
        await asyncio.gather(w, r)
        with pytest.raises(RuntimeError):
            lk.downgrade()
        lk.release(SHARED)
        lk.release(SHARED)
        with pytest.raises(RuntimeError):
            lk.release(SHARED)
        assert lk.exclusive_acquisitions == 1

    asyncio.run(body())


def test_controller_revision_line() -> None:
    sm = ControllerStateMachine()
    assert sm.apply(Entry(2, 1, 1, encode_create("t/0"))) == 1
    assert sm.apply(Entry(3, 1, 1, encode_mint())) == 2
    assert sm.epoch == 2 and sm.partitions["t/0"].creation_revision == 1
    assert sm.apply(Entry(4, 1, 1, encode_create("t/1"))) == 3
    assert sm.table() == (3, ["t/0", "t/1"])
    doc = json.loads(partitions_document(sm))
    assert parse_partitions(doc, PARTITIONS_KEY) == (3, ("t/0", "t/1"), {"t/0": 1, "t/1": 3})
    other = ControllerStateMachine()
    other.restore(Snapshot(4, 1, sm.snapshot()))
    assert other.table() == sm.table() and other.epoch == 2
    with pytest.raises(ControllerCommandError):
        encode_create("no-slash")


def test_epoch_cache_ttl_lag_invalidate() -> None:
    now = [0.0]
    value = [1]
    cache = EpochCache(lambda: value[0], lambda: now[0], ttl=5)
    assert cache.get() == 1
    value[0] = 2
    assert cache.get() == 1  # within TTL
    now[0] = 5
    assert cache.get() == 2
    cache.lag()
    value[0], now[0] = 3, 100
    assert cache.get() == 2  # lagging: stale past its TTL
    cache.invalidate()
    assert cache.get() == 3
    value[0] = 4
    cache.invalidate()  # within the TTL: the cached value must not be served again
    assert cache.cached is None and cache.get() == 4


def test_health_document_parses_with_gc_reader() -> None:
    doc = health_document(
        "n1", 12.5, [ReplicaReport("t/1", 3, None, 7), ReplicaReport("t/0", 2, 4, 5)]
    )
    rep = parse_health(json.loads(doc), health_key("n1"))
    assert rep.node == "n1" and [r.partition for r in rep.reports] == ["t/0", "t/1"]
    assert rep.reports[0].inactive_epoch == 4 and rep.created == (5, 7)


def test_a_read_page_is_bounded_in_bytes_and_never_empty(tmp_path: Path) -> None:
    """i41o's follow-up: the broker's `read` page was bounded in records only (500): 500
    records of `produce --size 200000` made one ~133 MB answer, past what a client takes
    (`rpc.ANSWER_LIMIT`, 64 MiB), so such a partition could not be read at all."""
    from epochgc.impl.broker.records import read_records
    from epochgc.impl.store.local import LocalStore

    store = LocalStore(tmp_path / "s", create=True)
    recs = [bytes([i]) * 100_000 for i in range(50)]  # 5 MB of bodies
    data = c.encode_records(recs)
    store.put("k1", data)
    sm = PartitionStateMachine()
    sm.apply(_e(1, c.Placeholder(5, "k1", 0, len(data), len(recs))))
    pages: list[int] = []
    got: list[tuple[int, bytes]] = []
    while page := read_records(sm, store, len(got), 500, 1_000_000):
        pages.append(len(page))
        got += page
    assert pages == [10] * 5, pages
    assert got == list(enumerate(recs))
    # One record over the budget is still a page of its own: never an empty page.
    assert read_records(sm, store, 3, 500, 10) == [(3, recs[3])]
