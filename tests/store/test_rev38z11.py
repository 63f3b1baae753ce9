"""Review rev38z11: THE RULE (impl/store/s3.py) and the bounds it rests on (impl/gc/bounds.py),
as merged on main 3ed17bf (issue 38).

Each finding is a strict xfail, seen failing on 3ed17bf. The S3 cases run against moto in
server mode on loopback, behind a front of this file's own (a raw socket: it must choose
when it reads a request's bytes)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from email.message import Message
from pathlib import Path

import pytest

from epochgc.impl.store import s3
from epochgc.impl.store.s3 import S3Store
from tests.store.forward import forward, is_delete_objects, no_key_retry
from tests.store.s3server import new_bucket

D = "level_zero/data/001/000000000000000005/"


class _SlowReader:
    """A front for moto that reads a DeleteObjects' BODY only once `release` is set after
    its headers came (a congested path, a busy server: TCP flow control, not an application
    choice), then forwards it to moto if it came whole (a body cut short by the client's
    reset is not a request: `cut` says how much came). Every other request is forwarded at
    once. Its receive buffer is the smallest the kernel allows, so the body stays in the
    CLIENT's kernel send queue (`SO_SNDBUF`, megabytes on Linux) while the front does not
    read."""

    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.removeprefix("http://").partition(":")
        self.upstream = (host, int(port))
        self.release = threading.Event()
        self.headers_seen = threading.Event()  # a DeleteObjects' headers were read
        self.received_at: float | None = None  # monotonic: its body had come whole
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)  # before listen
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.applied = threading.Event()
        self.applied_at: float | None = None  # monotonic: moto answered the forwarded delete
        # The held body was read to its end: whole (then forwarded), or cut by a reset.
        self.body_ended = threading.Event()
        self.cut: tuple[int, int] | None = None  # (bytes read, Content-Length) if cut
        self.held_body_unread = 0  # bytes of the body not yet read when the hold began
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def close(self) -> None:
        self._stop = True
        self.sock.close()

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _head(conn: socket.socket) -> bytes | None:
        data = b""
        while not data.endswith(b"\r\n\r\n"):
            b = conn.recv(1)
            if not b:
                return None
            data += b
        return data

    @staticmethod
    def _body(conn: socket.socket, n: int) -> bytes:
        """Up to `n` bytes: fewer if the client's end closed or reset first."""
        body = b""
        while len(body) < n:
            try:
                b = conn.recv(n - len(body))
            except ConnectionResetError:  # the client's close was a reset (SO_LINGER 0)
                break
            if not b:
                break
            body += b
        return body

    def _serve(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):  # a client gone: not news
            while True:
                head = self._head(conn)
                if head is None:
                    return
                line, *rest = head.decode("latin-1").split("\r\n")
                command, path, _ = line.split(" ", 2)
                headers = Message()
                for h in rest:
                    if h:
                        k, _, v = h.partition(":")
                        headers[k.strip()] = v.strip()
                n = int(headers.get("Content-Length") or 0)
                if is_delete_objects(command, path):
                    self.held_body_unread = n
                    self.headers_seen.set()
                    self.release.wait(30)
                    body = self._body(conn, n)
                    if len(body) < n:  # not a request: never forwarded (nor applied)
                        self.cut = (len(body), n)
                        self.body_ended.set()
                        return
                    self.received_at = time.monotonic()
                    self.body_ended.set()
                    resp, _ = forward(*self.upstream, command, path, headers, body)
                    assert resp.status == 200, resp.status
                    self.applied_at = time.monotonic()
                    self.applied.set()
                    return
                body = self._body(conn, n)
                resp, data = forward(*self.upstream, command, path, headers, body)
                out = [f"HTTP/1.1 {resp.status} {resp.reason}"]
                for k, v in resp.getheaders():
                    if k.lower() not in {"connection", "keep-alive", "transfer-encoding",
                                         "content-length"}:
                        out.append(f"{k}: {v}")
                length = resp.getheader("Content-Length") if command == "HEAD" else None
                out.append(f"Content-Length: {length if length is not None else len(data)}")
                conn.sendall(("\r\n".join(out) + "\r\n\r\n").encode("latin-1")
                             + (b"" if command == "HEAD" else data))


@pytest.mark.s3
def test_a_body_queued_in_the_kernel_is_applied_after_the_rules_wait(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rev38z11 finding 1 (seen failing on 1c866cb: the round's own request deleted the key
    after the read-back). Timeouts scaled down (connect 0.3 s, read 0.3 s: THE RULE's wait
    from the attempt's end, `SENT_APPLIED_S` = connect + read, is then 0.6 s). One
    DeleteObjects of one key that exists and 59 long absent ones (a ~62 KB body, as a
    1,000-key batch of L0 keys is ~100 KB). The front reads the body only after the client's
    attempt gave up (the key `unknown`, `unanswered_at` that end) and the key was asked of
    the store after the rule's wait (what the journal's read-back does: there, recorded not
    deleted). The client's close was a reset (`resetclose.py`): what was still in its kernel
    send queue never comes, the front gets a short body, and moto keeps the key. A graceful
    close delivered the rest of the body then, and moto deleted a key recorded not deleted."""
    monkeypatch.setattr(s3, "CONNECT_TIMEOUT_S", 0.3)
    monkeypatch.setattr(s3, "READ_TIMEOUT_S", 0.3)
    direct = S3Store(new_bucket(moto_endpoint), "p", endpoint_url=moto_endpoint)
    key = D + "k.0"
    direct.put(key, b"x")
    pad = [D + "pad/" + "y" * 980 + f".{i:02d}" for i in range(59)]
    front = _SlowReader(moto_endpoint)
    try:
        store = S3Store(direct.bucket, "p", endpoint_url=front.endpoint(), max_attempts=1,
                        key_retry=no_key_retry())
        result = store.delete_batch([key, *pad])
        assert key in result.unknown, result.errors.get(key)
        assert result.unanswered_at is not None
        wait = s3.CONNECT_TIMEOUT_S + s3.READ_TIMEOUT_S  # SENT_APPLIED_S, scaled
        left = result.unanswered_at + wait - time.monotonic()
        if left > 0:
            time.sleep(left)
        there_at_read_back = direct.head(key) is not None
        front.release.set()  # the path heals: the front reads on
        assert front.body_ended.wait(30), "the front never came to the body's end"
        gone_after = direct.head(key) is None
        late = (front.applied_at or 0.0) - result.unanswered_at
        assert not (there_at_read_back and gone_after), (
            f"read back after the rule's wait ({wait:g} s): there (not deleted); the "
            f"round's own request deleted it {late:.2f} s after its attempt ended "
            f"(body {front.held_body_unread} bytes)")
        assert front.cut is not None and front.cut[0] < front.cut[1], front.cut
    finally:
        front.close()


_SENDER = """
import sys
from epochgc.impl.store.s3 import S3Store
endpoint, bucket, key = sys.argv[1:4]
pad = [key.rsplit("/", 1)[0] + "/pad/" + "y" * 980 + f".{i:02d}" for i in range(59)]
S3Store(bucket, "p", endpoint_url=endpoint, max_attempts=1).delete_batch([key, *pad])
"""


@pytest.mark.s3
def test_a_killed_tasks_request_reaches_the_server_after_the_task_is_gone(
    moto_endpoint: str
) -> None:
    """rev38z11 finding 1, the kill (seen failing on 1c866cb: the whole body came from the
    dead process's orphaned socket and moto deleted the key). A sender process (the Spark
    task's part: `S3Store.delete_batch`, default timeouts) sends one DeleteObjects (a ~62 KB
    body) through a front that reads the body only when told. Once the front has its headers
    the sender is killed with SIGKILL and reaped (the task is gone: what
    `drivertree.tasks_gone` and Spark see). Then the front reads on: the exit's close was a
    reset, the body comes short, and moto keeps the key. No clock is compared."""
    direct = S3Store(new_bucket(moto_endpoint), "p", endpoint_url=moto_endpoint)
    key = D + "k.0"
    direct.put(key, b"x")
    front = _SlowReader(moto_endpoint)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    sender = subprocess.Popen([sys.executable, "-c", _SENDER, front.endpoint(),
                               direct.bucket, key], env=env)
    try:
        assert front.headers_seen.wait(60), "the sender never sent"
        os.kill(sender.pid, signal.SIGKILL)
        sender.wait(30)
        assert direct.head(key) is not None  # nothing applied yet
        front.release.set()
        assert front.body_ended.wait(30), "the front never came to the body's end"
        assert front.received_at is None and direct.head(key) is not None, (
            f"the server got the request after its sender was killed and reaped "
            f"({front.held_body_unread} bytes of body then in the dead process's socket)")
        assert front.cut is not None and front.cut[0] < front.cut[1], front.cut
    finally:
        if sender.poll() is None:
            sender.kill()
            sender.wait(30)
        front.close()


def test_a_start_from_the_previous_code_is_waited_the_corrected_bound() -> None:
    """rev38z11 finding 2 (seen failing on 1c866cb: 240.0 >= 300.0). The previous code's
    START (2014bfe `stop_within_s(600)` = 90 + 80 + 10 + 60 = 240) for a round of tasks with
    the same timeouts and the same lease as today's: the corrected argument (bounds.py item
    4) gives them 300 s, and a recovery by today's code waited 240."""
    from epochgc.impl.gc import recover
    from epochgc.impl.gc.bounds import APPLIED_WITHIN_S, stop_within_s
    from epochgc.impl.gc.lease import DEFAULT_LEASE_S

    old_start = {"round": "20261130T100000.000Z-old", "stop_within_s": 240.0}
    assert recover._stop_within(old_start, APPLIED_WITHIN_S) >= stop_within_s(DEFAULT_LEASE_S)


@pytest.mark.parametrize(("start", "waits"), [
    # today's START: its own bound, which is today's for its lease
    ({"stop_within_s": 300.0, "lease_s": 600.0}, 300.0),
    # a test's short lease (no option sets one): its own bound, as written
    ({"stop_within_s": 251.0, "lease_s": 4.0}, 251.0),
    # a START that says less than today's bound for its lease: today's
    ({"stop_within_s": 10.0, "lease_s": 4.0}, 251.0),
    # a damaged lease: the longest
    ({"stop_within_s": 300.0, "lease_s": "x"}, 900.0),
    ({"stop_within_s": 300.0, "lease_s": float("nan")}, 900.0),
    ({"stop_within_s": 300.0, "lease_s": True}, 900.0),
    ({"stop_within_s": 300.0, "lease_s": 0}, 900.0),
    # a long lease: capped as any bound
    ({"stop_within_s": 300.0, "lease_s": 1e300}, 900.0),
])
def test_a_start_is_waited_at_least_todays_bound_for_its_lease(
        start: dict[str, object], waits: float) -> None:
    from epochgc.impl.gc import recover
    from epochgc.impl.gc.bounds import APPLIED_WITHIN_S

    assert recover._stop_within(start, APPLIED_WITHIN_S) == waits


def test_a_start_on_a_local_directory_keeps_its_own_bound() -> None:
    """The corrections were for requests in flight to a server; a local directory's
    deletes are system calls (`recover._stop_within`): an old START's bound as written."""
    from epochgc.impl.gc import recover

    assert recover._stop_within({"stop_within_s": 240.0}, 0.0) == 240.0



@pytest.mark.parametrize(("lease_s", "counted"), [
    # a START without `lease_s`: a driver before task s28j, maybe before s28c, whose
    # whole-request 4xx were journaled as plain errors: asked, found gone
    (None, (0, 1)),
    # today's START: its plain errors are the answer's own per-key results
    (600.0, (1, 0)),
])
def test_an_old_rounds_plain_errors_are_asked_at_the_read_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lease_s: float | None,
        counted: tuple[int, int]) -> None:
    """rev38z11 finding 2's second half (seen failing on 46a10fb: the old round's key
    counted an error, not deleted, though the store no longer has it). The previous code
    journaled a whole-request 4xx as a plain error (not `unknown`): under issue 38's model
    (an intermediary relays a copy's 4xx while another copy was applied) the request may
    have deleted the key, and the recovery counted it "not deleted" without asking. A round
    whose START has no `lease_s` was written before today's code: each of its plain errors
    (not "never sent") is asked of the store after the recovery's wait, as an `unknown`."""
    from epochgc.impl.gc import recover
    from epochgc.impl.gc.journal import (
        START,
        Attempt,
        JournalTarget,
        JournalWriter,
        journal_prefix,
        write_marker,
    )
    from epochgc.impl.gc.recover import recover_dead_rounds
    from epochgc.impl.store.base import DeleteResult
    from epochgc.impl.store.local import LocalStore
    from epochgc.model.keys import format_key
    from tests.gc.helpers import put_local

    monkeypatch.setattr(recover, "POLL_S", 10_000.0)
    round_id = "20261130T100000.000Z-old0errs"
    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    prefix = journal_prefix(round_id)
    start: dict[str, object] = {"round": round_id, "M": 100, "snapshot_revision": 7,
                                "options": {}, "stop_within_s": 240.0}
    if lease_s is not None:
        start["lease_s"] = lease_s
    write_marker(store, prefix, START, start)
    key = format_key(0, 50, "0errs")
    put_local(root, key, age=7200.0)
    w = JournalWriter(store, JournalTarget(prefix), Attempt(0, 0, 0, 1))
    seq = w.intent([(key, 1, 3600.0, "")])
    w.done(seq, DeleteResult(1, errors={key: "AccessDenied: Access Denied"}))
    store.delete_batch([key])  # a copy of the request the 4xx did not answer: applied
    [got] = recover_dead_rounds(store, "rev38z11", lambda: set(), sleep=lambda s: None)
    counts = json.loads(store.get(got.record))["counts"]
    assert (counts["errors"], counts["gone_unattributed"]) == counted, counts
