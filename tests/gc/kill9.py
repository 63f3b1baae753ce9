"""Kill -9 at a chosen step of a real GC round (issue 38, "kill -9 at every step of a
round"), and the check that every record stays true.

One case: a real `epochgc gc` process (local master `local[2]`: its own JVM and Python
workers) on a local store with 8 eligible keys in 2 tasks, batches of 1 (8 batches; a
task's 4 batches are groups of 1 and 3, `delete.group_sizes`: 2 intents and 2 outcomes, and
a kill can land between an intent's requests), plus keys it must keep (too young, above
M, malformed). `impl/gc/killpoint.py` holds the process that reaches the chosen step for
the n-th time; the test sends SIGKILL to the driver or to
that Spark worker, lets the held process go on (if alive), and waits until every process of
the round has exited. Then the next round runs (a real Spark session) after the operator's
`gc-admin reset --force` or after the dead driver's lease ran out, and the check: the
records' deleted and gone-unattributed counts add up to exactly the keys that left the
store, each record's counts are the sizes of the key sets its journal names and no key is
in two, every key a record counts deleted is one a journaled answer of its round's requests
said deleted (review rev38v finding 3: a key found absent with no answer recorded is gone
unattributed), and nothing outside eligibility left the store.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.journal import read_journal
from epochgc.impl.gc.killpoint import KILLPOINT_ENV
from epochgc.impl.gc.lease import LEASE_KEY
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.proctree import alive, descendants
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key
from tests.gc.helpers import HOUR, NOW, all_keys, local_spec, put_local, simple_cluster

ROOT = Path(__file__).resolve().parents[2]
GRACE = 12 * HOUR
LIMIT_S = 300.0  # a bound for a hung process, not a timing assumption
BATCHES = 4  # the points' n: 4 intents and outcomes in the round, of its 8 requests
DRIVER_POINTS = ["start-written"] + [
    f"{p}:{n}" for n in range(1, BATCHES + 1)
    for p in ("intent-written", "batch-deleted", "done-written")
] + ["end-written", "record-written"]
EXECUTOR_POINTS = [f"{p}:{n}" for n in range(1, BATCHES + 1)
                   for p in ("intent-written", "batch-deleted", "done-written")]
# Every step of the round, driver and executor: 15 + 12 = 27 kill points.
ALL_CASES = [("driver", p) for p in DRIVER_POINTS] + [("executor", p) for p in EXECUTOR_POINTS]
# A round of twice the keys (2 a partition): a task's 8 batches are groups of 1, 3 and 4
# (`delete.group_sizes`), and the round's 14th request is at least the 6th of the task that
# sends it (the other sent at most 8): a kill inside a group of 4, with its later batches
# journaled and not sent (review rev38v: the 27 points above reach the first two groups
# only).
LARGE_KEYS = 2
LARGE_CASES = [("driver", "batch-deleted:14"), ("executor", "batch-deleted:14")]


@dataclass(frozen=True)
class Outcome:
    eligible: set[str]
    kept: set[str]
    gone: set[str]
    records: list[dict[str, Any]]
    returncode: int


def build(root: Path, keys_a_partition: int = 1) -> tuple[set[str], set[str]]:
    """(eligible keys, keys the round must keep) in a fresh store with M = 100: 8
    partitions, `keys_a_partition` eligible keys each."""
    simple_cluster(LocalStore(root, create=True), 100)
    partitions = (1, 2, 3, 4, 501, 502, 503, 504)
    eligible = {format_key(partitions[i % 8], 50, f"k{i}")
                for i in range(8 * keys_a_partition)}
    for k in eligible:
        put_local(root, k, age=GRACE + 60)
    kept = {format_key(1, 60, "young"), format_key(501, 150, "above-m"),
            "level_zero/data/002/000000000000000050/bad name"}
    put_local(root, format_key(1, 60, "young"), age=HOUR)
    put_local(root, format_key(501, 150, "above-m"), age=GRACE + 60)
    put_local(root, "level_zero/data/002/000000000000000050/bad name", age=GRACE + 60)
    return eligible, kept


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _live(tracked: list[int]) -> list[int]:
    """The tracked processes still running, and every process below them."""
    live = [p for p in tracked if alive(p)]
    return live + [d for p in live for d in descendants(p)]


def kill_round(root: Path, work: Path, who: str, point: str, master: str = "local[2]") -> int:
    """Run a round, SIGKILL `who` ("driver" or "executor") when `point` ("name" or
    "name:n") is reached; returns the round process's exit status once every process of
    the round has exited. `master`: `local[2,3]` lets Spark retry a failed task."""
    name, _, n = point.partition(":")
    hold = work / "hold"
    hold.mkdir()
    (hold / "target").write_text(f"{name} {n or 1}")
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{KILLPOINT_ENV: str(hold)})
    cmd = [sys.executable, "-m", "epochgc.impl.gc", "--store", str(root), "--now", str(NOW),
           "--i-know-now-is-ahead", "--master", master, "--tasks", "2",
           "--delete-batch-size", "1", "--skip-malformed", "-q", "--json"]
    with open(work / "stderr", "w") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + LIMIT_S
        while not (hold / "reached").exists():
            assert proc.poll() is None, (work / "stderr").read_text()[-3000:]
            assert time.monotonic() < deadline, "the round never reached the kill point"
            time.sleep(0.02)
        held = int((hold / "reached").read_text())
        # The round's JVM runs in its own session (impl/gc/session.py), its Python workers
        # below it: not in the driver's process group, so tracked by pid.
        tracked = descendants(proc.pid)
        if who == "driver":
            os.kill(proc.pid, signal.SIGKILL)
        else:
            assert held != proc.pid, "the point was reached in the driver, not a worker"
            os.kill(held, signal.SIGKILL)
        (hold / "release").touch()
        proc.wait(timeout=LIMIT_S)  # reaped: a zombie still counts in its process group
        # The JVM and the Python workers, once orphaned (the JVM ends at EOF on its stdin,
        # the dead driver's pipe), and what they started meanwhile.
        while _group_alive(proc.pid) or _live(tracked):
            assert time.monotonic() < deadline, "the round's processes never exited"
            time.sleep(0.05)
    finally:
        if _group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in _live(tracked):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    return proc.returncode


def next_round(spark: Any, root: Path, via_reset: bool) -> None:
    """The next round, after an operator's `gc-admin reset --force` (the holder is known
    dead) or once the dead driver's lease ran out (its expiry rewritten into the past)."""
    store = LocalStore(root)
    if via_reset:
        r = CliRunner().invoke(main, ["gc-admin", "reset", "--store", str(root), "--force"])
        assert r.exit_code == 0, r.output
    elif store.head(LEASE_KEY) is not None:
        doc = json.loads(store.get(LEASE_KEY))
        store.put(LEASE_KEY, json.dumps({**doc, "expires_at": 1}).encode())
    s = run_gc(spark, local_spec(root), GcOptions(tasks=2, skip_malformed=True),
               clock=lambda: NOW)
    assert s.outcome == "done", s


@dataclass(frozen=True)
class Named:
    """What a journal's read-back names: keys deleted (by answers) and gone unattributed."""

    deleted: frozenset[str]
    gone_unattributed: frozenset[str]

    @classmethod
    def of(cls, store: LocalStore, prefix: str) -> Named:
        t = read_journal(store, prefix)
        return cls(frozenset(t.deleted), frozenset(t.gone_unattributed))


def journals_now(root: Path) -> dict[str, Named]:
    """What each journal names, read back against the store as it is now (right after the
    killed round, before the next one runs: an intent without its `done` is resolved by
    asking the store, and the next round deletes what the dead one did not)."""
    store = LocalStore(root)
    rounds = {o.key.split("/")[3] for o in store.list_all("_cluster/gc/journal/")}
    return {p: Named.of(store, p) for p in (f"_cluster/gc/journal/{r}/" for r in rounds)}


def answered_deleted(store: LocalStore, prefix: str) -> set[str]:
    """The keys a journaled answer says the round's requests deleted, read straight from
    the journal's entries (not through `read_journal`, whose attribution is what is
    checked): each intent's keys whose outcome (a `done` entry, or one carried in a later
    intent's `"done"`) names them neither gone, changed nor failed (a group's answer so far
    lists its unanswered batches' keys as errors)."""
    intents: dict[str, list[str]] = {}
    outcomes: dict[str, list[dict[str, Any]]] = {}
    for o in store.list_all(prefix):
        attempt, _, name = o.key[len(prefix):].rpartition("/")
        if not attempt:
            continue
        doc = json.loads(store.get(o.key))
        seq = name.split(".")[0]
        if name.endswith(".intent.json"):
            intents[f"{attempt}/{seq}"] = doc["keys"]
            for n, carried in doc.get("done", {}).items():
                outcomes.setdefault(f"{attempt}/{n}", []).append(carried)
        elif name.endswith(".done.json"):
            outcomes.setdefault(f"{attempt}/{seq}", []).append(doc)
    out: set[str] = set()
    for batch, docs in outcomes.items():
        for doc in docs:
            not_deleted = {*doc["gone"], *doc["changed"], *doc["errors"]}
            out |= {k for k in intents.get(batch, []) if k not in not_deleted}
    return out


def check(root: Path, eligible: set[str], kept: set[str],
          before: dict[str, Named]) -> list[str]:
    """What is false about the records (empty: all true). `before`: `journals_now` taken
    once the killed round's processes were gone, the store its record is true of."""
    store = LocalStore(root)
    left = all_keys(store)
    gone = (eligible | kept) - left
    wrong: list[str] = []
    if not kept <= left:
        wrong.append(f"deleted outside eligibility: {sorted(kept - left)}")
    if gone != eligible:
        wrong.append(f"eligible keys left after the next round: {sorted(eligible - gone)}")
    seen: set[str] = set()
    total = 0
    for o in store.list_all(ROUNDS_PREFIX):
        rec = json.loads(store.get(o.key))
        counted = rec["counts"]["deleted"]
        unattributed = rec["counts"].get("gone_unattributed", 0)
        total += counted + unattributed
        if rec.get("journal") is None:
            if counted or unattributed:
                wrong.append(f"{o.key}: {counted} deleted, {unattributed} gone without a "
                             "journal")
            continue
        named = before.get(rec["journal"])
        if named is None:  # the next round's
            named = Named.of(store, rec["journal"])
        if (len(named.deleted), len(named.gone_unattributed)) != (counted, unattributed):
            wrong.append(f"{o.key} ({rec['outcome']}): deleted {counted}, gone unattributed "
                         f"{unattributed}; its journal names {len(named.deleted)}, "
                         f"{len(named.gone_unattributed)}")
        claimed = named.deleted - answered_deleted(store, rec["journal"])
        if claimed:
            wrong.append(f"{o.key} ({rec['outcome']}): counted deleted by the round though no "
                         f"journaled answer says so: {sorted(claimed)}")
        both = named.deleted | named.gone_unattributed
        if both & seen or named.deleted & named.gone_unattributed:
            wrong.append(f"{o.key}: keys counted twice: "
                         f"{sorted(both & seen | named.deleted & named.gone_unattributed)}")
        seen |= both
    if total != len(gone):
        wrong.append(f"records say {total} deleted or gone unattributed, {len(gone)} left "
                     "the store")
    if seen != gone:
        wrong.append(f"keys gone but in no record: {sorted(gone - seen)}; "
                     f"in a record but not gone: {sorted(seen - gone)}")
    return wrong


def largest_intent(root: Path) -> int:
    """The most batches one intent of any journal in the store names (`"batches"`)."""
    store = LocalStore(root)
    return max((json.loads(store.get(o.key)).get("batches", 1)
                for o in store.list_all("_cluster/gc/journal/")
                if o.key.endswith(".intent.json")), default=0)
