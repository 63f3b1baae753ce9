"""An endpoint that accepts connections and never answers (issue 41, newuser8 I10: a wrong
port behind a proxy, a stuck load balancer). A real listening socket on 127.0.0.1: the
client's connect succeeds and its request is read, and no byte ever comes back, so any
wait of the client is its own timeout's. It records when a request has arrived, so a test
can act once the client is waiting (no sleeping and hoping)."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from collections.abc import Iterator

import pytest


class Blackhole:
    """Listens on 127.0.0.1 (a free port) from a daemon thread; `close` ends it and drops
    every connection (a client still waiting then reads end-of-file)."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.requested = threading.Event()  # a request's first bytes arrived
        self.accepted = 0
        self.given_up = 0  # connections the client closed (its timeout: it gave up waiting)
        self._conns: list[socket.socket] = []
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="blackhole", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        sel = selectors.DefaultSelector()
        self._listener.setblocking(False)
        sel.register(self._listener, selectors.EVENT_READ)
        while not self._closing.is_set():
            for key, _ in sel.select(timeout=0.05):  # a poll interval for `close` only
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._listener:
                    with contextlib.suppress(BlockingIOError):
                        conn, _addr = self._listener.accept()
                        conn.setblocking(False)
                        self._conns.append(conn)
                        self.accepted += 1
                        sel.register(conn, selectors.EVENT_READ)
                    continue
                try:
                    data = sock.recv(65536)  # read and dropped: never answered
                except OSError:
                    data = b""
                if data:
                    self.requested.set()
                else:  # the client gave up (its timeout): closed from its side
                    self.given_up += 1
                    sel.unregister(sock)
                    sock.close()
        sel.close()

    def close(self) -> None:
        self._closing.set()
        self._thread.join()
        self._listener.close()
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.close()


def blackhole() -> contextlib.closing[Blackhole]:
    return contextlib.closing(Blackhole())


@pytest.fixture
def hole() -> Iterator[Blackhole]:
    """A silent S3 endpoint per test, for boto3 clients with the session's dummy keys."""
    pytest.importorskip("boto3")
    from tests.store.s3server import set_dummy_aws_env

    set_dummy_aws_env()
    with blackhole() as h:
        yield h


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at teardown: a proxy's fault that holds a request (`release.wait(...)`) lets it
    go once the test is over, so no request thread outlives its test."""
    ev = threading.Event()
    yield ev
    ev.set()
