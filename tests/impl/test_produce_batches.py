"""`epochgc produce` in batches (newuser41 item 15: `produce --count 500000` took 6-8 s to
exit after SIGINT/SIGTERM, because it built all 500,000 records of a partition, then one
object, inside the event loop, where the signal waited for the next await). A signal stops
it between batches: what it sends after the signal, and what it says it acknowledged, are
asserted (not how long it takes; the signal matrix bounds that). A real 1-node cluster;
the command signals itself at the named point `acked` (after a batch is recorded)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from epochgc.impl.cluster.local import LocalCluster, _alive
from epochgc.impl.signals import HOOK_ENV
from tests.interrupted import by_signal

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def epochgc(*args: str, hook: str | None = None,
            prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    env = dict(ENV, **{HOOK_ENV: hook}) if hook else ENV
    return subprocess.run([*prefix, sys.executable, "-m", "epochgc", *args], env=env,
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    d = tmp_path_factory.mktemp("produce")
    r = epochgc("cluster", "start", "--data-dir", str(d / "c"), "--store", str(d / "store"),
                "--nodes", "1", "--partitions", "t/0,t/1")
    assert r.returncode == 0, r.stderr
    yield d
    epochgc("cluster", "stop", "--data-dir", str(d / "c"))


def objects(d: Path) -> set[Path]:
    return {p for p in (d / "store" / "level_zero").rglob("*") if p.is_file()}


def manifest(d: Path) -> list[dict[str, object]]:
    path = d / "c" / "acked.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_produce_between_batches(cluster: Path, sig: signal.Signals) -> None:
    """Old code: no batches (`No such option: --batch`); all records in one object, built
    in the event loop before the signal could be handled."""
    objs, runs = objects(cluster), manifest(cluster)
    r = epochgc("produce", "--data-dir", str(cluster / "c"), "--partition", "t/0",
                "--partition", "t/1", "--count", "25", "--batch", "10",
                hook=f"acked:{sig.name}")
    assert r.returncode == by_signal(sig), r.stderr
    # The first batch (10 records of each partition, one object) and nothing after it.
    assert len(objects(cluster) - objs) == 1, "a batch was uploaded after the signal"
    new = manifest(cluster)[len(runs):]
    assert sorted((x["partition"], x["first_seq"], x["count"]) for x in new) == [
        ("t/0", 0, 10), ("t/1", 0, 10)]
    assert len(r.stdout.splitlines()) == 2, r.stdout
    # newuser15 S5: one line, the documented shape, last (it was "produce interrupted:
    # ..." and then a bare "epochgc produce: interrupted by SIGINT").
    last = r.stderr.splitlines()[-1]
    assert last.startswith(f"epochgc produce: interrupted by {sig.name}: 20 of 50 record(s) "
                           "acknowledged and recorded in"), r.stderr
    # newuser11 M4: true whether or not the cluster applied the batch the signal cut.
    assert ("; the batch in flight, if any, was not acknowledged: it may have been applied "
            "(then it is read back); if not, its object is garbage GC collects\n") in r.stderr
    assert "Traceback" not in r.stderr



def test_a_signal_before_the_first_batch_says_nothing_was_sent(cluster: Path) -> None:
    """newuser13 Q9: before its first batch, a signal was said as "interrupted by SIGTERM"
    only, or as "0 of 50 record(s) acknowledged ...; the batch in flight, if any, ..."
    (there was none)."""
    objs, runs = objects(cluster), manifest(cluster)
    r = epochgc("produce", "--data-dir", str(cluster / "c"), "--partition", "t/0",
                "--partition", "t/1", "--count", "25", "--batch", "10", hook="start:SIGTERM")
    assert r.returncode == by_signal(signal.SIGTERM), r.stderr
    assert objects(cluster) == objs and manifest(cluster) == runs
    assert r.stderr.splitlines()[-1] == ("epochgc produce: interrupted by SIGTERM: nothing "
                                         "was sent: none of 50 record(s) acknowledged"), r.stderr
    assert "Traceback" not in r.stderr and "in flight" not in r.stderr, r.stderr


def test_a_signal_as_a_batch_task_ends_stops_produce(cluster: Path) -> None:
    """newuser5 G5: a SIGINT after the batch's last await, in its event loop, was lost: the
    loop stopped before it dispatched the signal, and produce sent every record and exited 0.
    Old code: `assert 0 == 130`, 6 lines (all 3 batches) and no "interrupted" line."""
    objs, runs = objects(cluster), manifest(cluster)
    r = epochgc("produce", "--data-dir", str(cluster / "c"), "--partition", "t/0",
                "--partition", "t/1", "--count", "25", "--batch", "10",
                hook="batch-end:SIGINT")
    assert r.returncode == by_signal(signal.SIGINT), (r.stdout, r.stderr)
    assert len(objects(cluster) - objs) == 1, "a batch was uploaded after the signal"
    assert len(manifest(cluster)) - len(runs) == 2
    assert len(r.stdout.splitlines()) == 2, r.stdout
    assert r.stderr.splitlines()[-1].startswith(
        "epochgc produce: interrupted by SIGINT: 20 of 50 record(s) acknowledged and "
        "recorded in"), r.stderr
    assert "Traceback" not in r.stderr and "never awaited" not in r.stderr, r.stderr

def test_batches_are_consecutive_and_verify(cluster: Path) -> None:
    objs, runs = objects(cluster), manifest(cluster)
    r = epochgc("produce", "--data-dir", str(cluster / "c"), "--partition", "t/0",
                "--count", "25", "--batch", "10")
    assert r.returncode == 0, r.stderr
    assert len(objects(cluster) - objs) == 3
    new = manifest(cluster)[len(runs):]
    assert [(x["first_seq"], x["count"]) for x in new] == [(0, 10), (10, 10), (20, 5)]
    r = epochgc("consume", "--data-dir", str(cluster / "c"), "--partition", "t/0",
                "--partition", "t/1", "--verify")
    assert r.returncode == 0, r.stdout + r.stderr


def test_an_unknown_partition_is_a_usage_error(cluster: Path) -> None:
    """Issue 41 F12: `produce --partition t/99` (no such partition) exited 1; a bad name is
    64 in the exit-code table. Nothing is uploaded or acknowledged."""
    before, acked = objects(cluster), manifest(cluster)
    r = epochgc("produce", "--data-dir", str(cluster / "c"), "--partition", "t/99")
    assert r.returncode == 64, r.stderr
    assert "--partition" in r.stderr and "'t/99' is unknown to the cluster" in r.stderr, r.stderr
    assert objects(cluster) == before and manifest(cluster) == acked


@pytest.mark.parametrize("kind", ["directory", "dev-full"])
def test_a_record_that_cannot_be_appended_is_refused_before_anything_is_sent(
        cluster: Path, kind: str) -> None:
    """newuser18 U2: with acked.jsonl unwritable, `produce` sent the batch, the cluster
    acknowledged it, and only then "could not be recorded in .../acked.jsonl": an orphan
    record per run. Now the file is tried first: refused (64, as `gc --list` on a path it
    cannot write) naming it, no object uploaded. Root ignores permissions, so the file is
    one nobody can append to: a directory, or a symlink to /dev/full (writes fail ENOSPC)."""
    path = cluster / "c" / "acked.jsonl"
    aside = cluster / "acked.aside"
    if path.exists():
        path.rename(aside)
    if kind == "directory":
        path.mkdir()
    else:
        path.symlink_to("/dev/full")
    before = objects(cluster)
    try:
        r = epochgc("produce", "--data-dir", str(cluster / "c"), "--partition", "t/0",
                    "--count", "3")
    finally:
        path.rmdir() if kind == "directory" else path.unlink()
        if aside.exists():
            aside.rename(path)
    assert r.returncode == 64, r.stderr
    [line] = r.stderr.splitlines()
    assert line.startswith(f"epochgc produce: error: {path}: "), line
    assert "nothing was sent" in line, line
    assert r.stdout == "" and objects(cluster) == before


# User nobody (setpriv(1)) keeping only the capabilities that read files (the test's Python
# environment and pytest's directories are root's, 0700), with no_setuid_fixup so access(2)
# keeps them too (capabilities(7)); not CAP_KILL: the kernel refuses the signal to root's
# nodes as to any other user's (kill(2): "EPERM The calling process does not have
# permission to send the signal").
SETPRIV = shutil.which("setpriv")
AS_NOBODY = (SETPRIV or "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
             "--securebits=+no_setuid_fixup", "--inh-caps=+dac_override,+dac_read_search",
             "--ambient-caps=+dac_override,+dac_read_search")


@pytest.mark.skipif(os.geteuid() != 0 or SETPRIV is None,
                    reason="needs root and setpriv(1) to run a command as another user")
def test_a_stop_by_a_user_who_may_not_signal_the_nodes_names_them(cluster: Path) -> None:
    """newuser18 U4: `cluster stop` by a user who may not signal the nodes said "epochgc
    cluster stop: error: Operation not permitted" alone (no node, no pid, nothing of what
    was stopped); `cluster kill` the same. This module's running cluster (a real node,
    root's), the commands run as nobody: each names the node, its pid and its owner, and
    that nothing was stopped, which holds (the node runs, cluster.json still names it)."""
    data = cluster / "c"
    [(nid, pid)] = [(int(n), int(p)) for n, p in LocalCluster(data).meta["pids"].items()]
    r = epochgc("cluster", "stop", "--data-dir", str(data), prefix=AS_NOBODY)
    if "setpriv:" in r.stderr:  # a container that does not let it keep those capabilities
        pytest.skip(f"setpriv cannot run as nobody here: {r.stderr.strip()}")
    why = "Operation not permitted (it runs as user root: run this as that user, or as root)"
    assert (r.returncode, r.stderr.splitlines()) == (1, [
        f"epochgc cluster stop: error: cannot signal node {nid} (pid {pid}): {why}; "
        "nothing stopped"]), r.stderr
    r = epochgc("cluster", "kill", "--data-dir", str(data), str(nid), prefix=AS_NOBODY)
    assert (r.returncode, r.stderr.splitlines()) == (1, [
        f"epochgc cluster kill: error: cannot signal node {nid} (pid {pid}): {why}; "
        "nothing was killed"]), r.stderr
    assert _alive(pid) and LocalCluster(data).meta["pids"] == {str(nid): pid}
