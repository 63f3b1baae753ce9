"""Issue 41, newuser10 L4/L5: a GC driver's own S3 requests once its round is stopped
(`impl/store/driverbound.py`). Real endpoints on loopback: one that accepts and never
answers (`blackhole.py`), one that answers 500 to everything (`failing_endpoint.py`). Every
wait is the client's own configured timeout, made small; no assertion on a duration."""

from __future__ import annotations

import pickle
import re
import socket
import threading
import time

import pytest

from epochgc.impl.store.base import StoreError
from epochgc.impl.store.driverbound import DriverBound, installed
from epochgc.impl.store.s3 import S3Store
from tests.store.blackhole import Blackhole, blackhole
from tests.store.failing_endpoint import failing_endpoint
from tests.store.s3server import set_dummy_aws_env

pytest.importorskip("boto3")


def test_after_the_stop_a_silent_store_gets_one_attempt_then_no_request(
        hole: Blackhole) -> None:
    """Old code: each write retried 10 times with a 60 s read timeout (no `DriverBound`)."""
    bound = DriverBound(0.3, lambda: True)
    with installed(bound):
        store = S3Store("gcb", "p1", endpoint_url=hole.endpoint)
    try:
        with pytest.raises(StoreError) as first:
            store.put("_cluster/gc/journal/r/START.json", b"{}")
        assert bound.silent.is_set()
        assert "not sent: the round is stopping and the store did not answer since" in str(
            first.value)
        assert hole.accepted == 1  # one attempt went out; its retry did not
        with pytest.raises(StoreError) as second:
            store.head("_cluster/gc/lease.json")
        assert "not sent: the round is stopping" in str(second.value)
        assert hole.accepted == 1  # nothing more was sent
    finally:
        store.close()


def test_after_the_stop_a_store_that_answers_is_not_retried() -> None:
    """A store that answers (500 here) gets the attempt, not botocore's retries."""
    set_dummy_aws_env()
    bound = DriverBound(5.0, lambda: True)
    with failing_endpoint() as ep, installed(bound):
        store = S3Store("gcb", "p1", endpoint_url=ep.endpoint)
        try:
            with pytest.raises(StoreError) as e:
                store.put("_cluster/gc/rounds/r.json", b"{}")
        finally:
            store.close()
        assert "not retried: the round is stopping" in str(e.value)
        assert ep.requests == [("PUT", "/gcb/p1/_cluster/gc/rounds/r.json")]
        assert not bound.silent.is_set()  # it answered: not silent


def test_before_the_stop_a_write_waits_saying_so_and_an_executor_has_no_bound() -> None:
    """The waiting line comes while the write waits (the test then ends the wait by
    closing the endpoint: no race with a timeout)."""
    set_dummy_aws_env()
    said: list[str] = []
    bound = DriverBound(120.0, lambda: False, said.append, say_after_s=0.05)
    errors: list[BaseException] = []
    with blackhole() as hole:
        with installed(bound):
            store = S3Store("gcb", "p1", endpoint_url=hole.endpoint, max_attempts=1)

        def write() -> None:
            try:
                store.put("k", b"x")
            except BaseException as e:  # handed to the test's thread
                errors.append(e)

        t = threading.Thread(target=write, daemon=True)
        t.start()
        limit = time.monotonic() + 60  # a bound for a hang, not a timing assumption
        while not said and time.monotonic() < limit:
            time.sleep(0.02)
    t.join(60)
    try:
        assert said and said[0].startswith(f"waiting for {hole.endpoint}: no answer yet "
                                           "(put 'k', "), said
        assert errors and isinstance(errors[0], StoreError)  # ended by the close
        assert not bound.silent.is_set()  # not stopping: not latched
        # What a Spark task gets: the delete path's client, without the driver's bound.
        executor = pickle.loads(pickle.dumps(store))
        assert executor._bound is None
    finally:
        store.close()


@pytest.mark.parametrize("read", ["list", "get"])
def test_a_read_of_the_round_store_waits_saying_so(read: str) -> None:
    """newuser12 P15: a store gone mid-round left `gc` 95 s without a line: the journal's
    read-back (`list`) and the record's numbering (`get`) go through the round's store,
    which has no control-read `patience`, and were retried in silence. Old code: no line
    (the wait ended by the endpoint's close only, with `said` empty)."""
    set_dummy_aws_env()
    said: list[str] = []
    bound = DriverBound(120.0, lambda: False, said.append, say_after_s=0.05)
    errors: list[BaseException] = []
    with blackhole() as hole:
        with installed(bound):
            store = S3Store("gcb", "p1", endpoint_url=hole.endpoint, max_attempts=1)
        assert store.patience is None  # the round's store, as `gc` opens it

        def go() -> None:
            try:
                if read == "list":
                    store.list_page("_cluster/gc/journal/r/", None, 10)
                else:
                    store.get("_cluster/gc/sequence.json")
            except BaseException as e:  # handed to the test's thread
                errors.append(e)

        t = threading.Thread(target=go, daemon=True)
        t.start()
        limit = time.monotonic() + 30  # a bound for a hang, not a timing assumption
        while not said and t.is_alive() and time.monotonic() < limit:
            time.sleep(0.02)
    t.join(60)
    try:
        what = "list '_cluster/gc/journal/r/'" if read == "list" else \
            "get '_cluster/gc/sequence.json'"
        assert said and said[0].startswith(f"waiting for {hole.endpoint}: no answer yet "
                                           f"({what}, "), said
        assert errors and isinstance(errors[0], StoreError)  # ended by the close
    finally:
        store.close()


def _refusing_port() -> socket.socket:
    """A loopback port bound and not listening: each connection is refused at once (a TCP
    RST: ECONNREFUSED), and no other process can take the port while it is held."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    return s


def test_a_write_to_a_port_that_refuses_says_refused_not_no_answer() -> None:
    """newuser13 Q2: a store whose port refused each attempt at once (the server gone) was
    said as "no answer yet". The round stops once the line says "connection refused", so
    the write's next retry is not sent and the call ends (no wait on a duration). Old code:
    every line "no answer yet", the write retried to its end."""
    set_dummy_aws_env()
    said: list[str] = []
    refused = threading.Event()

    def say(line: str) -> None:
        said.append(line)
        if "connection refused" in line:
            refused.set()

    bound = DriverBound(5.0, refused.is_set, say, say_after_s=0.05)
    errors: list[BaseException] = []
    port = _refusing_port()
    try:
        endpoint = f"http://127.0.0.1:{port.getsockname()[1]}"
        with installed(bound):
            store = S3Store("gcb", "p1", endpoint_url=endpoint)

        def write() -> None:
            try:
                store.put("_cluster/gc/journal/r/STOP", b"{}")
            except BaseException as e:  # handed to the test's thread
                errors.append(e)

        t = threading.Thread(target=write, daemon=True)
        t.start()
        t.join(300)  # a bound for a hang: botocore's 10 attempts end it on the old code
        assert not t.is_alive()
    finally:
        port.close()
    try:
        lines = [ln for ln in said if "connection refused" in ln]
        assert lines and re.fullmatch(
            rf"waiting for {endpoint}: connection refused \(\d+ attempts? so far\) "
            r"\(put '_cluster/gc/journal/r/STOP', \d+ s\)", lines[0]), said
        assert errors and isinstance(errors[0], StoreError)
    finally:
        store.close()


def test_a_control_read_refused_says_refused() -> None:
    """The control reads (`readretry.run`, `Tries.say`) likewise: the failure a real
    botocore call raises on a refused port is told apart from a silent one."""
    from botocore.exceptions import EndpointConnectionError

    from epochgc.impl.store import readretry

    set_dummy_aws_env()
    port = _refusing_port()
    try:
        store = S3Store("gcb", "p1", endpoint_url=f"http://127.0.0.1:{port.getsockname()[1]}",
                        max_attempts=1)
        try:
            with pytest.raises(EndpointConnectionError) as caught:
                store.client.head_object(Bucket="gcb", Key="p1/k")
        finally:
            store.close()
    finally:
        port.close()
    assert readretry.refused(caught.value)
    assert not readretry.refused(EndpointConnectionError(endpoint_url="http://x"))
    tries = readretry.Tries()
    states: list[str] = []

    def fail() -> None:
        raise caught.value

    with pytest.raises(EndpointConnectionError):
        readretry.run(fail, readretry.Backoff(3, 1), readretry.Waiter(
            sleep=lambda _s: states.append(tries.say())), tries)
    assert states == ["connection refused (1 attempt so far)",
                      "connection refused (2 attempts so far)"], states
