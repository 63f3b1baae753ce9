"""Set-up shared by the tests of the send deadline checked again before each connect and
write (`impl/store/connectcheck.py`: tests/store/test_connectcheck.py, review rev38z2
finding 3, rev38z14 finding 1): a key in a new bucket, a store on a send clock the test
moves (`now[0]`, not waited), the proxy's record of when a call reached the server, and a
name whose first address is a dead route."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest

from epochgc.impl.store.s3 import S3Store
from tests.store.forward import no_key_retry
from tests.store.s3proxy import Call, Fault, FaultPlan
from tests.store.s3server import new_bucket


def refused_port() -> int:
    """A loopback port where nothing listens (bound, never listened: connect is refused)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


def bucket_with_k(moto_endpoint: str) -> tuple[str, S3Store]:
    """A new bucket holding the key "k", and a store on it straight to moto."""
    bucket = new_bucket(moto_endpoint)
    direct = S3Store(bucket, "c", endpoint_url=moto_endpoint)
    direct.put("k", b"x")
    return bucket, direct


def on_send_clock(bucket: str, endpoint: str, now: list[float]) -> S3Store:
    """A store at `endpoint` with no retry of its own whose send clock
    (`S3Store.monotonic`) is `now[0]`."""
    store = S3Store(bucket, "c", endpoint_url=endpoint, max_attempts=0,
                    key_retry=no_key_retry())
    store.monotonic = lambda: now[0]
    return store


def noting(kind: str, note: Callable[[Call], object]) -> FaultPlan:
    """The proxy's `faults`: none injected; each call of `kind` given to `note` as it
    reaches the server."""

    def faults(c: Call) -> Fault | None:
        if c.kind == kind:
            note(c)
        return None

    return faults


def dead_address_first(monkeypatch: pytest.MonkeyPatch, port: int, now: list[float],
                       late_s: float) -> None:
    """The name of the endpoint on `port` resolves to two addresses; the first is a dead
    route whose connect is refused after `late_s` (moved on `now`, not waited), and urllib3
    goes on to the second (`create_connection` tries each in turn)."""
    dead = ("127.0.0.1", refused_port())
    real_lookup, real_connect = socket.getaddrinfo, socket.socket.connect

    def two_addresses(host: Any, at: Any, *args: Any, **kwargs: Any) -> Any:
        found = real_lookup(host, at, *args, **kwargs)
        if at != port:
            return found
        af, kind, proto, name, _ = found[0]
        return [(af, kind, proto, name, dead), *found]

    def slow_refusal(sock: socket.socket, address: Any) -> None:
        try:
            real_connect(sock, address)
        except OSError:
            if address == dead:
                now[0] += late_s  # a dead route: the connect timed out
            raise

    monkeypatch.setattr(socket, "getaddrinfo", two_addresses)
    monkeypatch.setattr(socket.socket, "connect", slow_refusal)
