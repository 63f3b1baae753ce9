"""A closed stdout is never by itself a failure of work that was done (newuser3 N2).

Every command here runs with its stdout the write end of a pipe whose read end is closed
before it starts (`| true` that has already exited): every write it makes to stdout fails
with EPIPE, deterministically. A command whose work was done exits with that work's code
and says nothing about the pipe; one whose output is its work (replay, consume, cluster
status, gc --list -, gc-admin show) exits 1, quietly. On the old code every one exited 1.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from epochgc.impl.gc.lease import LEASE_KEY
from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key
from tests.gc.helpers import (
    HOUR,
    NOW,
    all_keys,
    lease_of_a_dead_driver,
    put_local,
    simple_cluster,
    write_partitions,
)

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def _closed(*argv: str, cwd: Path | None = None) -> tuple[int, str]:
    """(exit code, stderr) of `epochgc ARGV` writing into a pipe nobody reads."""
    r, w = os.pipe()
    os.close(r)
    try:
        proc = subprocess.run([sys.executable, "-m", "epochgc", *argv], stdout=w,
                              stderr=subprocess.PIPE, text=True, timeout=600, env=ENV,
                              cwd=cwd)
    finally:
        os.close(w)
    assert "Traceback" not in proc.stderr and "Broken pipe" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stderr


FULL = "/dev/full"


def _full(*argv: str) -> tuple[int, str]:
    """(exit code, stderr) of `epochgc ARGV > /dev/full`: every write to stdout fails with
    ENOSPC (Linux's null(4): "Writes to /dev/full fail with an ENOSPC error")."""
    if not os.path.exists(FULL):
        pytest.skip(f"{FULL} is absent")
    with open(FULL, "w") as full:
        proc = subprocess.run([sys.executable, "-m", "epochgc", *argv], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=600, env=ENV)
    return proc.returncode, proc.stderr


def no_space(command: str | None) -> str:
    """The line for a stdout on a full device: every command's error line (impl/errorline.py;
    it was "epochgc: cannot write to stdout: ...", no command, no "error")."""
    who = f"epochgc {command}" if command else "epochgc"
    return f"{who}: error: cannot write to stdout: No space left on device\n"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A one-node cluster, started and stopped with stdout on a full device: newuser14 R3,
    each line said only "cannot write to stdout" (old code), read as a start or stop that
    failed; now it says what was done."""
    d = tmp_path_factory.mktemp("cluster")
    code, err = _full("cluster", "start", "--data-dir", str(d / "c"), "--store",
                      str(d / "store"), "--nodes", "1", "--partitions", "t/0")
    try:
        assert (code, err) == (1, no_space("cluster start")[:-1] + "; the cluster is running "
                               f"(1 node(s), started node(s) 1): every partition has a leader "
                               f"({d / 'c'})\n"), err
        yield d / "c"
    finally:  # stopped whatever the start said
        stopped = _full("cluster", "stop", "--data-dir", str(d / "c"))
    assert stopped == (1, no_space("cluster stop")[:-1] + "; stopped node(s) 1\n")


def _acked(cluster_dir: Path) -> int:
    f = cluster_dir / "acked.jsonl"
    lines = f.read_text().splitlines() if f.exists() else []
    return sum(json.loads(line)["count"] for line in lines)


def test_cluster_commands_whose_work_was_done_exit_0(cluster: Path) -> None:
    before = _acked(cluster)
    code, err = _closed("produce", "--data-dir", str(cluster), "--partition", "t/0",
                        "--count", "10")
    assert code == 0, err  # old code: 1, with the 10 records acknowledged
    assert _acked(cluster) == before + 10
    code, err = _closed("topic", "create", "zz", "--partitions", "1", "--data-dir",
                        str(cluster))
    assert code == 0, err  # old code: 1, with the topic created
    again = subprocess.run([sys.executable, "-m", "epochgc", "topic", "create", "zz",
                            "--partitions", "1", "--data-dir", str(cluster)],
                           capture_output=True, text=True, timeout=300, env=ENV)
    assert "already exists" in again.stderr, again.stderr  # it was created
    # Output that is the work, cut short: 1, quietly.
    assert _closed("consume", "--data-dir", str(cluster), "--partition", "t/0") == (1, "")
    assert _closed("cluster", "status", "--data-dir", str(cluster), "--json")[0] == 1


def test_cluster_commands_writing_to_a_full_device_fail_in_one_line(cluster: Path) -> None:
    """newuser8 I6: `> /dev/full` gave "Error: OSError: [Errno 28] ...", a traceback from
    closedout.py and exit 120 (not in the table), for every command. Now: one line, 1."""
    before = _acked(cluster)
    # newuser11 M9: the line says what was done (a bare "cannot write" read as "nothing
    # happened": a re-run duplicated the records, a topic create found it there).
    assert _full("produce", "--data-dir", str(cluster), "--partition", "t/0",
                 "--count", "10", "--batch", "4") == (
        1, no_space("produce")[:-1]
        + f"; 10 record(s) were acknowledged ({cluster / 'acked.jsonl'})\n")
    assert _acked(cluster) == before + 10  # the work was done; its report was lost
    for verb, past in (("create", "created"), ("delete", "deleted")):
        extra = ("--partitions", "1") if verb == "create" else ()
        assert _full("topic", verb, "yy", *extra, "--data-dir", str(cluster)) == (
            1, no_space(f"topic {verb}")[:-1] + f"; topic yy was {past}\n")
    # newuser12 P4: old code said the line alone for the barrier, which changes every
    # partition (as for the commands above, the line says what was done).
    code, err = _full("barrier", "--data-dir", str(cluster))
    assert code == 1 and re.fullmatch(
        re.escape(no_space("barrier")[:-1])
        + r"; the barrier was written \(candidate \d+\): (\d+) of "
        r"\1 partition\(s\) applied it\n", err), err
    assert _full("consume", "--data-dir", str(cluster), "--partition", "t/0") == (
        1, no_space("consume"))
    assert _full("cluster", "status", "--data-dir", str(cluster), "--json") == (
        1, no_space("cluster status"))


@pytest.mark.parametrize("argv", [("--help",), ("--version",), ("gc", "--help")])
def test_help_and_version_into_a_closed_pipe_or_a_full_device(argv: tuple[str, ...]) -> None:
    """newuser8 J1: `epochgc --help > /dev/full` and `--version` printed a 38-line click
    traceback and exited 1; `epochgc --help | true` exited 1 where `gc --help | true` 0."""
    assert _closed(*argv) == (0, "")
    code, err = _full(*argv)
    assert (code, err) == (1, no_space("gc" if argv[0] == "gc" else None)), err


def test_replay_cut_short_exits_1_quietly() -> None:
    vectors = ROOT / "spec" / "vectors" / "fence-window-reference.jsonl"
    assert _closed("replay", str(vectors)) == (1, "")
    # newuser8 I6: 120, a traceback
    assert _full("replay", str(vectors)) == (1, no_space("replay"))
    assert _full("conform", "--vectors", "--", sys.executable, "-m",
                 "epochgc.model.port") == (1, no_space("conform"))


def _store(root: Path) -> set[str]:
    simple_cluster(LocalStore(root, create=True), 100)
    eligible = {format_key(p, 50, f"k{p}") for p in range(0, 1000, 250)}
    for key in eligible:
        put_local(root, key, age=12 * HOUR + 60)
    return eligible


def test_gc_admin_commands_whose_work_was_done_exit_0(tmp_path: Path) -> None:
    root = tmp_path / "store"
    simple_cluster(LocalStore(root, create=True), 100, now=time.time())  # fresh reports
    assert _closed("gc-admin", "show", "--store", str(root)) == (1, "")  # cut short
    code, err = _closed("gc-admin", "pause", "--store", str(root), "--reason", "pipe")
    assert code == 0, err  # old code: 1, with the store paused
    # A code that is not 0 already says the work did not simply succeed: it stands.
    assert _closed("gc-admin", "show", "--store", str(root)) == (3, "")
    # newuser17 T6: but a report that could not be written was not given: 1, not the 3
    # (or 2, blocked) it would have said (old code: 3).
    assert _full("gc-admin", "show", "--store", str(root)) == (1, no_space("gc-admin show"))
    shown = subprocess.run([sys.executable, "-m", "epochgc", "gc-admin", "show", "--store",
                            str(root), "--json"], capture_output=True, text=True,
                           timeout=300, env=ENV)
    assert shown.returncode == 3 and json.loads(shown.stdout)["paused"], shown.stdout
    code, err = _closed("gc-admin", "resume", "--store", str(root))
    assert code == 0, err
    # newuser8 I6: each gave a traceback and 120 into /dev/full.
    show = no_space("gc-admin show")
    assert _full("gc-admin", "show", "--store", str(root)) == (1, show)
    assert _full("gc-admin", "show", "--store", str(root), "--json") == (1, show)
    assert _full("gc-admin", "pause", "--store", str(root), "--json") == (
        1, no_space("gc-admin pause")[:-1] + "; the pause was written\n")  # newuser11 M9
    assert _full("gc-admin", "start", "--store", str(root)) == (
        1, no_space("gc-admin start")[:-1] + "; the resume was written: GC runs again\n")
    # nothing done
    assert _full("gc-admin", "start", "--store", str(root)) == (1, no_space("gc-admin start"))


def test_gc_admin_reset_and_expire_to_a_full_device_say_what_they_removed(
        tmp_path: Path) -> None:
    """newuser14 R3: `reset --force` and `expire --apply` into /dev/full said only "cannot
    write to stdout" (old code) after removing the lease, or rounds."""
    root = tmp_path / "store"
    simple_cluster(LocalStore(root, create=True), 100, now=time.time())
    lease_of_a_dead_driver(root, "20261130T170000.000Z-deadbeef")
    code, err = _full("gc-admin", "reset", "--store", str(root), "--force")
    assert code == 1 and err.endswith(
        no_space("gc-admin reset")[:-1] + f"; removed {LEASE_KEY}; round "
        "20261130T170000.000Z-deadbeef, which held it, ended before its deletion journal "
        "started: nothing was deleted, and there is no record to write (a dead round is "
        "recorded from its journal)\n"), err
    for argv in (("gc-admin", "pause"), ("gc",)):  # a refused round (paused): its record
        subprocess.run([sys.executable, "-m", "epochgc", *argv, "--store", str(root)],
                       env=ENV, capture_output=True, timeout=300)
    assert len(_rounds(root)) == 1
    code, err = _full("gc-admin", "expire", "--store", str(root), "--older-than", "0s",
                      "--apply")
    assert code == 1 and re.search(re.escape(no_space("gc-admin expire")[:-1])
                                   + r"; removed 1 round\(s\) \(\d+ object\(s\), [\d,]+ "
                                   r"bytes\)\n\Z", err), err
    assert _rounds(root) == []


def _gc_args(root: Path) -> tuple[str, ...]:
    return ("--store", str(root), "--now", str(NOW), "--i-know-now-is-ahead", "--tasks", "1")


@pytest.mark.spark
@pytest.mark.skipif(os.environ.get("EPOCHGC_SIGNALS") != "full",
                    reason="EPOCHGC_SIGNALS=full: one more Spark start-up (~20 s)")
def test_a_dry_runs_list_cut_short_exits_1(tmp_path: Path) -> None:
    """A dry run's --list - is its work: cut short, 1."""
    root = tmp_path / "store"
    eligible = _store(root)
    code, err = _closed("gc", *_gc_args(root), "--dry-run", "--list", "-")
    assert code == 1, err
    assert all_keys(LocalStore(root)) >= eligible


@pytest.mark.spark
def test_gc_exits_with_its_records_code(tmp_path: Path) -> None:
    root = tmp_path / "store"
    eligible = _store(root)
    common = _gc_args(root)
    # A round's deletes are its work: its record and its exit code say done, 0.
    code, err = _closed("gc", *common, "--json")
    assert code == 0, err  # old code: 1, with the record saying done, exit code 0
    store = LocalStore(root)
    assert not eligible & all_keys(store)
    [rec] = [json.loads(store.get(o.key)) for o in store.list_all(ROUNDS_PREFIX)]
    assert (rec["outcome"], rec["exit_code"]) == ("done", 0), rec


def _record_line(command: str, did: str) -> str:
    """The full-device line of a round that ended as `did` says, naming its record."""
    return (re.escape(no_space(command)[:-1]) + f"; {did}; record "
            r"(_cluster/gc/rounds/[0-9TZ.]+-[0-9a-f]{8}\.json)\n")


def _rounds(root: Path) -> list[str]:
    store = LocalStore(root)
    return [o.key for o in store.list_all(ROUNDS_PREFIX)]


def test_gc_to_a_full_device_says_how_the_round_ended(tmp_path: Path) -> None:
    """newuser14 R3: `gc --json > /dev/full` said only "cannot write to stdout", not that
    the round had run and what it did (old code: the line alone, here too). A paused store
    refuses the round (3) and a store without M blocks it (2), each with a record and no
    Spark: the line names the outcome, the keys deleted and the record."""
    root = tmp_path / "store"
    simple_cluster(LocalStore(root, create=True), 100, now=time.time())
    subprocess.run([sys.executable, "-m", "epochgc", "gc-admin", "pause", "--store",
                    str(root)], env=ENV, check=True, capture_output=True, timeout=300)
    code, err = _full("gc", "--store", str(root), "--json")
    last = err.splitlines(keepends=True)[-1]
    m = re.fullmatch(_record_line("gc", "the round ended paused: nothing deleted"), last)
    assert code == 3 and m, err
    assert _rounds(root) == [m[1]]  # the record it names is the store's
    bare = tmp_path / "bare"
    store = LocalStore(bare, create=True)
    write_partitions(store, 10**6, ["t/0"])  # no report: no M, blocked
    code, err = _full("gc", "--store", str(bare))
    last = err.splitlines(keepends=True)[-1]
    m = re.fullmatch(_record_line("gc", "the round ended blocked: nothing deleted"), last)
    assert code == 2 and m, err
    assert _rounds(bare) == [m[1]]


@pytest.mark.spark
@pytest.mark.skipif(os.environ.get("EPOCHGC_SIGNALS") != "full",
                    reason="EPOCHGC_SIGNALS=full: one more Spark start-up (~20 s)")
def test_gc_round_done_to_a_full_device_says_what_it_deleted(tmp_path: Path) -> None:
    """newuser14 R3 as the tester saw it: a round that deleted its keys and recorded `done`
    exits 1 (its output lost), its line naming what it did."""
    root = tmp_path / "store"
    eligible = _store(root)
    code, err = _full("gc", *_gc_args(root), "--json", "-q")
    m = re.fullmatch(_record_line("gc", f"the round ended done: {len(eligible)} key\\(s\\) "
                                  "deleted"), err)
    assert code == 1 and m, err
    assert not eligible & all_keys(LocalStore(root))
    [key] = _rounds(root)
    assert key == m[1]
    rec = json.loads(LocalStore(root).get(key))
    assert (rec["outcome"], rec["exit_code"], rec["counts"]["deleted"]) == (
        "done", 0, len(eligible))


def test_gc_package_to_a_full_device_says_the_package_was_written(tmp_path: Path) -> None:
    """newuser13 Q9: `gc-package --out pkg > /dev/full` said only that it could not write,
    exit 1, while the package was written: a re-run then replaced it unasked. Now the line
    says it."""
    pkg = tmp_path / "pkg"
    code, err = _full("gc-package", "--out", str(pkg))
    assert (code, err) == (1, no_space("gc-package")[:-1] + "; the package was written: "
                           f"{pkg / 'epochgc.zip'} and {pkg / 'epochgc_gc_submit.py'}\n")
    assert (pkg / "epochgc.zip").stat().st_size > 0
