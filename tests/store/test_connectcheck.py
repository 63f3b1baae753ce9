"""The send deadline checked again before each connect a bounded request opens
(`impl/store/connectcheck.py`, review rev38z2 finding 3): after the name lookup and before
EACH further address's connect; on this thread only, and only until the attempt ends."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from epochgc.impl.store import connectcheck
from epochgc.impl.store.s3 import CONNECT_TIMEOUT_S
from tests.store.s3proxy import Call, s3_proxy
from tests.store.sendclock import bucket_with_k, dead_address_first, noting, on_send_clock


@pytest.mark.s3
def test_a_further_address_is_not_connected_to_past_the_deadline(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The name resolves to two addresses; the first refuses the connection after 30 s
    (moved on the store's send clock, not waited) and urllib3 goes on to the second
    (`create_connection` tries each in turn). Before: the request went out on the second
    address 29 s past its deadline (seen failing: sent at [130.0])."""
    bucket, direct = bucket_with_k(moto_endpoint)
    now = [100.0]
    sent_at: list[float] = []

    with s3_proxy(moto_endpoint, faults=noting("delete", lambda c: sent_at.append(now[0]))
                  ) as p:
        store = on_send_clock(bucket, p.endpoint, now)
        try:
            store.client.meta.events  # noqa: B018  (the client made: no connection yet)
            dead_address_first(monkeypatch, int(p.endpoint.rpartition(":")[2]), now, 30.0)
            with store.send_by(101.0):
                result = store.delete_batch(["k"])
        finally:
            monkeypatch.undo()
            store.close()
    assert all(t <= 101.0 + CONNECT_TIMEOUT_S for t in sent_at), (
        f"a DeleteObjects checked at 100 (deadline 101) was sent at {sent_at} on the send "
        "clock, on the name's second address")
    assert not sent_at and direct.head("k") is not None
    assert list(result.errors) == ["k"] and not result.unknown, result


@pytest.fixture
def listener() -> Iterator[tuple[str, int]]:
    s = socket.create_server(("127.0.0.1", 0))
    try:
        yield s.getsockname()[:2]
    finally:
        s.close()


def test_only_the_armed_thread_is_checked_and_only_until_disarmed(
    listener: tuple[str, int],
) -> None:
    """Another thread's connect is not checked (the executor's journal writes, Spark's
    own sockets); this thread's is until `disarm` (botocore's `needs-retry`)."""
    connectcheck.install()

    class Late(Exception):
        pass

    def refuse() -> None:
        raise Late("past the deadline")

    other: list[BaseException | None] = []

    def connect_elsewhere() -> None:
        try:
            socket.create_connection(listener, timeout=10.0).close()
            other.append(None)
        except BaseException as e:  # reported below
            other.append(e)

    connectcheck.arm(refuse)
    try:
        with pytest.raises(Late):
            socket.create_connection(listener, timeout=10.0)
        t = threading.Thread(target=connect_elsewhere)
        t.start()
        t.join(30.0)
        assert other == [None], other
    finally:
        connectcheck.disarm()
    socket.create_connection(listener, timeout=10.0).close()  # disarmed: not checked



@pytest.mark.s3
@pytest.mark.parametrize("frozen_at", ["connect", "headers"])
def test_a_write_past_the_deadline_is_not_made(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, frozen_at: str,
) -> None:
    """Review rev38z13 finding 1, in process (its SIGSTOP case, behind
    EPOCHGC_S3_FAULTS=deep, is tests/store/test_rev38z13.py): the task is frozen after its
    last check before the wire, and its send clock moves 30 s past the deadline meanwhile
    (moved, not waited). The check before each write (`connectcheck`, audit event
    `http.client.send`) finds it passed:
    - frozen in its connect (after the connect's check): no byte of the request was
      written, so it is not sent, and its key stays, not deleted, known so (rule (c));
      before the check, the whole DeleteObjects went out and the key was deleted;
    - frozen in its headers' write: the body is not written and the connection is reset
      (`SentInPart`); the server got no whole request, and the key is `unknown` (what was
      written may have reached the server: the client cannot tell), still there."""
    bucket, direct = bucket_with_k(moto_endpoint)
    now = [100.0]
    deletes: list[Call] = []
    real_connect, real_sendall = socket.socket.connect, socket.socket.sendall
    writes: list[int] = []  # the store's, on this thread (not the proxy's, nor its HEADs)
    me = threading.get_ident()

    def frozen_connect(sock: socket.socket, address: Any) -> None:
        real_connect(sock, address)
        if frozen_at == "connect" and threading.get_ident() == me:
            now[0] += 30.0

    def frozen_write(sock: socket.socket, data: Any, *args: Any) -> None:
        real_sendall(sock, data, *args)
        if threading.get_ident() == me:
            writes.append(len(data))
            if frozen_at == "headers":
                now[0] += 30.0

    with s3_proxy(moto_endpoint, faults=noting("delete", deletes.append)) as p:
        store = on_send_clock(bucket, p.endpoint, now)
        try:
            store.client.meta.events  # noqa: B018  (the client made: no connection yet)
            monkeypatch.setattr(socket.socket, "connect", frozen_connect)
            monkeypatch.setattr(socket.socket, "sendall", frozen_write)
            with store.send_by(101.0):
                result = store.delete_batch(["k"])
        finally:
            monkeypatch.undo()
            store.close()
    assert not deletes and direct.head("k") is not None, (
        f"a DeleteObjects whose send deadline passed before its {frozen_at} write(s) "
        f"reached the server: {deletes}; writes {writes}")
    assert list(result.errors) == ["k"], result
    if frozen_at == "connect":
        assert writes == [] and not result.unknown, (writes, result)
        assert "not sent" in result.errors["k"], result.errors
    else:
        assert len(writes) == 1 and result.unknown == {"k"}, (writes, result)
        assert "may have reached the server" in result.errors["k"], result.errors
