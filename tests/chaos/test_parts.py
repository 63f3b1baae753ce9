"""The chaos run's parts on their own, each with a seeded fault it must show: the link proxy
(one-way cuts drop only that direction, whole frames), the disk fault switches (EIO drops the
unsynced tail; ENOSPC), the fault file, the Raft-log comparison, the plan."""

from __future__ import annotations

import asyncio
import errno
import os
import struct
from pathlib import Path

import pytest

from epochgc.impl.chaos.checker import raft_divergences
from epochgc.impl.chaos.faultfile import Faults, NodeFaults
from epochgc.impl.chaos.proxy import HttpProxy, LinkProxy
from epochgc.impl.chaos.schedule import KINDS, plan
from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.fileio import FaultFileIO
from epochgc.impl.raft.messages import Entry, HardState
from epochgc.impl.raft.storage import StorageFailed
from epochgc.impl.store.base import StoreError
from epochgc.impl.store.faulty import FaultyStore
from epochgc.impl.store.local import LocalStore


def _frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


LIVENESS_S = 60.0  # a bound for a hang, not a timing assumption


async def _link_roundtrip(cut: set[tuple[int, int]]) -> tuple[list[bytes], list[bytes]]:
    """Node 1 dials node 2 through the proxy; each sends three frames; returns what each
    side received. Once the proxy has handled all six (forwarded or dropped), node 1 ends
    its side and each reads to the end: what it got is all it ever will (a 0.5 s wait per
    frame once decided that, and could read a loaded machine's late frame as a cut)."""
    got_at_2: list[bytes] = []
    done = asyncio.Event()

    async def server(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        for i in range(3):
            w.write(_frame(b"from2-%d" % i))
        await w.drain()
        try:
            while True:
                (n,) = struct.unpack(">I", await r.readexactly(4))
                got_at_2.append(await r.readexactly(n))
        except asyncio.IncompleteReadError:
            done.set()

    srv = await asyncio.start_server(server, "127.0.0.1", 0)
    proxy = LinkProxy(1, 2, srv.sockets[0].getsockname()[1])
    proxy.cut |= cut
    await proxy.start()
    r, w = await asyncio.open_connection("127.0.0.1", proxy.port)
    for i in range(3):
        w.write(_frame(b"from1-%d" % i))
    await w.drain()
    got_at_1: list[bytes] = []
    async with asyncio.timeout(LIVENESS_S):
        while proxy.forwarded + proxy.dropped < 6:
            await asyncio.sleep(0.01)
        w.write_eof()  # the proxy ends the connection, both ways, after what it forwarded
        try:
            while True:
                (n,) = struct.unpack(">I", await r.readexactly(4))
                got_at_1.append(await r.readexactly(n))
        except asyncio.IncompleteReadError:
            pass
        await done.wait()
    w.close()
    await proxy.close()
    srv.close()
    return got_at_1, got_at_2


def test_link_proxy_cuts_exactly_the_directions_asked() -> None:
    sent1 = [b"from1-%d" % i for i in range(3)]
    sent2 = [b"from2-%d" % i for i in range(3)]
    assert asyncio.run(_link_roundtrip(set())) == (sent2, sent1)
    assert asyncio.run(_link_roundtrip({(1, 2)})) == (sent2, [])  # one way: 1 -> 2 only
    assert asyncio.run(_link_roundtrip({(2, 1)})) == ([], sent1)
    assert asyncio.run(_link_roundtrip({(1, 2), (2, 1)})) == ([], [])


async def _http(mode: str | None) -> bytes:
    async def server(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await r.readuntil(b"\r\n\r\n")
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await w.drain()
        w.close()

    srv = await asyncio.start_server(server, "127.0.0.1", 0)
    proxy = HttpProxy(srv.sockets[0].getsockname()[1])
    proxy.mode = mode
    await proxy.start()
    r, w = await asyncio.open_connection("127.0.0.1", proxy.port)
    try:
        w.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await w.drain()
        data = await asyncio.wait_for(r.read(), 5)
    except ConnectionResetError:  # "down": closed before or while the request went out
        data = b""
    w.close()
    await proxy.close()
    srv.close()
    return data


def test_http_proxy_modes() -> None:
    assert asyncio.run(_http(None)).startswith(b"HTTP/1.1 200")
    assert asyncio.run(_http("fail")).startswith(b"HTTP/1.1 503")
    assert asyncio.run(_http("down")) == b""


def test_failed_fsync_loses_the_unsynced_tail_on_the_device_and_the_log_fails(
    tmp_path: Path,
) -> None:
    fs = FaultFileIO()
    s = DiskStorage(str(tmp_path / "g"), fs=fs)
    s.load()
    s.write(HardState(1, 0, 1), None, [Entry(1, 1, data=b"a")])
    s.sync()
    s.write(None, None, [Entry(2, 1, data=b"b" * 100)])
    fs.fail_fsync = True
    with pytest.raises(StorageFailed):
        s.sync()
    with pytest.raises(StorageFailed):  # sticky: the log never carries on
        s.write(None, None, [Entry(3, 1, data=b"c")])
    s.abandon()
    # What the failed write-back lost is still in the page cache (the file), not on the
    # device: a restart without a reboot reads the device (tests/raft/test_faultfileio.py).
    assert b"b" * 100 in b"".join(p.read_bytes() for p in (tmp_path / "g").iterdir())
    fs.fail_fsync = False
    init = DiskStorage(str(tmp_path / "g"), fs=fs).load()
    assert [e.index for e in init.entries] == [1]


def test_enospc_fails_the_write(tmp_path: Path) -> None:
    fs = FaultFileIO()
    s = DiskStorage(str(tmp_path / "g"), fs=fs)
    s.load()
    fs.enospc = True
    with pytest.raises((StorageFailed, OSError)) as e:
        s.write(HardState(1, 0, 0), None, [Entry(1, 1, data=b"a")])
        s.sync()
    assert "No space" in str(e.value) or getattr(e.value, "errno", None) == errno.ENOSPC


def test_fault_file_drives_the_switches(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    Faults().write(path)
    nf = NodeFaults(str(path))
    store = nf.wrap(FaultyStore(LocalStore(tmp_path / "s", create=True)))
    store.put("a", b"1")
    Faults(fsync_eio=True, enospc=True, store="fail", clock_offset=-60.0).write(path)
    os.utime(path, ns=(1, 10**18))  # a new mtime even on a coarse clock
    nf.refresh()
    assert nf.fs.fail_fsync and nf.fs.enospc
    assert nf.wall() < __import__("time").time() - 50
    with pytest.raises(StoreError, match="503"):
        store.get("a")
    path.write_text('{"store": "sideways"}')
    os.utime(path, ns=(2, 2 * 10**18))
    with pytest.raises(ValueError, match="sideways"):
        nf.refresh()


def _log(d: Path, entries: list[Entry], commit: int) -> None:
    s = DiskStorage(str(d))
    s.load()
    # (the hard state's term covers its entries' terms: the disk log refuses a stale one)
    s.write(HardState(max(e.term for e in entries), 0, commit), None, entries)
    s.sync()
    s.close()


def test_raft_divergences_compares_committed_entries_only(tmp_path: Path) -> None:
    same = [Entry(1, 1, data=b"x"), Entry(2, 1, data=b"y")]
    _log(tmp_path / "n1" / "g5", same, 2)
    _log(tmp_path / "n2" / "g5", same, 2)
    _log(tmp_path / "n3" / "g5", [same[0], Entry(2, 2, data=b"z")], 1)  # differs, uncommitted
    dirs = {i: tmp_path / f"n{i}" for i in (1, 2, 3)}
    assert raft_divergences(dirs) == []
    # Seeded bug: a replica that committed a different entry at index 2.
    _log(tmp_path / "n4" / "g5", [same[0], Entry(2, 2, data=b"z")], 2)
    dirs[4] = tmp_path / "n4"
    divs = raft_divergences(dirs)
    assert len(divs) == 1 and divs[0].index == 2 and divs[0].nodes == (1, 2, 4)


def test_plan_injects_every_kind_first_and_is_seeded() -> None:
    p = plan(120, 3, 7)
    assert {e.kind for e in p[: len(KINDS)]} == set(KINDS)
    assert p == plan(120, 3, 7) and p != plan(120, 3, 8)
    assert all(e.count == 1 for e in p if e.kind == "kill")  # a minority of 3
    assert max(e.count for e in plan(600, 5, 1) if e.kind == "kill") == 2
    assert all(e.duration > 1.0 for e in p if e.kind == "pause")  # > election timeout


def _apply(part: str, index: int, cmd: dict[str, object], lrlo: int,
           accepted: bool | None = None) -> str:
    import json

    return json.dumps({"kind": "apply", "partition": part, "index": index, "command": cmd,
                       "accepted": accepted, "state": {"last_reconciled_log_offset": lrlo}})


def test_trace_inuse_check_flags_unreconciled_and_late_references(tmp_path: Path) -> None:
    from epochgc.impl.chaos.inuse import Round, check

    ph = {"type": "placeholder", "key": "K"}
    rec = {"type": "advance_reconciled"}
    lines = [_apply("t/0", 5, ph, -1, True), _apply("t/1", 2, {"type": "placeholder",
             "key": "L"}, -1, True)]
    head = "\n".join(lines) + "\n"
    reconciled = head + _apply("t/0", 6, rec, 5) + "\n"
    trace = tmp_path / "t.ndjson"
    trace.write_text(reconciled)
    n_head, n_all = len(head.encode()), len(reconciled.encode())
    # K reconciled (LRLO 5) before the round ended: deleting it was fine.
    assert check(str(trace), [Round(n_head, n_all, frozenset({"K"}))]) == ([], {"K", "L"}, set())
    # Seeded bug: deleted while LRLO was still below its placeholder.
    assert [k for k, _ in check(str(trace), [Round(n_head, n_head, frozenset({"K"}))])[0]] == ["K"]
    # A replica re-applying the same index after a restart is not a new reference.
    trace.write_text(reconciled + _apply("t/0", 5, ph, 5, True) + "\n")
    assert check(str(trace), [Round(n_head, n_all, frozenset({"K"}))])[0] == []
    # A reference first committed after the deletion.
    trace.write_text(head + _apply("t/0", 7, {"type": "placeholder", "key": "M"}, 5, True) + "\n")
    assert [k for k, _ in check(str(trace), [Round(0, n_head, frozenset({"M"}))])[0]] == ["M"]


def test_a_write_in_flight_during_its_deletion_is_in_use_only_if_accepted_in_the_race(
    tmp_path: Path,
) -> None:
    """s11's 20-minute chaos run: a write to six partitions had four placeholders accepted
    and reconciled before a GC round started, the other two still being retried (never
    accepted) while the round deleted its object at M above its epoch. "Ever accepted"
    counted it in use; the trace shows each accepted placeholder first applied before the
    round and reconciled before it ended, so it was not."""
    from epochgc.impl.chaos.inuse import Round, check, in_flight_in_use

    ph = {"type": "placeholder", "key": "K"}
    before = _apply("t/0", 5, ph, -1, True) + "\n" + _apply("t/0", 6, {"type": "r"}, 5) + "\n"
    trace = tmp_path / "t.ndjson"
    trace.write_text(before)
    start = len(before.encode())
    bad, accepted, raced = check(str(trace), [Round(start, start, frozenset({"K"}))])
    assert (bad, accepted, raced) == ([], {"K"}, set())
    assert in_flight_in_use({"K"}, set(), (accepted, raced)) == set()
    assert in_flight_in_use({"K"}, {"K"}, (accepted, raced)) == set()  # acknowledged too
    # Another placeholder of K first applied once the round had started: a race.
    during = before + _apply("t/1", 3, ph, -1, True) + "\n"
    trace.write_text(during)
    end = len(during.encode())
    bad, accepted, raced = check(str(trace), [Round(start, end, frozenset({"K"}))])
    assert bad == [] and raced == {"K"}
    assert in_flight_in_use({"K"}, set(), (accepted, raced)) == {"K"}
    assert in_flight_in_use(set(), set(), (accepted, raced)) == set()  # not in flight
    # Acknowledged, but the trace holds none of its placeholders: still counted.
    assert in_flight_in_use({"J"}, {"J"}, (accepted, raced)) == {"J"}
    # Without a trace, every acknowledged write counts.
    assert in_flight_in_use({"K", "J"}, {"J"}, None) == {"J"}


def test_power_loss_keeps_only_what_was_fsynced(tmp_path: Path) -> None:
    fs = FaultFileIO()
    s = DiskStorage(str(tmp_path / "g"), fs=fs)
    s.load()
    s.write(HardState(1, 0, 1), None, [Entry(1, 1, data=b"a")])
    s.sync()
    s.write(None, None, [Entry(2, 1, data=b"b" * 100)])  # written, never fsynced
    fs.lose_unsynced()
    s.abandon()
    assert [e.index for e in DiskStorage(str(tmp_path / "g")).load().entries] == [1]


def test_a_stalled_fsync_covers_only_what_was_written_when_issued(tmp_path: Path) -> None:
    """The seeded-bug hunt needs this: with fsyncs covering later writes too, a node that
    acknowledges before its (background) fsync lost nothing at a power loss."""

    class WriteDuringStall(FaultFileIO):
        def _stall(self) -> None:  # another thread's write lands while the fsync stalls
            os.write(fd, b"b" * 10)

    fs = WriteDuringStall()
    fd = fs.open_append(str(tmp_path / "f"), create=True)
    fs.write(fd, b"a" * 10)
    fs.fsync(fd)
    fs.lose_unsynced()
    fs.close(fd)
    assert (tmp_path / "f").read_bytes() == b"a" * 10
