"""A raw HTTP server on a loopback port: a listening socket of the test's own, each
connection served on a daemon thread by the subclass's `serve`, which sees the bytes as
they come and how the connection ends (a reset, ECONNRESET, or a graceful close, end of
file): what `http.server` hides (tests/store/test_resetclose.py, test_rev38z13.py)."""

from __future__ import annotations

import socket
import threading


class RawServer:
    """Accepts on a daemon thread from construction until `close` (a subclass sets what
    `serve` uses before calling this `__init__`)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        threading.Thread(target=self._accept, daemon=True).start()

    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """No more connections accepted (those served go on)."""
        self.sock.close()
