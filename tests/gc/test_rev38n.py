"""Reviewer's tests for issue 38's stop bound (branch i38n at 67a8887, review rev38n): the
driver's watch HEADs STOP, the gate says go only after a fresh look, a batch is sent within
`send_within_s` of its "go on?", the recovery waits the round's bound after writing STOP.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.gc import recover as recover_mod
from epochgc.impl.gc.bounds import LOOK_FRESH_S, stop_within_s
from epochgc.impl.gc.delete import delete_keys
from epochgc.impl.gc.errors import GcError
from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.journal import (
    END,
    START,
    STOP,
    Attempt,
    JournalTarget,
    JournalWriter,
    journal_prefix,
    write_marker,
)
from epochgc.impl.gc.lease import DEFAULT_LEASE_S
from epochgc.impl.gc.options import MAX_WATCH_INTERVAL_S, GcOptions
from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.gc.stop import RoundStop
from epochgc.impl.gc.watch import RoundWatch, go_on
from epochgc.impl.store.base import ObjectStore, StoreError
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.s3 import S3Store
from epochgc.model.keys import format_key
from tests.gc.helpers import (
    AHEAD,
    HOUR,
    NOW,
    REACH_LIMIT_S,
    all_keys,
    local_spec,
    put_local,
    round_held_at_first_batch,
    simple_cluster,
    write_health,
)
from tests.interrupted import by_signal

ROOT = Path(__file__).resolve().parents[2]
GRACE = 12 * HOUR
DEAD = "20270115T060000.000Z-deadr0nd"


class _Clock:
    """A monotonic clock the test moves (no test waits)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


# --- finding 2: the local store sends a batch told go long ago -------------------------


def _late_batch(store: ObjectStore, keys: list[str]) -> tuple[bool, set[str]]:
    """`delete_keys` with a journal whose batch bound is already over (`send_within_s`
    -1: the "go on?" was asked longer ago than the bound). Returns (refused, kept)."""
    writer = JournalWriter(store, JournalTarget(journal_prefix(DEAD), send_within_s=-1.0),
                           Attempt(0, 0, 0, 1))
    try:
        delete_keys(store, ((k, 1, 0.0, "") for k in keys), batch_size=2, concurrency=1,
                    journal=writer)
    except StoreError:
        refused = True
    else:
        refused = False
    return refused, {k for k in keys if store.head(k) is not None}


def test_s3_refuses_a_batch_told_go_too_long_ago(s3_endpoint: str, s3_bucket: str) -> None:
    """Held (the author's boundary, repeated beside the local store's case below): on S3
    the batch's intent PUT is refused past the bound and nothing is deleted."""
    store = S3Store(s3_bucket, "rev38n-late", endpoint_url=s3_endpoint)
    keys = [format_key(i, 5, f"s{i}") for i in range(4)]
    for k in keys:
        store.put(k, b"x")
    refused, kept = _late_batch(store, keys)
    assert refused and kept == set(keys)


def test_a_local_store_refuses_a_batch_told_go_too_long_ago(tmp_path: Path) -> None:
    """`ObjectStore.send_by` is a no-op on the local store ("a backend that neither queues
    nor retries"), but the gap the bound covers is between the "go" and the call, not the
    call itself: a task stopped after its "go" (SIGSTOP, a frozen container, a hung NFS
    server under a shared-directory store, which the README supports for Spark) writes its
    intent and unlinks its keys whenever it resumes, after the recovery's wait and
    read-back. On S3 the same batch is refused (test above)."""
    store = LocalStore(tmp_path / "s", create=True)
    keys = [format_key(i, 5, f"l{i}") for i in range(4)]
    for k in keys:
        store.put(k, b"x")
    refused, kept = _late_batch(store, keys)
    assert refused and kept == set(keys), (
        f"a batch past its bound was sent: {len(keys) - len(kept)} of {len(keys)} keys "
        "deleted, its intent written")


# --- finding 3: the gate closes between two looks the options allow ---------------------


def _watch(tmp_path: Path, interval_s: float, clock: _Clock,
           store_factory: Any = None, nodes: int = 2) -> tuple[RoundStop, RoundWatch]:
    inner = LocalStore(tmp_path / "s", create=True)
    simple_cluster(inner, 100, now=time.time())  # healthy: the looks pass
    for n in range(3, nodes + 1):  # more brokers, each with its health report
        write_health(inner, f"n{n}", time.time() - 10, [("t/0", 100), ("t/1", 105)])
    stop = RoundStop()
    watch = RoundWatch(store_factory or (lambda: LocalStore(inner.root)), stop, time.time,
                       3600.0, interval_s, lambda _v: None,
                       stop_key=journal_prefix(DEAD) + STOP, monotonic=clock)
    return stop, watch


@pytest.mark.parametrize("interval_s", [
    60.0,  # the boundary: within the freshness, held
    120.0,
    3600.0,  # the old MAX_WATCH_INTERVAL_S
    MAX_WATCH_INTERVAL_S,
])
def test_a_watch_interval_the_options_accept_keeps_the_gate_open_between_looks(
    tmp_path: Path, interval_s: float
) -> None:
    """`--watch-interval` (GcOptions.watch_interval_s) is accepted up to 3600 s, but the
    gate says go only within LOOK_FRESH_S (90 s) of the last look's HEAD of STOP: with an
    interval over ~88 s every round stops as `watch-late` at its first ask after 90 s,
    although nothing asked it to stop (tests/gc/test_job.py and tests/gcops/
    test_spark_rounds.py run rounds with 3600 s: any of them whose stage passes 90 s on a
    loaded machine now stops). Either the option is refused past the freshness, or the
    gate stays open until the next look is due."""
    try:
        GcOptions(watch_interval_s=interval_s).validate()
    except GcError:
        return  # refused: no round can run with it
    clock = _Clock()
    stop, watch = _watch(tmp_path, interval_s, clock)
    is_open = go_on(stop, None, watch, LOOK_FRESH_S)
    assert watch.poll_once() is None and is_open()
    clock.t += interval_s - 1.0  # the next look is not due yet
    assert is_open(), (f"watch interval {interval_s:g}s accepted, and the gate said no "
                       f"{interval_s - 1:g}s after a clear look: the round stops as "
                       f"{stop.reason!r} with no STOP and no pause")


class _SlowReads(LocalStore):
    """A local store whose every read request moves the watch's clock by `per_request_s`:
    the look as a slow or throttled S3 makes it (no test waits)."""

    def __init__(self, root: Path, clock: _Clock, per_request_s: float) -> None:
        super().__init__(root)
        self.clock, self.per_request_s = clock, per_request_s

    def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        self.clock.t += self.per_request_s
        return super().get(key, start, end)

    def head(self, key: str) -> Any:
        self.clock.t += self.per_request_s
        return super().head(key)

    def get_versioned(self, key: str, limit: int) -> Any:
        self.clock.t += self.per_request_s
        return super().get_versioned(key, limit)

    def list_page(self, *args: Any, **kwargs: Any) -> Any:
        self.clock.t += self.per_request_s
        return super().list_page(*args, **kwargs)


def test_a_slow_look_does_not_stop_a_round_nobody_asked_to_stop(tmp_path: Path) -> None:
    """A look is the HEAD of STOP, then the pause state, the partitions and every broker's
    health report, one request after another (`check_health` reads with one reader);
    `_clear_at` is taken before the HEAD. A cluster of 48 brokers on an S3 answering in
    2 s a request (the i38m bench measured 2.1-10.8 s through its latency proxy) makes a
    look of ~100 s: the gate says no while the watch is still reading the reports, and the
    round stops `watch-late` although no STOP was written (every round, on that cluster)."""
    clock = _Clock()
    root = tmp_path / "s"
    stop, watch = _watch(tmp_path, 2.0, clock,
                         store_factory=lambda: _SlowReads(root, clock, 2.0), nodes=48)
    is_open = go_on(stop, None, watch, LOOK_FRESH_S)
    asked: list[bool] = []
    original = _SlowReads.get

    def get_and_ask(self: _SlowReads, key: str, start: int | None = None,
                    end: int | None = None) -> bytes:
        data = original(self, key, start, end)
        asked.append(is_open())  # a task asks while the look goes on
        return data

    _SlowReads.get = get_and_ask  # type: ignore[method-assign]
    try:
        assert watch.poll_once() is None
        clock.t += 2.0  # the watch's interval, then the next look's HEAD
        assert watch.poll_once() is None
    finally:
        _SlowReads.get = original  # type: ignore[method-assign]
    assert asked, "no task asked during the looks"
    assert all(asked), (f"the gate said no during a look ({asked.count(False)} of "
                        f"{len(asked)} asks) with no STOP written: stopped as {stop.reason!r}")


# --- finding 1: the recovery's record, written after its wait, replaces the live round's ---


def _records(root: Path) -> list[dict[str, Any]]:
    store = LocalStore(root)
    return [json.loads(store.get(o.key)) for o in store.list_all(ROUNDS_PREFIX)
            if o.key.endswith(".json")]


# `show-clock-ahead` (~40 s, a second Spark round) runs under `tox -e kill9`: since show no
# longer records a round it must wait for, it checks only that a skewed show's STOP leaves
# the live round its own record; the recovery's record against the driver's is
# `reset-force` here and tests/gc/test_recover_race.py.
_HOW = ["reset-force"] + (["show-clock-ahead"] if os.environ.get("EPOCHGC_KILL9_ALL") else [])


@pytest.mark.spark
@pytest.mark.parametrize("how", _HOW)
def test_a_live_round_recovered_by_mistake_keeps_its_own_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """`gc-admin reset --force` while a round is alive (the operator took it for dead): the
    reset removes the lease, writes the round's STOP, waits its bound (240 s), reads back
    and writes a `killed` record. Meanwhile the live driver's watch sees its lease gone (on
    the old code its STOP, up to 30 s later), the round stops (`lease-lost`), reads its
    journal back and writes its own END and record (well within 240 s). On i38m the recovery
    wrote its record at once and the driver's, later, replaced it (recover.py: "its own END
    and record, written later, replace these"). Now the recovery writes after its wait, by
    plain PUT, without looking again whether the round got its END or record meanwhile: the
    driver's true record is replaced by one that says the round was killed and recovered by
    `gc-admin reset`, while the driver printed and exited `interrupted`. `show-clock-ahead`:
    no operator mistake at all, a plain `gc-admin show` from a host whose clock is 11 min
    ahead of the driver's (the lease, renewed every 200 s for 600 s, reads as expired
    there). Deterministic: the round's first batch waits for the STOP
    (EPOCHGC_GC_TEST_PAUSE); the recovery's wait (recover.SLEEP) returns once the driver's
    record exists (what 240 s gives a live driver)."""
    root = tmp_path / "store"
    simple_cluster(LocalStore(root, create=True), 100)
    eligible = {format_key(p, 50, f"k{p}") for p in range(0, 1000, 50)}
    for key in eligible:
        put_local(root, key, age=GRACE + 60)
    hold = tmp_path / "hold"
    args = ["--now", str(NOW), *AHEAD, "--tasks", "1", "--delete-batch-size", "2",
            "--delete-concurrency", "1", "--json", "-q"]
    waited: list[float] = []

    def wait_for_the_drivers_record(s: float) -> None:
        waited.append(s)
        limit = time.monotonic() + REACH_LIMIT_S
        while not _records(root):
            assert time.monotonic() < limit, "the live driver never wrote its record"
            time.sleep(0.05)

    monkeypatch.setattr(recover_mod, "SLEEP", wait_for_the_drivers_record)
    resets: list[tuple[int, str]] = []

    def recover(_proc: object) -> None:
        if how == "reset-force":
            # the live driver runs on this host: reset refuses it unless told (newuser3 N4)
            cmd = ["gc-admin", "reset", "--store", str(root), "--force", "--even-if-running"]
        else:  # this host's clock is 660 s ahead: the live lease reads as expired here
            real = time.time
            monkeypatch.setattr(time, "time", lambda: real() + 660.0)
            cmd = ["gc-admin", "show", "--store", str(root)]
        r = CliRunner().invoke(main, cmd)
        resets.append((r.exit_code, r.output))

    _code, out, err = round_held_at_first_batch(root, hold, args, recover)
    driver = json.loads(out.strip().splitlines()[-1])
    # `reset` waits the round's bound; `show` does not wait (finding 4): it writes STOP
    # and leaves the record to the next round or `reset`.
    # `reset`'s wait ends at its first step's look: the driver's record exists (newuser4 F3)
    assert waited == ([recover_mod.POLL_S] if how == "reset-force" else []), (waited, resets)
    assert driver["outcome"] == "interrupted", (driver, err[-2000:])
    if how == "reset-force":
        # newuser5 G3: the lease is removed before the STOP is written, and the round's
        # watch looks at its lease every look (2 s) but at STOP every 30 s: on the old code
        # the round went on for ~28 s without its lease and stopped as `stop-marker`.
        assert driver["interrupted"] == "lease-lost", (driver, err[-2000:])
        # `reset` says how the round ended (newuser5 G2/G3: it ended silently).
        assert "recorded during the wait by its own driver: interrupted" in resets[0][1], (
            resets)
    [record] = _records(root)
    end = json.loads(LocalStore(root).get(record["journal"] + END))
    seqs = [o.key for o in LocalStore(root).list_all("_cluster/gc/seq/")]
    gone = eligible - all_keys(LocalStore(root))
    assert record["counts"]["deleted"] == len(gone)
    assert (record.get("outcome"), end.get("outcome")) == (driver["outcome"],) * 2, (
        f"the live round printed {driver['outcome']!r} and wrote its record; the store's "
        f"record now says {record.get('outcome')!r} (recovered by "
        f"{record.get('recovered_by')!r}, exit code {record.get('exit_code')}, seq "
        f"{record.get('seq')} of {len(seqs)} numbers claimed), its END {end.get('outcome')!r}; "
        f"gc-admin said: {resets[0][1].strip()!r}")


# --- finding 4: `gc-admin show` holds the operator for the bound ------------------------


def _dead_round(root: Path, stop_within: float | None = None) -> str:
    store = LocalStore(root, create=True)
    simple_cluster(store, 100, now=time.time())  # healthy on the real clock: show exits 0
    prefix = journal_prefix(DEAD)
    extra = {} if stop_within is None else {"stop_within_s": stop_within}
    write_marker(store, prefix, START, {"round": DEAD, "M": 100, "snapshot_revision": 7,
                                        "options": {}, **extra})
    return prefix


def test_gc_admin_show_answers_without_waiting_a_dead_rounds_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gc-admin show` (the status command, the first thing an operator runs after a crash,
    and what a monitor polls) finds a dead round whose START carries the bound and sleeps
    240 s (up to 900 s for an unreadable START) before it prints anything; `--json` prints
    nothing meanwhile. On i38m / main it answered at once. The STOP could be written and
    the round shown as stopping (recorded by the first look after the bound, from the
    STOP's own store time) instead of holding the command."""
    root = tmp_path / "s"
    _dead_round(root, stop_within_s(DEFAULT_LEASE_S))
    slept: list[float] = []
    monkeypatch.setattr(recover_mod, "SLEEP", slept.append)
    r = CliRunner().invoke(main, ["gc-admin", "show", "--store", str(root), "--json"])
    assert r.exit_code == 0, r.output
    assert sum(slept) == 0, (f"gc-admin show slept {sum(slept):g}s before answering: "
                             f"{r.output.splitlines()[0]!r}")


def test_two_recoveries_of_one_dead_round_give_it_one_number(tmp_path: Path) -> None:
    """Two recoveries of the same dead round at once (`gc-admin show` and the next round's
    own recovery, which holds the lease; show needs none). Each lists the records before
    its 240 s wait and writes after it, by plain PUT: both claim a round number and both
    write the record and END. Before the wait the window was a few requests wide."""
    root = tmp_path / "s"
    _dead_round(root, stop_within_s(DEFAULT_LEASE_S))
    store = LocalStore(root)

    def meanwhile(_s: float) -> None:  # the other recovery runs during this one's wait
        recover_mod.recover_dead_rounds(LocalStore(root), "round next", lambda: set(),
                                        sleep=lambda _s: None)

    recover_mod.recover_dead_rounds(store, "gc-admin show", lambda: set(), sleep=meanwhile)
    seqs = [json.loads(store.get(o.key)) for o in store.list_all("_cluster/gc/seq/")]
    [record] = _records(root)
    assert len(seqs) == 1, (f"one dead round, {len(seqs)} round numbers claimed for it "
                            f"({seqs}); its record says seq {record['seq']}, recovered by "
                            f"{record['recovered_by']!r}")


def test_sigint_during_the_recoverys_wait_exits_130_and_leaves_a_true_state(
    tmp_path: Path,
) -> None:
    """Held: Ctrl-C while `gc-admin reset` waits the dead round's bound (a real wait, in a
    process of its own; `show` no longer waits, finding 4): exit 130 at once with
    "interrupted by SIGINT"; the round has its STOP and no record (nothing false: the
    next look recovers it, and waits again)."""
    root = tmp_path / "s"
    prefix = _dead_round(root, stop_within_s(DEFAULT_LEASE_S))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-c", "from epochgc.impl.cli import main; main()", "gc-admin",
         "reset", "--store", str(root)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # blocks until the command says it waits
        bound = f"{stop_within_s(DEFAULT_LEASE_S):.0f}"  # 300 s since review rev38z9
        assert f"waiting up to {bound} s for round {DEAD} to see its STOP" in first, first
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=REACH_LIMIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (proc.returncode, out, err)
    assert "interrupted by SIGINT" in err, err
    store = LocalStore(root)
    assert store.head(prefix + STOP) is not None and not _records(root)


# --- finding 5: a task without a gate goes on when it cannot read STOP ------------------


class _StopUnreadable(LocalStore):
    """A local store whose HEAD of the round's STOP fails (a 503 SlowDown after botocore's
    retries, a timeout); every other request works."""

    def head(self, key: str) -> Any:
        if key.endswith(STOP):
            raise StoreError(f"head {key!r} failed: SlowDown (injected)")
        return super().head(key)


def test_a_task_that_cannot_read_stop_sends_no_batch(tmp_path: Path) -> None:
    """bounds.py's chain: a task "sends a batch only when told to go: by the driver's gate,
    or, with no gate, by a HEAD of STOP that found none". With no gate (none bound, or UDP
    filtered between the hosts: the first ask got no answer), `stop_requested` answers
    "go on" when that HEAD *fails* ("the check is advisory: the driver also waits for the
    tasks"). The recovery does not wait for the tasks, only its bound: STOP written, 240 s,
    read-back; a task whose HEADs fail after that sends every batch, in no record."""
    store = _StopUnreadable(tmp_path / "s", create=True)
    keys = [format_key(i % 100, 5, f"k{i:05d}") for i in range(40)]
    for k in keys:
        store.put(k, b"x")
    prefix = _start_marker(store)
    write_marker(store, prefix, STOP, {"reason": "killed", "by": "test"})  # the recovery's
    writer = JournalWriter(store, JournalTarget(prefix), Attempt(0, 0, 0, 1))
    stats = delete_keys(store, ((k, 1, 0.0, "") for k in keys), batch_size=10,
                        concurrency=1, journal=writer)
    gone = set(keys) - all_keys(store)
    assert not gone, (f"STOP was written and unreadable to the task: it sent "
                      f"{stats.delete_requests} batches, {len(gone)} keys deleted")


def _start_marker(store: LocalStore) -> str:
    prefix = journal_prefix(DEAD)
    write_marker(store, prefix, START, {"round": DEAD, "M": 100, "snapshot_revision": 7,
                                        "options": {}, "stop_within_s": 240.0})
    return prefix


# --- finding 6: a signal or the deadline does not end the next round's recovery wait ----


def test_sigterm_during_the_next_rounds_recovery_wait_ends_the_round(tmp_path: Path) -> None:
    """`epochgc gc` recovers dead rounds first (holding the lease), and now sleeps their
    bound there (240 s, up to 900 s). SIGINT / SIGTERM only record a stop request
    (`stop.install_signal_handlers`), so `time.sleep` resumes after the handler (PEP 475)
    and the round sleeps on; so does `--deadline`. A scheduler's SIGTERM (Kubernetes:
    SIGKILL 30 s later) then kills the round holding the lease (the next rounds blocked
    for its 600 s). Here the dead round's START gives 6 s (the recovery takes the bound
    from it) so the test ends either way: on this code the round sleeps its 6 s after the
    SIGTERM and then reads the dead round back and records it (what a recovery must not
    do before its bound, and here only because the bound ran out). `--deadline`: the next
    test (in one process here: a 5 s deadline raced the round's start-up under load)."""
    root = tmp_path / "s"
    store = LocalStore(root, create=True)
    simple_cluster(store, 100)
    prefix = journal_prefix(DEAD)
    write_marker(store, prefix, START, {"round": DEAD, "M": 100, "snapshot_revision": 7,
                                        "options": {}, "stop_within_s": 6.0})
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "epochgc.impl.gc", "--store", str(root), "--now", str(NOW),
         *AHEAD],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        assert proc.stderr is not None
        # "waiting up to 6 s for round ..." ("waiting 6s ..." before the line was reworded)
        while not any(re.search(r"waiting (up to )?6 ?s", line) for line in lines):
            line = proc.stderr.readline()
            assert line, "".join(lines)
            lines.append(line)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=REACH_LIMIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    recorded = [o.key for o in store.list_all(ROUNDS_PREFIX) if DEAD in o.key]
    assert proc.returncode == by_signal(signal.SIGTERM) and not recorded, (
        f"SIGTERM during the recovery's wait: exit {proc.returncode}, "
        f"the dead round recorded after the signal: {recorded}; stderr: "
        f"{''.join(lines)[-600:]}{err[-600:]}")


def test_the_deadline_ends_the_recoverys_wait(tmp_path: Path) -> None:
    """Finding 6, `--deadline` (its timer requests the round's stop): the wait of the next
    round's recovery (a real `time.sleep` of 30 s on the old code) ends when the deadline
    passes, 0.2 s in; the round ends interrupted (its record says so), the dead round
    keeps its STOP and gets no record. Deterministic: the old code sleeps the 30 s out and
    records the dead round (the assertion fails, not a timer)."""
    root = tmp_path / "s"
    prefix = _dead_round(root, 30.0)
    s = run_gc(lambda: None, local_spec(root), GcOptions(deadline_s=0.2), clock=time.time)
    assert s.interrupted == "deadline", s
    recorded = [r["recovered_by"] for r in _records(root) if r.get("recovered_by")]
    assert not recorded and not s.recovered, (
        f"the deadline passed during the recovery's wait, and the dead round was recorded "
        f"by {recorded}")
    assert LocalStore(root).head(prefix + STOP) is not None
