"""The port process: one JSON line out, one JSON line back, with a per-step timeout.

Every way a port can break the protocol becomes a `ProtocolFailure` naming what happened
(`kind`: exited, garbage, extra-output, timeout) so the driver can report it as such.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

_TAIL = 300  # characters of a bad line quoted in a report


class ProtocolFailure(Exception):
    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


def _strict_object(text: str) -> dict[str, Any] | None:
    def no_constant(name: str) -> Any:
        raise ValueError(name)

    try:
        obj = json.loads(text, parse_constant=no_constant)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


class PortProcess:
    """The port started once; `ask` sends one line and returns the one object answered."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.argv = list(argv)
        self.timeout = timeout
        self._clock = clock
        # stderr is inherited: it is the port's log, not part of the protocol.
        self._proc = subprocess.Popen(
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._in = self._proc.stdin.fileno()
        self._out = self._proc.stdout.fileno()
        self._buf = b""
        self.failed: ProtocolFailure | None = None

    def ask(self, line: str) -> dict[str, Any]:
        if self.failed is not None:
            raise self.failed
        try:
            return self._ask(line)
        except ProtocolFailure as e:
            self.failed = e
            self.close()
            raise

    def _ask(self, line: str) -> dict[str, Any]:
        if self._buf or self._readable(0):
            self._fill(0)
            raise ProtocolFailure(
                "extra-output", f"wrote more than one line for the previous step: "
                f"{self._buf[:_TAIL]!r}")
        try:
            os.write(self._in, line.encode("utf-8") + b"\n")
        except (BrokenPipeError, ConnectionResetError):
            raise self._exited() from None
        deadline = self._clock() + self.timeout
        while b"\n" not in self._buf:
            left = deadline - self._clock()
            if left <= 0 or not self._readable(left):
                raise ProtocolFailure("timeout", f"no answer within {self.timeout:g} s")
            if not self._fill(left):
                raise self._exited()
        raw, _, self._buf = self._buf.partition(b"\n")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        obj = None if text is None else _strict_object(text)
        if obj is None:
            raise ProtocolFailure(
                "garbage", f"printed something that is not one JSON object: {raw[:_TAIL]!r}")
        return obj

    def _readable(self, wait: float) -> bool:
        ready, _, _ = select.select([self._out], [], [], wait)
        return bool(ready)

    def _fill(self, wait: float) -> bool:
        """Read what is there; False at end of file."""
        if not self._readable(wait):
            return True
        chunk = os.read(self._out, 1 << 16)
        self._buf += chunk
        return bool(chunk)

    def _exited(self) -> ProtocolFailure:
        try:
            code = self._proc.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            return ProtocolFailure("exited", "closed its stdout but kept running")
        return ProtocolFailure("exited", f"exited with status {code}")

    def close(self) -> None:
        """Close stdin (a well-behaved port ends at end of input); kill what lingers."""
        if self._proc.poll() is None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()  # type: ignore[union-attr]
            try:
                self._proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        for f in (self._proc.stdin, self._proc.stdout):
            if f is not None and not f.closed:
                f.close()

    def __enter__(self) -> PortProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
