"""One small UDP listener on the driver, shared by the gate (`gate.Gate`: "go on?") and the
progress display (`beacon.BeaconListener`: the tasks' counts): a socket bound to the
driver's address on a port the kernel picks, one thread receiving, and a `close()` that
wakes it."""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType
from typing import Self


def family(host: str) -> socket.AddressFamily:
    """The address family of a literal host address (an IPv6 one has a colon)."""
    return socket.AF_INET6 if ":" in host else socket.AF_INET


class UdpListener:
    """Receives datagrams of at most `max_datagram` bytes on `host` (`self.port`: `port`,
    or one the kernel picks) and hands each to `handle` on its own thread, from `start()`
    (or `with`) to `close()`. Raises OSError if the socket cannot be bound."""

    def __init__(self, host: str, max_datagram: int, thread_name: str, port: int = 0) -> None:
        self._sock = socket.socket(family(host), socket.SOCK_DGRAM)
        try:
            self._sock.bind((host, port))
        except OSError:
            self._sock.close()
            raise
        self.host = host
        self.port: int = self._sock.getsockname()[1]
        self._max = max_datagram
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=thread_name)

    def start(self) -> Self:
        """Start receiving (what `with` does, if not done yet); `close()` ends it."""
        if self._thread.ident is None:
            self._thread.start()
        return self

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop receiving; returns once the receiving thread has ended. Idempotent."""
        self._closed.set()
        # shutdown() wakes the blocked recvfrom on Linux; the loop then ends on the error
        # or the empty read that follows.
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def handle(self, data: bytes, addr: tuple[str, int]) -> None:
        """One datagram (never empty), on the receiving thread."""
        raise NotImplementedError

    def ended(self) -> None:
        """Called once on the receiving thread when it ends."""

    def _run(self) -> None:
        while not self._closed.is_set():
            try:
                data, addr = self._sock.recvfrom(self._max)
            except OSError:
                break
            if data:  # else an empty datagram, or the empty read of a shut-down socket
                self.handle(data, addr)
        self.ended()
