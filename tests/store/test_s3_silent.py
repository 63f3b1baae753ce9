"""Issue 41, newuser8 I10: an S3 endpoint that accepts connections and never answers. A
control-plane read (`S3Store` with `patience`) ends within its configured bound with one
line naming the endpoint, the object and "no answer within N s"; a read still waiting is
said; the writes and an executor's store keep the client the stop bound rests on.

The endpoint is a real listening socket (`blackhole.py`); every wait is the client's own
configured timeout, made small here, or ended by the test closing the socket."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable
from typing import Any

import pytest

from epochgc.impl.store.base import StoreError
from epochgc.impl.store.patience import ATTEMPTS_ENV, READ_TIMEOUT_ENV, SAY_AFTER_ENV, Patience
from epochgc.impl.store.s3 import CONNECT_TIMEOUT_S, READ_TIMEOUT_S, S3Store
from epochgc.impl.store.url import open_control, open_spec, parse_store_url
from tests.store.blackhole import Blackhole

pytest.importorskip("boto3")


def _store(hole: Blackhole, patience: Patience | None,
           on_wait: Callable[[str], None] | None = None) -> S3Store:
    return S3Store("gcb", "p1", endpoint_url=hole.endpoint, patience=patience,
                   on_wait=on_wait)


READS: dict[str, Callable[[S3Store], Any]] = {
    "head '_cluster/partitions.json'": lambda s: s.head("_cluster/partitions.json"),
    "get '_cluster/gc/admin.json'": lambda s: s.get("_cluster/gc/admin.json"),
    "get '_cluster/gc/lease.json'": lambda s: s.get_versioned("_cluster/gc/lease.json", 64),
    "list '_cluster/reports/'": lambda s: s.list_page("_cluster/reports/"),
    "get bucket versioning": lambda s: s.versioning(),
}


@pytest.mark.parametrize("what", list(READS))
def test_a_control_read_of_a_silent_endpoint_ends_naming_it(hole: Blackhole,
                                                           what: str) -> None:
    store = _store(hole, Patience(read_timeout_s=0.2, attempts=2, say_after_s=600))
    try:
        with pytest.raises(StoreError) as e:
            READS[what](store)
    finally:
        store.close()
    assert str(e.value) == (f"{what} in s3://gcb/p1/ at {hole.endpoint}: no answer within "
                            "0.2 s (2 attempts)")
    assert hole.accepted >= 1 and hole.requested.is_set()  # it was reached, and silent


def test_a_read_still_waiting_is_said_until_it_ends(hole: Blackhole) -> None:
    """The line comes while the read waits (its timeout is 10 minutes: only the test's
    closing the socket ends it), and names the endpoint and the read."""
    lines: list[str] = []
    said = threading.Event()

    def on_wait(line: str) -> None:
        lines.append(line)
        said.set()

    store = _store(hole, Patience(read_timeout_s=600, attempts=1, say_after_s=0.05), on_wait)
    failed: list[BaseException] = []

    def read() -> None:
        try:
            store.head("_cluster/partitions.json")
        except BaseException as e:  # handed to the test
            failed.append(e)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        assert said.wait(300), "no waiting line while the read waited"
    finally:
        hole.close()  # the read now ends: the connection is closed under it
        reader.join(300)
        store.close()
    assert not reader.is_alive()
    assert lines[0].startswith(f"waiting for {hole.endpoint}: no answer yet "
                               "(head '_cluster/partitions.json', "), lines
    assert failed and isinstance(failed[0], StoreError), failed
    n = len(lines)
    said.clear()
    assert not said.wait(0.3) and len(lines) == n  # no line once the read has ended


def test_the_writes_and_an_executors_store_keep_the_stop_bounds_client(
        hole: Blackhole) -> None:
    """`bounds.py`'s arithmetic rests on CONNECT_TIMEOUT_S + READ_TIMEOUT_S per attempt:
    only the reads of a store opened with `patience` (a command's control-plane reads) get
    the short timeout; a pickled store (what a Spark task opens) has no line to say."""
    patience = Patience(read_timeout_s=0.5, attempts=2, say_after_s=1)
    store = _store(hole, patience, on_wait=lambda _line: None)
    try:
        assert store.client.meta.config.read_timeout == READ_TIMEOUT_S
        assert store.client.meta.config.connect_timeout == CONNECT_TIMEOUT_S
        assert store.reader.meta.config.read_timeout == 0.5
        assert store.reader.meta.config.connect_timeout == CONNECT_TIMEOUT_S
        # one attempt per call: the read's attempts are `readretry.run`'s (i41y item 1)
        assert store.reader.meta.config.retries["total_max_attempts"] == 1
        assert store.patience is not None and store.patience.backoff().attempts == 2
        copy = pickle.loads(pickle.dumps(store))
        assert copy.on_wait is None and copy._reader is None
    finally:
        store.close()
    plain = open_spec(parse_store_url("s3://gcb/p1", hole.endpoint))
    assert isinstance(plain, S3Store) and plain.patience is None
    assert plain.reader is plain.client  # the round's executors: unchanged
    plain.close()


def test_the_bounds_come_from_the_environment(hole: Blackhole,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    spec = parse_store_url("s3://gcb/p1", hole.endpoint)
    for name in (READ_TIMEOUT_ENV, ATTEMPTS_ENV, SAY_AFTER_ENV):
        monkeypatch.delenv(name, raising=False)
    store = open_control(spec)
    assert isinstance(store, S3Store) and store.patience == Patience()
    assert Patience().read_timeout_s * Patience().attempts < 60  # "well under a minute"
    monkeypatch.setenv(READ_TIMEOUT_ENV, "0.5")
    monkeypatch.setenv(ATTEMPTS_ENV, "1")
    store = open_control(spec)
    assert isinstance(store, S3Store)
    assert store.patience == Patience(read_timeout_s=0.5, attempts=1)
    # newuser13 Q5: and an upper bound (1e9 s an attempt was taken)
    for name, bad in ((ATTEMPTS_ENV, "1.5"), (READ_TIMEOUT_ENV, "nan"), (SAY_AFTER_ENV, "0"),
                      (READ_TIMEOUT_ENV, "1e9"), (ATTEMPTS_ENV, "1001"),
                      (SAY_AFTER_ENV, "601")):
        monkeypatch.setenv(name, bad)
        with pytest.raises(StoreError, match=f"environment variable {name}={bad!r} is not"):
            open_control(spec)
        monkeypatch.delenv(name)
