"""Live counts from the tasks to the driver's progress display (issue 41 item 10): keys
listed and keys deleted so far, while the tasks run.

Spark has no channel for this: a PySpark accumulator reaches the driver only when its task
ends (pyspark/accumulators.py: the worker sends its updates with the task's result), and
the status tracker counts tasks, not keys. Reading the counts back from the store (the
deletion journal) cost one LIST a second plus a GET per batch on S3, and a listing-only
round writes no journal at all. So each task sends its running counts, at most once per
`interval` and once more at its end, as one small UDP datagram to a listener on the
driver's own address (`spark.driver.host`, which executors reach anyway).

The counts are advisory and nothing else reads them: a lost, late or forged datagram can
only make the display wrong, never a record (records come from the journal). That is why a
connectionless, unacknowledged channel is enough, and why a send that fails is dropped."""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from epochgc.impl.gc.ticker import Ticker
from epochgc.impl.gc.udplisten import UdpListener, family

_MAX_DATAGRAM = 512  # a datagram is one small JSON object; anything longer is not ours


@dataclass(frozen=True)
class BeaconTarget:
    """Where a task sends its counts (pickled into the task's closure)."""

    host: str
    port: int


class Tally:
    """A task's running counts, added to by its lister and delete threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.listed = 0
        self.deleted = 0

    def add(self, listed: int = 0, deleted: int = 0) -> None:
        with self._lock:
            self.listed += listed
            self.deleted += deleted

    def snapshot(self) -> tuple[int, int]:
        with self._lock:
            return self.listed, self.deleted


class Beacon:
    """`with Beacon(target, name) as tally:` sends `tally`'s counts to `target` every
    `interval` seconds while the block runs (when they changed) and once when it ends.
    With `target` None the tally is kept and nothing is sent."""

    def __init__(self, target: BeaconTarget | None, name: str, interval: float = 1.0) -> None:
        self.target, self.name, self.interval = target, name, interval
        self.tally = Tally()
        self._ticker: Ticker | None = None
        self._sock: socket.socket | None = None
        self._last: tuple[int, int] | None = None

    def __enter__(self) -> Tally:
        if self.target is not None:
            with contextlib.suppress(OSError):
                self._sock = socket.socket(family(self.target.host), socket.SOCK_DGRAM)
            if self._sock is not None:
                self._ticker = Ticker(self.interval, self._tick, "epochgc-beacon")
                self._ticker.start()
        return self.tally

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._ticker is not None:
            self._ticker.stop()
        if self._sock is not None:
            self._send()  # the final counts
            self._sock.close()

    def _tick(self) -> None:
        now = self.tally.snapshot()
        if now != self._last:
            self._send()
            self._last = now

    def _send(self) -> None:
        assert self._sock is not None and self.target is not None
        listed, deleted = self.tally.snapshot()
        doc = {"task": self.name, "listed": listed, "deleted": deleted}
        with contextlib.suppress(OSError):  # advisory: a full buffer or no route drops it
            self._sock.sendto(json.dumps(doc).encode(), (self.target.host, self.target.port))


class BeaconListener(UdpListener):
    """The driver's side: `with BeaconListener(host) as listener:` receives the tasks'
    datagrams on `listener.target` and keeps the latest counts per task attempt;
    `totals()` is (keys listed, keys deleted) over all of them. Every attempt's deletions
    are real, so they add up; a retried attempt lists again, so listing counts the
    highest of the attempts of one partition (names "p<partition>-..."; see
    `journal.Attempt.name`)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        super().__init__(host, _MAX_DATAGRAM + 1, "epochgc-beacon-listener")
        self.target = BeaconTarget(host, self.port)
        self._lock = threading.Lock()
        self._latest: dict[str, tuple[int, int]] = {}
        self._waiting: dict[bytes, threading.Event] = {}
        self._syncs = itertools.count()

    def sync(self, limit_s: float = 30.0) -> None:
        """Returns once every datagram that reached this host's socket before the call is
        counted: a marker sent to the listener's own address queues behind them, and the
        receive loop sets its event when it reads the marker. A datagram still on its way
        from another host is not waited for (advisory counts). At most `limit_s`: a full
        receive buffer drops the marker too, and a round must not hang on its display
        (a reviewer's finding)."""
        marker = f"sync-{id(self)}-{next(self._syncs)}".encode()
        event = threading.Event()
        with self._lock:
            self._waiting[marker] = event
        try:
            with socket.socket(self._sock.family, socket.SOCK_DGRAM) as s:
                s.sendto(marker, (self.target.host, self.target.port))
        except OSError:
            return
        waited = 0.0
        while self._thread.is_alive() and not event.wait(0.1) and waited < limit_s:
            waited += 0.1
        with self._lock:
            self._waiting.pop(marker, None)

    def handle(self, data: bytes, addr: tuple[str, int]) -> None:
        with self._lock:
            event = self._waiting.pop(data, None)
        if event is not None:
            event.set()
        else:
            self.receive(data)

    def ended(self) -> None:
        with self._lock:  # closed: nobody waits for a marker that will not come
            for event in self._waiting.values():
                event.set()

    def receive(self, data: bytes) -> None:
        """One datagram; anything that is not a task's counts is ignored."""
        try:
            doc = json.loads(data)
            name, listed, deleted = doc["task"], doc["listed"], doc["deleted"]
        except (ValueError, TypeError, KeyError):
            return
        if not (isinstance(name, str) and _count(listed) and _count(deleted)):
            return
        with self._lock:
            old = self._latest.get(name, (0, 0))
            # Datagrams may arrive out of order: the counts only grow within an attempt.
            self._latest[name] = (max(old[0], listed), max(old[1], deleted))

    def totals(self) -> tuple[int, int]:
        with self._lock:
            items = list(self._latest.items())
        listed: dict[str, int] = {}
        deleted = 0
        for name, (n_listed, n_deleted) in items:
            part = name.split("-", 1)[0]
            listed[part] = max(listed.get(part, 0), n_listed)
            deleted += n_deleted
        return sum(listed.values()), deleted


def _count(v: object) -> bool:
    return type(v) is int and 0 <= v < 1 << 62


def driver_host(conf_get: Callable[[str, str], str]) -> str:
    """The address the executors reach the driver at (`spark.driver.host`)."""
    return conf_get("spark.driver.host", "127.0.0.1")
