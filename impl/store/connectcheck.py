"""A write's send deadline checked again as each connection for it is opened (review
rev38z2 finding 3).

The last `send_by` check runs on botocore's `before-send` event, after every other handler
(`s3._around_the_limiter`), and `impl/gc/bounds.py` allows `CONNECT_TIMEOUT_S` between it
and the server having the request. For a connection the pool does not hold, urllib3's
`create_connection` (urllib3 2.8.0 `util/connection.py`) runs in between: first
`socket.getaddrinfo`, which no socket timeout bounds (glibc's resolver: `timeout:5`,
`attempts:2` per nameserver, resolv.conf(5)), then `sock.connect` to each address it
returned in turn, each with the full connect timeout. So a request could go out a lookup
and several connect timeouts past its deadline.

Neither botocore nor urllib3 has a documented hook there (a connection class of our own
would have to be put into botocore's private `_pool_classes_by_scheme`). Python's own
audit events do: `socket.connect` is raised by `socket.socket.connect` with `(self,
address)` before it connects (the audit events table, https://docs.python.org/3/library/
audit_events.html), that is after the name lookup and before each address's connect; and
"Hooks can then log the event, raise an exception to abort the operation, or terminate the
process entirely" (`sys.addaudithook`, https://docs.python.org/3/library/sys.html#sys.
addaudithook). A hook added once per process looks at this thread's armed check: `arm`ed
by the last `before-send` handler of a bounded request (with `send_by`'s deadline, and in a
GC driver with its lease bound too, `DriverBound.refuse_past_lease`: review rev38z14
finding 1), `disarm`ed by `needs-retry`, which
botocore emits after every attempt, a failed one included (`endpoint.py` `_send_request`).
Its refusal closes the socket (urllib3 closes it only on an OSError) and propagates: not an
OSError, so urllib3 passes it on and botocore raises it as `HTTPClientError(error=...)`
(botocore 1.44.8 `httpsession.py` `send`: `except Exception as e: raise
HTTPClientError(error=e)`); `attempts.not_sent` takes that as not sent. botocore's
standard retry retries an `HTTPClientError` (`retries/standard.py`
`_TRANSIENT_EXCEPTION_CLS`), and the retry's own `before-send` check refuses it.

The same check runs again right before EACH write of the request (review rev38z13 finding
1: a task process stopped after the connect's check, by SIGSTOP, a cgroup freeze or a
paused VM, sent its whole DeleteObjects when continued, however late: the connect, the TLS
handshake and the writes are under socket timeouts, and a socket timeout bounds the wait
inside one call, not a pause between the check and the call). CPython's `http.client.
HTTPConnection.send`, through which urllib3 writes the headers and each chunk of the body
(urllib3 2.8.0 `HTTPConnection.request`: `endheaders()`, then `send(chunk)`; botocore's
`AWSConnection.send` passes to it), connects first if it must and then raises the audit
event `http.client.send` with `(self, data)` right before its `sock.sendall(data)`
(CPython 3.11 `Lib/http/client.py`; the audit events table above; epochgc needs Python
>= 3.11). No private botocore or urllib3 name is needed. The deadline passed there:
- no write of this attempt went ahead yet (`arm` clears the mark): `SendDeadlinePassed`,
  raised as at the connect; the attempt is not sent (true: no byte of it was written; the
  connection, maybe just opened, is closed with its reset, `resetclose.py`);
- a write went ahead (the headers, or a proxy tunnel's CONNECT, which goes through the same
  `send`): the connection is closed now, with the reset, so nothing it queued reaches the
  server, and `SentInPart` is raised: not a name of `attempts._NOT_SENT`, so the attempt
  may have been applied (what was written may be at the server), as any attempt that
  began writing.

What is left between the last check and the server having the request is one `sendall`
(what it hands the kernel goes on while the process is stopped: the kernel's send queue and
TCP's retransmission run on the kernel's clock), bounded by `CONNECT_TIMEOUT_S` for a
process that runs, as `bounds.py` counts; a process stopped past its deadline after bytes
entered the kernel's queue is outside every client-side bound (`bounds.py`, "Outside the
bound"). Other threads' connections and writes, and this thread's outside a bounded
request, find nothing armed: one thread-local read each.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any


class _Armed(threading.local):
    def __init__(self) -> None:
        self.check: Callable[[], None] | None = None
        self.wrote = False  # a write of the armed attempt went ahead (`_hook`)


class SentInPart(Exception):
    """The send deadline passed between two writes of one attempt (`_hook`): its connection
    is reset, and what it wrote before may have reached the server. Not a name of
    `attempts._NOT_SENT`: the attempt may have been applied."""


_ARMED = _Armed()
_INSTALLED = False
_LOCK = threading.Lock()


def install() -> None:
    """Add the audit hook, once per process (a hook cannot be removed: it stays for the
    process's life, in the driver and every executor). Its cost is a Python call per audit
    event of any kind, not only `socket.connect` and `http.client.send` (review rev38z4):
    `_hook` returns at its first statement for the others, and measured (Python 3.11,
    `timeit`; task s26f report) it costs what an empty hook does, ~120 ns per event:
    `id()`, audited as `builtins.id`, 23 -> 145 ns; `copy.deepcopy` of a 20,000-entry
    dict, which calls `id` per object, 20 -> 36 ms. A Python hook cannot be made cheaper
    than its call; impl/ calls `id()` on no per-key path."""
    global _INSTALLED
    with _LOCK:
        if not _INSTALLED:
            sys.addaudithook(_hook)
            _INSTALLED = True


def arm(check: Callable[[], None]) -> None:
    """`check()` runs before each connect and each write of this thread until `disarm`; it
    raises to refuse the connection or the write (and so the request). No write of this
    attempt has gone ahead yet (`_hook`)."""
    _ARMED.check = check
    _ARMED.wrote = False


def disarm(**_kwargs: Any) -> None:
    """botocore's `needs-retry` handler (and a bare call): nothing is checked any more on
    this thread. Returns None: the retry handlers decide."""
    _ARMED.check = None


def _hook(event: str, args: tuple[Any, ...]) -> None:
    # First, for every other event: this runs on each audit event of the process.
    # `!=`, not `is not`: CPython builds a C-raised event's name afresh (not interned).
    if event != "socket.connect" and event != "http.client.send":
        return
    check = _ARMED.check
    if check is None:
        return
    writing = event == "http.client.send"  # `args[0]`: the connection, before its sendall
    try:
        check()
    except BaseException as e:
        # `socket.connect`: the socket urllib3 made for this address (it would leak).
        # `http.client.send`: the connection, closed now with the reset every connection of
        # ours closes with (`resetclose.py`): what this attempt queued never reaches the
        # server.
        args[0].close()
        if writing and _ARMED.wrote:
            raise SentInPart("past the send deadline after part of the request was written: "
                             "its connection reset (it may have reached the server)") from e
        raise
    if writing:
        _ARMED.wrote = True  # before the write: one that fails part-way may have sent bytes
