"""Issue 29 item 2: SIGINT and SIGTERM sent to a real `epochgc gc` process mid-round stop it
gracefully: the batch in flight finishes and is journaled, END and the record say
`interrupted`, the exit code they say is 128 + the signal (the process ends by the signal:
tests/interrupted.py), and --json and the metrics are written.

Deterministic, not sleep-and-hope: with `EPOCHGC_GC_TEST_PAUSE` set, the round's first
journaled batch creates `<path>.reached` and waits for the round's STOP marker; the test
signals the process only once that file exists, so the signal always lands mid-round, after
exactly one batch of 2 keys was deleted, with the task holding its next batch back.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from epochgc.impl.gc.journal import END, read_journal
from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key
from tests.gc.helpers import (
    HOUR,
    NOW,
    REACH_LIMIT_S,
    all_keys,
    put_local,
    round_held_at_first_batch,
    simple_cluster,
)
from tests.interrupted import by_signal

ROOT = Path(__file__).resolve().parents[2]
GRACE = 12 * HOUR


@pytest.mark.spark
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_mid_round_stops_it_gracefully(tmp_path: Path, sig: int, code: int) -> None:
    # The found defect: Ctrl-C after deletes left a record saying `done`, exit 0, deleted
    # 0, a traceback and no JSON; SIGTERM left no record at all.
    root = tmp_path / "store"
    simple_cluster(LocalStore(root, create=True), 100)
    eligible = {format_key(p, 50, f"k{p}") for p in range(0, 1000, 50)}
    for key in eligible:
        put_local(root, key, age=GRACE + 60)
    pause, metrics = tmp_path / "pause", tmp_path / "gc.prom"
    args = ["--now", str(NOW), "--i-know-now-is-ahead", "--tasks", "1",
            "--delete-batch-size", "2", "--delete-concurrency", "1", "--json", "-q",
            "--metrics-file", str(metrics)]
    returncode, out, err = round_held_at_first_batch(
        root, pause, args, lambda proc: proc.send_signal(sig))
    assert returncode == by_signal(sig), err[-3000:]  # the record says `code`
    assert "Traceback" not in err, err[-3000:]
    doc = json.loads(out.strip().splitlines()[-1])
    gone = eligible - all_keys(LocalStore(root))
    assert doc["outcome"] == "interrupted" and doc["interrupted"] == signal.Signals(sig).name
    assert doc["deleted"] == len(gone) == 2, doc  # the one batch, journaled; no other
    store = LocalStore(root)
    assert set(read_journal(store, doc["journal"]).deleted) == gone
    end = json.loads(store.get(f"{doc['journal']}{END}"))
    assert end["outcome"] == "interrupted" and end["exit_code"] == code
    [rec] = [json.loads(store.get(o.key)) for o in store.list_all(ROUNDS_PREFIX)]
    assert rec["outcome"] == "interrupted" and rec["counts"]["deleted"] == 2
    gauges = {s.name: s.value for f in text_string_to_metric_families(metrics.read_text())
              for s in f.samples if not s.labels}
    assert gauges["epochgc_gc_round_exit_code"] == code
    # Issue 41 item 3: the listing counts of a stopped round are marked partial (record,
    # --json, metrics) and never below what the journal proves; stderr's last `gc:` line
    # says "interrupted", not a success-looking `gc: listed N keys, ...`.
    assert doc["listing_complete"] is False and rec["listing_complete"] is False
    assert doc["listed"] >= doc["eligible"] >= doc["deleted"]
    assert rec["counts"]["listed"] >= rec["counts"]["eligible"] >= rec["counts"]["deleted"]
    assert gauges["epochgc_gc_listing_complete"] == 0
    # newuser15 S5: stderr's last line is the documented shape, what was done in it.
    name = signal.Signals(sig).name
    assert err.splitlines()[-1].startswith(
        f"epochgc gc: interrupted by {name}: the round stopped after deleting 2 key(s)"), \
        err[-2000:]


def test_a_round_interrupted_before_its_journal_says_nothing_was_deleted() -> None:
    """Issue 41 item 2: a signal before any task (Spark still starting) printed
    `... after deleting 0 key(s); the rest are listed again next round (journal: None)`."""
    from epochgc.impl.gc.summary import GcSummary

    [line] = GcSummary(M=100, interrupted="SIGINT").lines()
    # newuser15 S5: a signal's line is the documented shape (it was "gc: round
    # interrupted (SIGINT) before any delete; ...").
    assert line == ("epochgc gc: interrupted by SIGINT: the round stopped before any delete; "
                    "nothing was deleted")
    # A stopped round never claims a whole listing (job.py), except one that had finished
    # before it saw its lease gone (newuser8 I1).
    [line] = GcSummary(M=100, interrupted="SIGTERM", journal="j/", deleted=2,
                       listing_complete=False).lines()
    assert "after deleting 2 key(s)" in line and "(journal: j/)" in line
    [line] = GcSummary(M=100, interrupted="lease-lost", journal="j/", deleted=2).lines()
    assert "listed everything and deleted 2 key(s)" in line and "the rest" not in line


def test_partial_listing_counts_are_raised_to_what_the_journal_proves() -> None:
    """Issue 41 item 3, the tester's SIGTERM record: listed 12585, eligible 12585, deleted
    14585 (the listing counts of the tasks that returned; deleted from the journal)."""
    from epochgc.impl.gc.journal import JournalTotals
    from epochgc.impl.gc.stage import partial_listing
    from epochgc.impl.gc.summary import GcSummary

    totals = JournalTotals(deleted={f"k{i}": (100, 1.0) for i in range(14585)},
                           already_gone={"g1", "k0"}, changed={"c1"}, errors={"e1": "x"})
    s = GcSummary(listed=12585, fetched=12585, eligible=12585, eligible_bytes=1258500,
                  deleted=14585, bytes_deleted=1458500)
    partial_listing(s, totals)
    assert not s.listing_complete
    assert s.eligible == 14585 + 3  # k0 counted once
    assert s.listed == s.fetched == s.eligible and s.eligible_bytes == 1458500


@pytest.mark.spark
def test_a_second_signal_mid_round_prints_one_line_and_no_traceback(tmp_path: Path) -> None:
    """Issue 41 item 3: a second Ctrl-C while the driver waited in the stage printed py4j's
    `ERROR:root:KeyboardInterrupt while sending command` and its tracebacks. The second
    signal is sent once the first one's STOP marker exists (the handler ran)."""
    root = tmp_path / "store"
    simple_cluster(LocalStore(root, create=True), 100)
    for p in range(0, 1000, 50):
        put_local(root, format_key(p, 50, f"k{p}"), age=GRACE + 60)
    args = ["--now", str(NOW), "--i-know-now-is-ahead", "--tasks", "1",
            "--delete-batch-size", "2", "--delete-concurrency", "1", "--json", "-q"]

    def twice(proc: subprocess.Popen[str]) -> None:
        proc.send_signal(signal.SIGINT)
        limit = time.monotonic() + REACH_LIMIT_S
        while not list(root.glob("_cluster/gc/journal/*/STOP")):
            assert time.monotonic() < limit, "no STOP marker after the first signal"
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)

    returncode, out, err = round_held_at_first_batch(root, tmp_path / "pause", args, twice)
    assert returncode == by_signal(signal.SIGINT), err[-3000:]
    assert "Traceback" not in err and "ERROR:" not in err, err[-3000:]
    # newuser3 N1: the summary, the record and the lease are the round's own.
    assert "nothing was deleted" not in err and "2 key(s) were deleted" in err, err[-3000:]
    # newuser11 M8: "epochgc gc: error: KeyboardInterrupt: SIGINT again; ..." read as a crash.
    # newuser15 S5: the last line is every signalled command's shape.
    assert "KeyboardInterrupt" not in err, err[-3000:]
    assert err.splitlines()[-1].startswith(
        "epochgc gc: interrupted by SIGINT: SIGINT again: stopped at once; 2 key(s) were "
        "deleted (journal "), err[-3000:]
    doc = json.loads(out.strip().splitlines()[-1])
    assert (doc["deleted"], doc["listing_complete"]) == (2, False) and doc["record"], doc
    from epochgc.impl.gc.lease import LEASE_KEY
    assert json.loads(LocalStore(root).get(LEASE_KEY))["expires_at"] == 0


@pytest.mark.spark
@pytest.mark.parametrize("point", ["end-written", "lease-releasing"])
def test_a_second_signal_while_the_round_finishes_leaves_its_record_and_lease(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str) -> None:
    """newuser3 N1: a second Ctrl-C just after "gc: round interrupted ..." raised
    KeyboardInterrupt wherever the driver was: between END and the record (no record; later
    recovered as `killed`, 137), or inside the lease's release (the lease stayed live and
    refused rounds for 10 minutes); the summary was a blank one ("nothing was deleted",
    deleted 0, record null). The driver is held at `point` (impl/gc/killpoint.py) when the
    second signal comes, so it lands there every time."""
    from epochgc.impl.gc.killpoint import KILLPOINT_ENV
    from epochgc.impl.gc.lease import LEASE_KEY

    root = tmp_path / "store"
    simple_cluster(LocalStore(root, create=True), 100)
    eligible = {format_key(p, 50, f"k{p}") for p in range(0, 1000, 50)}
    for key in eligible:
        put_local(root, key, age=GRACE + 60)
    kp = tmp_path / "kp"
    kp.mkdir()
    (kp / "target").write_text(f"{point} 1")
    monkeypatch.setenv(KILLPOINT_ENV, str(kp))
    args = ["--now", str(NOW), "--i-know-now-is-ahead", "--tasks", "1",
            "--delete-batch-size", "2", "--delete-concurrency", "1", "--json", "-q"]
    seen: list[str] = []

    def twice(proc: subprocess.Popen[str]) -> None:
        proc.send_signal(signal.SIGINT)
        limit = time.monotonic() + REACH_LIMIT_S
        while not (kp / "reached").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < limit, f"the driver never reached {point}"
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        # Released once the second signal was handled: said (fixed), or the process ended
        # (the old code raised KeyboardInterrupt inside the hold).
        assert proc.stderr is not None
        for line in proc.stderr:
            seen.append(line)
            if "again: already stopping" in line:
                break
        (kp / "release").touch()

    returncode, out, err = round_held_at_first_batch(root, tmp_path / "pause", args, twice)
    err = "".join(seen) + err
    assert "Traceback" not in err, err[-3000:]
    assert "nothing was deleted" not in err, err[-3000:]
    assert returncode == by_signal(signal.SIGINT), err[-3000:]
    doc = json.loads(out.strip().splitlines()[-1])
    gone = eligible - all_keys(LocalStore(root))
    assert len(gone) == 2
    assert (doc["outcome"], doc["deleted"], doc["listing_complete"]) == (
        "interrupted", 2, False), doc
    assert doc["record"] is not None, doc
    store = LocalStore(root)
    [rec] = [json.loads(store.get(o.key)) for o in store.list_all(ROUNDS_PREFIX)]
    assert (rec["outcome"], rec["exit_code"], rec["counts"]["deleted"]) == (
        "interrupted", 130, 2), rec
    lease = json.loads(store.get(LEASE_KEY))
    assert lease["expires_at"] == 0 and "released_at" in lease, lease
    assert "gc: SIGINT again: already stopping: writing the round's record" in err, err


def test_a_later_signal_raises_once_and_never_while_the_round_finishes() -> None:
    """The round's handlers (impl/gc/stop.py) on their own, in a fresh process: the first
    SIGINT asks the round to stop; the second raises KeyboardInterrupt once; a third is only
    said; and once the round is finishing (END, record, lease: newuser3 N1) a later one
    never raises."""
    code = textwrap.dedent('''
        import os, signal, sys, threading
        from epochgc.impl.gc.stop import RoundStop, announce, install_signal_handlers
        from epochgc.impl.gc.job import describe
        said = []
        def run(finish_first):
            stop = RoundStop()
            restore = install_signal_handlers(stop)
            announce(stop, lambda line: print(line, file=sys.stderr, flush=True))
            os.kill(os.getpid(), signal.SIGINT)
            assert stop.reason == "SIGINT"
            raised = 0
            for _ in range(2):
                try:
                    if finish_first:
                        with stop.finishing():
                            os.kill(os.getpid(), signal.SIGINT)
                    else:
                        os.kill(os.getpid(), signal.SIGINT)
                except KeyboardInterrupt as e:
                    raised += 1
                    said.append(describe(e))
            for t in threading.enumerate():  # the threads that say it: waited for
                if t.name == "epochgc-stop-again":
                    t.join()
            restore()
            return raised
        print(run(False), run(True))
        print(said, file=sys.stderr)
    ''')
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "0"], (r.stdout, r.stderr)
    assert "gc: SIGINT again: already stopping" in r.stderr, r.stderr
    # newuser11 M8: the round's error (its record's, its last line's) names no Python
    # class (old: "KeyboardInterrupt: SIGINT again").
    assert r.stderr.rstrip().splitlines()[-1] == "['SIGINT again: stopped at once']", r.stderr


def test_a_stop_says_what_a_finishing_dry_run_does() -> None:
    """newuser10 L10: a dry run stopped at its end (`round-over`) said "stopping: writing the
    round's record and releasing its lease": a dry run writes no record and holds no lease
    (issue 29). What a stop does is now said as the round it stops: while it finishes, and
    once it is over (a signal then came after the record, too: "writing" was untrue for
    every round)."""
    from epochgc.impl.gc.stop import RoundStop

    stop = RoundStop()
    with stop.finishing(record=False, lease=False, dry_run=True):
        assert "record" not in stop.means.replace("writes no record", ""), stop.means
        assert "releasing" not in stop.means, stop.means
    assert stop.means.startswith("the dry run is over"), stop.means
    with stop.finishing(record=True, lease=False):
        assert stop.means == "writing the round's record", stop.means  # no lease held
    with stop.finishing():
        assert stop.means == "writing the round's record and releasing its lease"
    assert stop.means == "the round is over; ending", stop.means


def test_a_dry_run_round_leaves_its_stop_saying_it_is_over(tmp_path: Path) -> None:
    """The round's own call: `run_gc` says it is a dry run, holding no lease."""
    from epochgc.impl.gc.job import run_gc
    from epochgc.impl.gc.options import GcOptions
    from epochgc.impl.gc.stop import RoundStop
    from epochgc.impl.store.url import parse_store_url
    from tests.gc.test_list_pipe import _blocked_store

    _blocked_store(tmp_path / "store")  # blocked: no Spark needed to end it
    stop = RoundStop()
    s = run_gc(lambda: None, parse_store_url(str(tmp_path / "store")),
               GcOptions(dry_run=True), clock=lambda: NOW, stop=stop)
    assert s.blocked is not None, s
    assert stop.means.startswith("the dry run is over"), stop.means


@pytest.mark.spark
@pytest.mark.skipif(os.environ.get("EPOCHGC_SIGNALS") != "full",
                    reason="a Spark start-up (~15 s): with the full signal matrix")
def test_a_dry_run_stopped_as_it_ends_says_no_record(tmp_path: Path) -> None:
    """The command: SIGINT at `round-over` of a dry run that listed (old code: "gc: SIGINT:
    stopping: writing the round's record and releasing its lease...")."""
    from epochgc.impl.signals import HOOK_ENV

    root = tmp_path / "store"
    simple_cluster(LocalStore(root, create=True), 100)
    for i in range(20):
        put_local(root, format_key(i * 50, 50, f"k{i}"), age=GRACE + 60)
    r = subprocess.run(
        [sys.executable, "-m", "epochgc", "gc", "--store", str(root), "--now", str(NOW),
         "--i-know-now-is-ahead", "--dry-run", "--tasks", "1"],
        env=dict(os.environ, PYTHONPATH=str(ROOT), **{HOOK_ENV: "round-over:SIGINT"}),
        capture_output=True, text=True, timeout=600)
    assert "test hook: SIGINT at round-over" in r.stderr, r.stderr
    assert "writing the round's record" not in r.stderr, r.stderr
    assert "releasing its lease" not in r.stderr, r.stderr


def test_a_round_a_pause_stopped_says_who_paused_it_and_how_to_resume() -> None:
    """newuser11 M10: the line said only "gc: round interrupted (paused) after deleting N
    key(s)"; the refusal of a new round names who paused, why, and how to resume."""
    from epochgc.impl.gc.admin import AdminState
    from epochgc.impl.gc.summary import GcSummary

    why = AdminState(True, "midround\x1b]0;x\x07", "root@vm").why()
    [line] = GcSummary(M=100, interrupted="paused", journal="j/", deleted=4000, paused=why,
                       listing_complete=False).lines()
    assert line == ("gc: round interrupted (paused) after deleting 4,000 key(s); the rest are "
                    "listed again next round (journal: j/): GC is paused on this store by "
                    "root@vm: midround\\x1b]0;x\\x07 (epochgc gc-admin start resumes it)"), line
    [line] = GcSummary(M=100, interrupted="SIGINT", journal="j/", deleted=2, paused=None,
                       listing_complete=False).lines()
    assert "paused" not in line
