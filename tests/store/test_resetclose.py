"""Every S3 client of the store closes its connections with a reset (`resetclose.py`,
review rev38z11 finding 1): the writes' client, the patience-bounded reader and the bounded
writes' client, each seen from a server of this file's own (a raw socket: it tells a reset,
ECONNRESET, from a graceful close, end of file)."""

from __future__ import annotations

import contextlib
import socket
import threading

import pytest

from epochgc.impl.store import resetclose
from epochgc.impl.store.patience import Patience
from epochgc.impl.store.s3 import S3Store
from tests.store.rawserver import RawServer


class _Server(RawServer):
    """Answers every request 200 with no body, keeps the connection open, and records how
    each connection ended: "reset" or "closed"."""

    def __init__(self) -> None:
        self.ends: list[str] = []
        self.ended = threading.Condition()
        super().__init__()

    def serve(self, conn: socket.socket) -> None:
        end = "closed"
        with conn:
            try:
                data = b""
                while True:
                    b = conn.recv(65536)
                    if not b:
                        break
                    data += b
                    while b"\r\n\r\n" in data:  # bodiless requests (HeadBucket)
                        _, data = data.split(b"\r\n\r\n", 1)
                        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            except ConnectionResetError:
                end = "reset"
        with self.ended:
            self.ends.append(end)
            self.ended.notify_all()

    def wait_ends(self, n: int) -> list[str]:
        with self.ended:
            assert self.ended.wait_for(lambda: len(self.ends) >= n, 30), self.ends
            return list(self.ends)


def test_every_client_of_the_store_closes_with_a_reset() -> None:
    with contextlib.closing(_Server()) as server:
        store = S3Store("b", "p", endpoint_url=server.endpoint(), patience=Patience())
        store.client.head_bucket(Bucket="b")  # the writes' client (the delete path's)
        store.client.close()
        assert server.wait_ends(1) == ["reset"]
        store.reader.head_bucket(Bucket="b")  # the reads' client (patience)
        store.reader.close()
        assert server.wait_ends(2) == ["reset"] * 2
        with store.bounded_writes("a test's write"):
            client = store.client
            client.head_bucket(Bucket="b")
        assert server.wait_ends(3) == ["reset"] * 3  # closed as the block ends


def test_a_botocore_that_takes_no_socket_options_there_is_refused() -> None:
    with pytest.raises(RuntimeError, match="close with a reset"):
        resetclose.apply(object())
