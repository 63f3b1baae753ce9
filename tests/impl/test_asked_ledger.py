"""newuser16 S4: `topic create`s run at once shared the fixed temporary name
`topics-asked.json.tmp`: one renamed the other's file, whose own rename then failed with
ENOENT (exit 1 for a topic that was created, or before its request was sent, leaving an
entry for a topic never made, which failed `cluster status` for good). The ledger is now
changed under a lock, through a unique temporary name; an entry of which nothing exists and
whose command has ended is said by `cluster status`, not counted (test_frozen_node.py)."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

from epochgc.impl.cluster import asked

WRITERS = 6
TOPICS_EACH = 8


def _writer(data_dir: str, w: int, go: multiprocessing.synchronize.Event) -> None:
    go.wait()
    for k in range(TOPICS_EACH):
        asked.begin(data_dir, f"w{w}-{k}", "create", k + 1)
        if k % 2:
            asked.settle(data_dir, f"w{w}-{k}")


def test_concurrent_writers_lose_no_entry_and_fail_none(tmp_path: Path) -> None:
    """Six processes note and settle at once: none fails, no entry is lost or left. Old
    code: ENOENT on `topics-asked.json.tmp` and lost updates (a read-modify-write without a
    lock). The outcome asserted is the same for every interleaving."""
    ctx = multiprocessing.get_context("fork")
    go = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w, go)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    go.set()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    want = {f"w{w}-{k}": k + 1 for w in range(WRITERS) for k in range(0, TOPICS_EACH, 2)}
    assert asked.asked(tmp_path) == want
    assert sorted(p.name for p in tmp_path.iterdir()) == [asked.FILE, asked.LOCK]


def test_a_foreign_file_at_the_old_fixed_name_does_not_stop_a_note(tmp_path: Path) -> None:
    """The temporary name is the writer's own (mkstemp), never the fixed `.tmp` one: a
    directory there (old code: IsADirectoryError) is not touched."""
    (tmp_path / f"{asked.FILE}.tmp").mkdir()
    asked.begin(tmp_path, "a", "create", 2)
    assert asked.asked(tmp_path) == {"a": 2}


def test_never_made_is_an_empty_topic_whose_command_has_ended(tmp_path: Path) -> None:
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    gone = int(ended.stdout)
    (tmp_path / asked.FILE).write_text(json.dumps({
        "old": 1,  # the older form (no pid): its command is not known to run
        "gone": {"partitions": 2, "pid": gone, "started": 1},
        "mine": {"partitions": 2, "pid": os.getpid(),
                 "started": asked.proctree.started(os.getpid())},
        "part": {"partitions": 3, "pid": gone, "started": 1}}))
    ledger = asked.entries(tmp_path)
    short = asked.short_topics(asked.asked(tmp_path), ["part/0"])
    assert short == {"old": 0, "gone": 0, "mine": 0, "part": 1}
    # "mine" runs (a create still running is short, as it is); "part" was cut short.
    assert asked.never_made(short, ledger) == {"old", "gone"}


def test_a_live_command_of_a_topic_refuses_another_and_an_ended_one_does_not(
        tmp_path: Path) -> None:
    """newuser17 T1, T7: the look and the write are one step under the lock; another live
    command's entry refuses (nothing written), an ended one's is replaced. Old code: no
    `begin`, a delete wrote nothing and ran."""
    live = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE)
    try:
        started = asked.proctree.started(live.pid)
        for held, mine, words in [
                ("create", "delete", f"a create of 't' is running (pid {live.pid}); run the "
                                     "delete after it (nothing was done)"),
                ("delete", "create", f"a delete of 't' is running (pid {live.pid}); run the "
                                     "create after it (nothing was done)"),
                ("delete", "delete", "topic 't' is being deleted by another command (`epochgc "
                                     f"topic delete`, pid {live.pid}): nothing was done by "
                                     "this one")]:
            entry = {"partitions": 3 if held == "create" else 0, "pid": live.pid,
                     "started": started, "op": held}
            (tmp_path / asked.FILE).write_text(json.dumps({"t": entry}))
            try:
                asked.begin(tmp_path, "t", mine, 2 if mine == "create" else 0)
            except asked.Busy as e:
                assert str(e) == words
            else:
                raise AssertionError(f"{mine} during a live {held} was not refused")
            assert json.loads((tmp_path / asked.FILE).read_text()) == {"t": entry}
            asked.settle(tmp_path, "t")  # another live command's: kept
            assert asked.everything(tmp_path)["t"].op == held
    finally:
        live.communicate(b"")
    asked.begin(tmp_path, "t", "delete")  # its command ended: replaced
    assert asked.deletes(tmp_path)["t"].pid == os.getpid() and asked.entries(tmp_path) == {}
    asked.settle(tmp_path, "t")
    assert not (tmp_path / asked.FILE).exists()
