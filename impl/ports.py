"""Free TCP ports on loopback for a process that binds them later (our nodes, a moto or
SeaweedFS server in the tests).

A port chosen by binding port 0 and closing the socket comes from the kernel's ephemeral
range, the same range the kernel draws from for every other process's port-0 bind and
every outgoing connection's local port ("ip_local_port_range ... Defines the local port
range that is used by TCP and UDP to choose the local port", Documentation/networking/
ip-sysctl.rst). Between the choice and the node's own bind any of those may take it: a
node then failed "address already in use" (1 run in 7 of the signal matrix's chaos case
beside other tests). A port outside that range is never handed out implicitly, so only
another explicit choice can take it in between; the choice is random so that two such
pickers rarely meet, and each port is bound (and held until all are chosen) to check it
is free now."""

from __future__ import annotations

import random
import socket
from pathlib import Path

RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LINUX_DEFAULT = (32768, 60999)  # the kernel's default ip_local_port_range
LOWEST = 10_000  # below: ports more often fixed by other services (registered ports)
TRIES = 200


def ephemeral_range(path: Path = RANGE_FILE) -> tuple[int, int]:
    """The kernel's ephemeral port range (inclusive); Linux's default where it cannot be read."""
    try:
        lo, hi = (int(x) for x in path.read_text().split())
    except (OSError, ValueError):
        return LINUX_DEFAULT
    return lo, hi


def candidates(eph: tuple[int, int]) -> list[range]:
    """The port ranges outside `eph` and above LOWEST (maybe none)."""
    lo, hi = eph
    out = [range(LOWEST, lo), range(max(hi + 1, LOWEST), 65536)]
    return [r for r in out if len(r) > 0]


def free_ports(n: int, rng: random.Random | None = None,
               eph: tuple[int, int] | None = None) -> list[int]:
    """`n` distinct ports free on 127.0.0.1 now, outside the ephemeral range where it
    leaves room (else the kernel's own choice, as before). Each is held bound until all are
    chosen, then released for its user to bind."""
    rng = rng or random.SystemRandom()
    spans = candidates(eph or ephemeral_range())
    held: list[socket.socket] = []
    try:
        for _ in range(TRIES if spans else 0):
            if len(held) == n:
                break
            r = rng.choice(spans)
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", r[rng.randrange(len(r))]))
            except OSError:  # taken (or in TIME_WAIT): another
                s.close()
                continue
            held.append(s)
        while len(held) < n:  # no room outside the range, or every try was taken
            s = socket.socket()
            held.append(s)
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in held]
    finally:
        for s in held:
            s.close()
