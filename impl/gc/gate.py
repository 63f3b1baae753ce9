"""A task's "go on?" to its driver before each delete request (issue 38, GC on S3 at the
limit).

Before, a task asked the store whether the round's STOP marker exists (one HEAD per delete
batch: 40 of a 40-batch round's requests on S3, and the marker itself is one more PUT and
round trip behind the driver's decision). Now the driver answers: a datagram to the
driver's address (`spark.driver.host`, as the progress beacon) with a fresh nonce, a reply
"go" or "no" bound to the nonce by an HMAC under a per-round secret that only the driver
and the round's tasks hold (shipped in the task's closure). The driver says "go" only while
the round is not asked to stop (signals, deadline, the watch's pause or unhealthy verdict)
and its lease is held with a margin (`Lease.firm`); no valid answer within the tries (a
driver killed, its host lost, a network cut, the gate closed at the end of the stage) is
"no". So a straggler whose driver died on another host stops at its next batch, which the
per-host `/proc` check (`journal.Driver`) cannot see.

UDP gives no delivery guarantee and no flow control (udp(7)): a lost ask or answer is
retried with a new send of the same nonce, and silence after every try stops the task
(fail closed). The task's socket is connected to the driver's address, so the kernel
drops datagrams from any other source (udp(7), "connect"); the HMAC (RFC 2104) makes an
answer from anyone without the secret worthless, and the nonce makes an old one worthless.
Tasks that have no driver to ask (tests that drive a task directly, a driver that could not
bind a socket) keep asking the store for the STOP marker, which stays: the recovery of a
dead round and foreign processes write it; so does a task whose first ask got no answer at
all (UDP filtered between its host and the driver's, or the driver died before it asked):
silence is a stop only from a driver that has answered before.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from epochgc.impl.gc.udplisten import UdpListener, family

ASK = b"ask"
GO = b"go"
NO = b"no"
_NONCE = 16
_MAC = hashlib.sha256().digest_size
_ANSWER = len(GO) + _NONCE + _MAC
# Seconds to wait for each answer, and how many times to ask: a driver that does not answer
# within about 5 s is taken as gone. Generous against a loaded driver (a task stopped by a
# late answer stops the round: it says `interrupted`, never a false count), short against
# a straggler (each of its requests in flight is at most one batch).
ASK_TIMEOUT_S = 1.0
ASK_TRIES = 5


@dataclass(frozen=True)
class GateTarget:
    """Where a task asks, and the round's secret its answers are signed with (picklable)."""

    host: str
    port: int
    secret: bytes

    def __repr__(self) -> str:  # never the secret in a log or a traceback
        return f"GateTarget({self.host!r}, {self.port})"


def _mac(secret: bytes, word: bytes, nonce: bytes) -> bytes:
    return hmac.new(secret, word + nonce, hashlib.sha256).digest()


def ask(target: GateTarget, timeout_s: float | None = None, tries: int | None = None,
        monotonic: Callable[[], float] = time.monotonic) -> bool:
    """True only if the driver answered "go" to this ask; False on "no", on silence after
    `tries` asks of `timeout_s` each (default `ASK_TRIES`, `ASK_TIMEOUT_S`), and when
    nothing listens at the target (the kernel's port unreachable: ECONNREFUSED on the
    connected socket)."""
    return answer(target, timeout_s, tries, monotonic) is True


def answer(target: GateTarget, timeout_s: float | None = None, tries: int | None = None,
           monotonic: Callable[[], float] = time.monotonic) -> bool | None:
    """The driver's answer to one ask: True "go", False "no" (said, or the gate refused:
    nothing listens at its port any more), None no answer at all (silence after every try,
    no socket, no route).

    Refused is "no" (review rev38q finding 3): the gate named in the task's target existed
    (its driver bound it before the task was made) and is bound until `Gate.close`, so a
    port unreachable from its host (ECONNREFUSED on the connected socket, udp(7): "all
    fatal errors will be passed to the user as an error return even when the socket is not
    connected ... ECONNREFUSED" after an ICMP port unreachable) says it closed: the stage
    is over, or the driver is gone. Taken for "never answered", it sent the task to the
    store's STOP marker, which a completed round did not write. A firewall that rejects
    with port unreachable looks the same: every task then stops (fails closed; the round
    says `task-stopped`)."""
    timeout_s = ASK_TIMEOUT_S if timeout_s is None else timeout_s
    tries = ASK_TRIES if tries is None else tries
    nonce = secrets.token_bytes(_NONCE)
    try:
        sock = socket.socket(family(target.host), socket.SOCK_DGRAM)
    except OSError:
        return None
    with sock:
        try:
            sock.connect((target.host, target.port))
        except OSError:
            return None
        for _ in range(tries):
            try:
                sock.send(ASK + nonce)
            except ConnectionRefusedError:
                return False  # an earlier try's port unreachable, reported here
            except OSError:
                return None
            end = monotonic() + timeout_s
            while (left := end - monotonic()) > 0:
                sock.settimeout(left)
                try:
                    data = sock.recv(_ANSWER + 1)
                except TimeoutError:
                    break  # ask again
                except ConnectionRefusedError:
                    return False  # the driver's gate is closed or gone
                except OSError:
                    return None
                if len(data) != _ANSWER or data[len(GO):len(GO) + _NONCE] != nonce:
                    continue  # an answer to an earlier try of ours, or noise
                word, mac = data[:len(GO)], data[len(GO) + _NONCE:]
                if word in (GO, NO) and hmac.compare_digest(mac, _mac(target.secret, word,
                                                                       nonce)):
                    return word == GO
    return None


class Gate(UdpListener):
    """The driver's side: answers every ask on `target` with "go" while `is_open()` and the
    gate is not closed, "no" otherwise; `close()` ends it (asks are then refused by the
    kernel, or go unanswered: "no" either way). `is_open` runs on the gate's thread, once
    per ask: it must be cheap (no store request). Answers from construction on, on `port`
    (default: one the kernel picks)."""

    def __init__(self, host: str, is_open: Callable[[], bool], port: int = 0) -> None:
        super().__init__(host, 64, "epochgc-gate", port)
        self.target = GateTarget(host, self.port, secrets.token_bytes(32))
        self._is_open = is_open
        self.start()

    def answer(self, data: bytes) -> bytes | None:
        """The answer to one datagram; None if it is not an ask."""
        if len(data) != len(ASK) + _NONCE or not data.startswith(ASK):
            return None
        nonce = data[len(ASK):]
        try:
            go = not self._closed.is_set() and self._is_open()
        except Exception:  # a predicate that fails says no (fail closed)
            go = False
        word = GO if go else NO
        return word + nonce + _mac(self.target.secret, word, nonce)

    def handle(self, data: bytes, addr: tuple[str, int]) -> None:
        reply = self.answer(data)
        if reply is not None:
            with contextlib.suppress(OSError):  # advisory: a lost answer is asked again
                self._sock.sendto(reply, addr)
