"""Store builders, an oracle from the model, and instrumented stores for the GC tests."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from epochgc.impl.gc.journal import JournalTotals, read_journal
from epochgc.impl.gc.reports import HEALTH_PREFIX, PARTITIONS_KEY
from epochgc.impl.gc.stream import TaskResult
from epochgc.impl.store.base import (
    DeleteResult,
    ListPage,
    ObjectInfo,
    ObjectStore,
    Outcome,
    Versioned,
)
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.url import StoreSpec
from epochgc.model.errors import ModelError
from epochgc.model.keys import PREFIXES, gc_eligible, parse_key, prefix_path

ROOT = Path(__file__).resolve().parents[2]
NOW = 1_800_000_000.0  # 2027-01-15: ahead of the real clock when this was written
AHEAD = ("--i-know-now-is-ahead",)  # so `--now NOW` needs this flag (issue 29)
HOUR = 3600.0


def write_partitions(
    store: ObjectStore, revision: int, partitions: list[str], created: dict[str, int] | None = None
) -> None:
    """`created`: creation revision by partition (R35); every partition 0 unless given."""
    incarnations = {p: 0 for p in partitions} | (created or {})
    doc = {"revision": revision, "partitions": partitions, "created": incarnations}
    store.put(PARTITIONS_KEY, json.dumps(doc).encode())


def write_health(
    store: ObjectStore,
    node: str,
    written_at: float,
    replicas: list[tuple[str, int | None]],
    created: int = 0,
) -> None:
    """Every replica entry of the incarnation created at revision `created`."""
    doc = {
        "node": node,
        "written_at": written_at,
        "replicas": [
            {"partition": p, "term": 1, "inactive_epoch": e, "created": created}
            for p, e in replicas
        ],
    }
    key = f"{HEALTH_PREFIX}{node}.json"
    if not isinstance(store, LocalStore):
        store.put(key, json.dumps(doc).encode())
        return
    # The reader takes the older of written_at and the file's mtime: tests that run on an
    # injected clock make the store agree with the writer. Written aside, dated, then
    # renamed into place: a concurrent reader (another Spark task) never sees the new
    # document with the real clock's mtime.
    aside = f"_cluster/tmp/{node}-{uuid.uuid4().hex}"
    store.put(aside, json.dumps(doc).encode())
    os.utime(store.root / aside, (written_at, written_at))
    (store.root / key).parent.mkdir(parents=True, exist_ok=True)
    os.replace(store.root / aside, store.root / key)


def simple_cluster(store: ObjectStore, m: int, revision: int = 10**6, now: float = NOW) -> None:
    """Two partitions, two nodes, cluster M = m."""
    write_partitions(store, revision, ["t/0", "t/1"])
    write_health(store, "n1", now - 10, [("t/0", m), ("t/1", m + 5)])
    write_health(store, "n2", now - 10, [("t/0", m - 3), ("t/1", None)])


def put_local(root: Path, key: str, age: float, now: float = NOW, data: bytes = b"x") -> None:
    path = root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (now - age, now - age))


def all_keys(store: ObjectStore) -> set[str]:
    """Every key but the rounds' deletion records and journals (what a round adds)."""
    return {o.key for o in store.list_all("") if not o.key.startswith("_cluster/gc/")}


def left_per_journal(totals: JournalTotals) -> set[str]:
    """The keys a read-back says left the store: `deleted` (what answers said the round's
    requests removed) and `gone_unattributed` (found absent, no answer recorded), never
    both for one key."""
    both = totals.deleted.keys() & totals.gone_unattributed.keys()
    assert not both, f"counted deleted and gone unattributed: {sorted(both)}"
    return set(totals.deleted) | set(totals.gone_unattributed)


def expected_eligible(ages: dict[str, float], m: int | None, grace_s: float) -> set[str]:
    """The model's eligible set over every key in the store."""
    return {k for k, age in ages.items() if gc_eligible(k, age, m, grace_s).eligible}


def visible_malformed(keys: set[str], m: int | None) -> set[str]:
    """Malformed shard keys the early-stopping lister reaches (key order, stop above M)."""
    if m is None:
        return set()
    seen: set[str] = set()
    for p in range(PREFIXES):
        path = prefix_path(p)
        for k in sorted(k for k in keys if k.startswith(path)):
            try:
                if parse_key(k).epoch > m:
                    break
            except ModelError:
                seen.add(k)
    return seen


# --- instrumented stores (picklable factories: Spark tasks run in other processes) ---


class _Delegating(ObjectStore):
    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner

    def describe(self) -> str:
        return self.inner.describe()

    def put(self, key: str, data: bytes) -> None:
        self.inner.put(key, data)

    def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        return self.inner.get(key, start, end)

    def head(self, key: str) -> ObjectInfo | None:
        return self.inner.head(key)

    def list_page(
        self,
        prefix: str,
        start_after: str | None = None,
        limit: int = 1000,
        until: str | None = None,
    ) -> ListPage:
        return self.inner.list_page(prefix, start_after, limit, until)

    def delete_batch(self, keys: list[str]) -> DeleteResult:
        return self.inner.delete_batch(keys)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        return self.inner.put_if_absent(key, data)

    def require_conditional_writes(self) -> None:
        self.inner.require_conditional_writes()

    def create_if_absent(self, key: str, data: bytes) -> str | None:
        return self.inner.create_if_absent(key, data)

    def replace_if_match(self, key: str, data: bytes, version: str) -> str | None:
        return self.inner.replace_if_match(key, data, version)

    def delete_if_match(self, key: str, version: str) -> Outcome:
        return self.inner.delete_if_match(key, version)

    def get_versioned(self, key: str, limit: int) -> Versioned | None:
        return self.inner.get_versioned(key, limit)


class _CountingStore(_Delegating):
    def __init__(self, inner: ObjectStore, log: str) -> None:
        super().__init__(inner)
        self.log = log

    def list_page(
        self,
        prefix: str,
        start_after: str | None = None,
        limit: int = 1000,
        until: str | None = None,
    ) -> ListPage:
        page = self.inner.list_page(prefix, start_after, limit, until)
        line = json.dumps([prefix, start_after, len(page.objects)]) + "\n"
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, line.encode())  # one small O_APPEND write: atomic across processes
        finally:
            os.close(fd)
        return page


@dataclass(frozen=True)
class CountingFactory:
    inner: StoreSpec
    log: str

    def __call__(self) -> ObjectStore:
        return _CountingStore(self.inner(), self.log)

    def calls(self) -> list[tuple[str, str | None, int]]:
        if not os.path.exists(self.log):
            return []
        return [tuple(json.loads(line)) for line in Path(self.log).read_text().splitlines()]


class InjectedCrash(RuntimeError):
    pass


class _CrashingStore(_Delegating):
    def __init__(self, inner: ObjectStore, counter: str, after: int) -> None:
        super().__init__(inner)
        self.counter, self.after = counter, after

    def delete_batch(self, keys: list[str]) -> DeleteResult:
        with open(self.counter, "a+") as f:  # a batch counter shared by all Spark workers
            fcntl.flock(f, fcntl.LOCK_EX)
            f.seek(0)
            n = len(f.read())
            f.write("x")
        if n >= self.after:
            raise InjectedCrash(f"injected crash at delete batch {n}")
        return self.inner.delete_batch(keys)


@dataclass(frozen=True)
class CrashAfterBatches:
    inner: StoreSpec
    counter: str
    after: int

    def __call__(self) -> ObjectStore:
        return _CrashingStore(self.inner(), self.counter, self.after)


def local_spec(root: Path) -> StoreSpec:
    LocalStore(root, create=True)
    return StoreSpec("file", str(root))


class _RefusingStore(_Delegating):
    """Deletes every key except those containing `marker`, which fail per key (as S3's
    DeleteObjects reports AccessDenied for single keys)."""

    def __init__(self, inner: ObjectStore, marker: str) -> None:
        super().__init__(inner)
        self.marker = marker

    def delete_batch(self, keys: list[str]) -> DeleteResult:
        refused = [k for k in keys if self.marker in k]
        result = self.inner.delete_batch([k for k in keys if self.marker not in k])
        return DeleteResult(len(keys), {**result.errors, **dict.fromkeys(refused, "AccessDenied")})


@dataclass(frozen=True)
class RefuseKeys:
    inner: StoreSpec
    marker: str

    def __call__(self) -> ObjectStore:
        return _RefusingStore(self.inner(), self.marker)


class TransientListError(RuntimeError):
    """Not a StoreError: as an executor's lost connection or a bug, it fails the attempt."""


class _ListFailsOnceAfterDelete(_Delegating):
    """The first list request an attempt makes after its own delete fails once (the flag
    file is created exclusively, so across Spark workers exactly one attempt sees the
    error). Its own: with "after any delete of the round" the other task, listing while the
    first one deleted, could take the error before it had journaled anything, so the journal
    showed no failed attempt (CI, under load, once intents began to name two batches). A
    task attempt runs in one Python worker process (its listers and deleters are threads),
    so "its own" is this process's."""

    def __init__(self, inner: ObjectStore, flag: str) -> None:
        super().__init__(inner)
        self.flag = flag

    def delete_batch(self, keys: list[str]) -> DeleteResult:
        result = self.inner.delete_batch(keys)
        Path(f"{self.flag}.deleted.{os.getpid()}").touch()
        return result

    def list_page(
        self,
        prefix: str,
        start_after: str | None = None,
        limit: int = 1000,
        until: str | None = None,
    ) -> ListPage:
        if prefix.startswith("level_zero/") and os.path.exists(
                f"{self.flag}.deleted.{os.getpid()}"):
            try:
                os.close(os.open(self.flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass
            else:
                raise TransientListError(f"injected transient list error at {prefix}")
        return self.inner.list_page(prefix, start_after, limit, until)


@dataclass(frozen=True)
class ListFailsOnceAfterDelete:
    inner: StoreSpec
    flag: str

    def __call__(self) -> ObjectStore:
        return _ListFailsOnceAfterDelete(self.inner(), self.flag)


JOURNAL = "_cluster/gc/journal/test/"


def run_task(task: Iterator[TaskResult], store: ObjectStore) -> tuple[TaskResult, set[str]]:
    """Run a task body whose journal is `JOURNAL` in `store`; its one result and the keys
    its journal says it deleted."""
    [result] = list(task)
    return result, set(read_journal(store, JOURNAL).deleted)


class _PlantsOnDelete(_Delegating):
    """Creates directory `plant` at its first delete: a manifest target that appears after
    the round's checks (as another writer's would)."""

    def __init__(self, inner: ObjectStore, plant: str) -> None:
        super().__init__(inner)
        self.plant = plant

    def delete_batch(self, keys: list[str]) -> DeleteResult:
        os.makedirs(self.plant, exist_ok=True)
        return self.inner.delete_batch(keys)


@dataclass(frozen=True)
class PlantOnDelete:
    inner: StoreSpec
    plant: str

    def __call__(self) -> ObjectStore:
        return _PlantsOnDelete(self.inner(), self.plant)


class _BrokenRead(_Delegating):
    """`get` of the snapshot raises a bug's exception (not a StoreError)."""

    def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        if key.endswith("partitions.json"):
            raise ZeroDivisionError("injected bug in a read")
        return self.inner.get(key, start, end)


@dataclass(frozen=True)
class BrokenRead:
    inner: StoreSpec

    @property
    def kind(self) -> str:
        return self.inner.kind

    def __call__(self) -> ObjectStore:
        return _BrokenRead(self.inner())


REACH_LIMIT_S = 300.0  # a bound for a hung process, not a timing assumption


def round_held_at_first_batch(
    root: Path, hold: Path, args: list[str], act: Callable[[subprocess.Popen[str]], None]
) -> tuple[int, str, str]:
    """Run `epochgc gc --store root ... args` in a process whose first journaled delete
    batch waits (`PAUSE_ENV` = `hold`) until the round's STOP marker exists; once that
    batch was deleted, call `act(process)` (send a signal, pause GC...). Returns the
    process's exit code, stdout and stderr. Deterministic: nothing depends on timing."""
    from epochgc.impl.gc.delete import PAUSE_ENV

    env = dict(os.environ, PYTHONPATH=str(ROOT), **{PAUSE_ENV: str(hold)})
    cmd = [sys.executable, "-m", "epochgc.impl.gc", "--store", str(root), *args]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        limit = time.monotonic() + REACH_LIMIT_S
        while not Path(f"{hold}.reached").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < limit, "the round never reached its first batch"
            time.sleep(0.05)
        act(proc)
        out, err = proc.communicate(timeout=REACH_LIMIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out, err


def lease_of_a_dead_driver(root: Path, round_id: str) -> None:
    """The store's GC lease taken by a process that then exited without releasing it: a
    driver that died holding it. The lease names that process (`reset --force` checks
    that it is gone), so the test's own process must not be its holder."""
    code = ("from epochgc.impl.gc.lease import Lease; "
            "from epochgc.impl.store.local import LocalStore; "
            f"Lease(lambda: LocalStore({str(root)!r}), {round_id!r}).acquire()")
    subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                   check=True, timeout=REACH_LIMIT_S)


def signal_when_ready(argv: list[str], *, env: dict[str, str], cwd: Path, err: Path,
                      ready: Callable[[], bool], sig: signal.Signals, bound_s: float,
                      not_ready: str) -> int:
    """Run `argv` in a session of its own (stderr into `err`), send it `sig` once `ready()`
    holds and return its exit code. A command that ends first, or is not ready within
    `bound_s` (`not_ready` says what was awaited), or still runs `bound_s` after the signal,
    fails the test; its group is killed on the way out whatever happens."""
    with open(err, "w") as err_f:
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                                stderr=err_f, start_new_session=True)
    try:
        limit = time.monotonic() + bound_s
        while not ready():
            assert proc.poll() is None, err.read_text()
            assert time.monotonic() < limit, f"{not_ready}:\n{err.read_text()}"
            time.sleep(0.05)
        proc.send_signal(sig)
        try:
            return proc.wait(timeout=bound_s)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {bound_s:.0f} s after {sig.name}:\n{err.read_text()}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


RECORD_DAMAGE = ("directory", "fifo", "symlink")


def damage_record_key(path: Path, kind: str, elsewhere: Path, text: str) -> None:
    """What a damaged local store holds where a round record's object should be: a
    directory, a FIFO, or a symbolic link to `elsewhere` (written with `text`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        elsewhere.write_text(text)
        path.symlink_to(elsewhere)


def run_gc_admin(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """`epochgc gc-admin ARGS` in a child process of this checkout, output captured."""
    return subprocess.run([sys.executable, "-m", "epochgc", "gc-admin", *args],
                          capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
