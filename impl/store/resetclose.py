"""Every connection of our S3 clients is closed with a reset, never gracefully (review
rev38z11 finding 1).

Why. botocore writes a request into the socket (`sendall`) and then waits for the answer.
The kernel's send buffer takes a whole DeleteObjects body (~100 KB for 1,000 keys) at once,
so when the attempt gives up (read timeout) or its process is killed, the body may still be
queued in the client's kernel. A graceful close (urllib3's `conn.close()`, or the kernel's
on exit) keeps delivering it: "When the socket is closed as part of exit(2), it always
lingers in the background" (socket(7), SO_LINGER), and an orphaned TCP socket retries its
queue for minutes (tcp(7), `tcp_orphan_retries`). The server could then get and apply the
request after the attempt ended, after its task was seen gone: later than every wait of the
GC rests on (`impl/gc/bounds.py` item 3).

With `SO_LINGER` {l_onoff 1, l_linger 0} a close is an abort: Linux's `__tcp_close`
(net/ipv4/tcp.c) takes `else if (sock_flag(sk, SOCK_LINGER) && !sk->sk_lingertime)
{ /* Check zero linger _after_ checking for unread data. */ sk->sk_prot->disconnect(sk,
0); ... TCPABORTONDATA }`, and `tcp_disconnect` sends a RST and purges the write queue
(the same path on exit, which closes the file; with unread data in the receive queue it
resets as well). What the server had received before the RST it received before the attempt ended;
the rest never reaches it, and a truncated body is not a request it can parse or apply.

How. botocore's Config has no socket-option setting (it computes its own list from
`tcp_keepalive`: `ClientArgsCreator._compute_socket_options`, botocore 1.44.8 args.py) and
passes that list explicitly to urllib3, so urllib3's `HTTPConnection.default_socket_options`
is never used (and is process-wide). The list it passes is one object, shared by the
session's pool manager and each proxy manager it makes later (`URLLib3Session.
_get_pool_manager_kwargs`, httpsession.py); the pools, and so their sockets, are made at the
first request. So the option is appended to that list as the client is made, before any
request; if botocore's layout changes this refuses to make the client (a clear error)
rather than make one that closes gracefully.

What it does not do (review rev38z13 finding 1, its second facet). "Dropped at the
attempt's end" holds for a process that runs: the end is a socket timeout of the process
(the read timeout), and the reset is its close. While the process is stopped (SIGSTOP, a
cgroup freeze) its kernel goes on sending what is queued; while its host or VM is
suspended nothing runs, and on resume the kernel's TCP timers retransmit the queue at once,
before the process's timeout fires and resets. So bytes already in the send queue when the
task or its host stops reach the server when the network and host let them, however late:
outside every client-side bound (`impl/gc/bounds.py`, "Outside the bound"). What the
check before each write (`connectcheck.py`) keeps out of the queue is the request's next
write once its deadline has passed: that write is not made, and the connection is reset.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

# struct linger { int l_onoff; int l_linger; } (socket(7)).
LINGER_RESET = (socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def apply(client: Any) -> None:
    """Every socket `client` (a fresh boto3 client, no request sent yet) opens is closed
    with a reset."""
    session = getattr(getattr(client, "_endpoint", None), "http_session", None)
    options = getattr(session, "_socket_options", None)
    pool_kw = getattr(getattr(session, "_manager", None), "connection_pool_kw", {})
    shared = pool_kw.get("socket_options") is options  # the pools' list, not a copy
    if isinstance(options, list) and shared:
        if LINGER_RESET not in options:
            options.append(LINGER_RESET)
        return
    raise RuntimeError("this botocore does not take the S3 connections' socket options "
                       "where epochgc sets them (impl/store/resetclose.py): cannot make "
                       "its S3 connections close with a reset")
