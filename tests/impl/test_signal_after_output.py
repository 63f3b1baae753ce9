"""newuser20 W3 (issue 41): a signal right after a command's last output line ended the run
by the signal ("interrupted ...", 130/143) with its work done: `topic create`/`delete` ("topic
X was created", exit 130: a script retrying gets "already exists"), `barrier`, `cluster stop`,
`gc-admin show`/`pause`/`start` (gc-admin with a handler of its own). Each now writes its last
output under `signals.finishing`: a signal as it is written is held and said once it is out
("... after the command ended: its result stands, exit code N"), the exit code the work's.

Deterministic: the signal is sent at the `finishing` point (HOOK_ENV), the output not yet
written. On the old code that point is never reached in these commands: no signal, no line,
the assertion on the line fails."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from epochgc.impl.signals import HOOK_ENV
from tests.impl.cli_cluster import BOUND_S, ENV, epochgc, module_cluster
from tests.interrupted import by_signal


def _late(cmd: str, sig: str, code: int) -> str:
    return f"epochgc {cmd}: {sig} after the command ended: its result stands, exit code {code}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_cluster(tmp_path_factory, "afteroutput", 1)


def test_topic_create_and_delete_and_barrier_keep_their_code(cluster: Path) -> None:
    d = str(cluster)
    r = epochgc("topic", "create", "--data-dir", d, "--partitions", "1", "w3",
                hook="finishing:SIGINT")
    assert r.returncode == 0, r.stderr
    assert '"partition": "w3/0"' in r.stdout, r.stdout
    assert r.stderr.splitlines()[-1] == _late("topic create", "SIGINT", 0), r.stderr
    r = epochgc("topic", "delete", "--data-dir", d, "w3", hook="finishing:SIGTERM")
    assert r.returncode == 0 and '"partition": "w3/0"' in r.stdout, r.stderr
    assert r.stderr.splitlines()[-1] == _late("topic delete", "SIGTERM", 0), r.stderr
    r = epochgc("barrier", "--data-dir", d, hook="finishing:SIGINT")
    assert r.stdout.startswith("barrier candidate: "), (r.stdout, r.stderr)
    assert r.stderr.splitlines()[-1] == _late("barrier", "SIGINT", r.returncode), r.stderr
    assert r.returncode in (0, 1), r.stderr


def test_gc_admin_keeps_its_code(cluster: Path) -> None:
    store = str(cluster.parent / "store")  # module_cluster's
    for argv, out in ((("pause", "--reason", "w3"), "gc-admin: paused by "),
                      (("start",), "gc-admin: resumed"), (("show",), "")):
        r = epochgc("gc-admin", argv[0], "--store", store, *argv[1:],
                    hook="finishing:SIGTERM")
        assert r.stdout.startswith(out), (argv, r.stdout, r.stderr)
        assert r.returncode not in (-15, 143), (argv, r.stderr)
        assert r.stderr.splitlines()[-1] == _late(f"gc-admin {argv[0]}", "SIGTERM",
                                                  r.returncode), (argv, r.stderr)


def test_gc_admin_advance_epoch_keeps_its_code(cluster: Path) -> None:
    """s30a: the one gc-admin command that asks the cluster, as pause/start above."""
    r = epochgc("gc-admin", "advance-epoch", "--data-dir", str(cluster), "--partition",
                "t/0", hook="finishing:SIGINT")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("gc-admin: "), (r.stdout, r.stderr)
    assert r.stderr.splitlines()[-1] == _late("gc-admin advance-epoch", "SIGINT", 0), r.stderr


def test_consume_keeps_its_code(cluster: Path) -> None:
    """s30a: consume's result line (newuser20 W3: 22 of 45 runs signalled as it appeared
    said "interrupted ...: nothing was written yet" and exited 143)."""
    d = str(cluster)
    r = epochgc("produce", "--data-dir", d, "--partition", "t/0", "--count", "3")
    assert r.returncode == 0, r.stderr
    r = epochgc("consume", "--data-dir", d, "--partition", "t/0", "--verify",
                hook="finishing:SIGTERM")
    assert r.returncode == 0, r.stderr
    assert '"records": 3, "acked_checked": 3}' in r.stdout, r.stdout
    assert r.stderr.splitlines()[-1] == _late("consume", "SIGTERM", 0), r.stderr


def test_gc_admin_pause_kept_as_it_is_keeps_its_code(cluster: Path) -> None:
    """newuser22 Y1: `pause` on a store already paused ("kept as it is", exit 0) wrote its
    line (and `--json` its object) outside `finishing`: a signal right after it ended the
    run 130/143 ("nothing was written yet"), and stdout then held two JSON objects."""
    store = str(cluster.parent / "store")
    r = epochgc("gc-admin", "pause", "--store", store, "--reason", "y1")
    assert r.returncode == 0, r.stderr
    try:
        r = epochgc("gc-admin", "pause", "--store", store, hook="finishing:SIGTERM")
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("gc-admin: already paused by "), r.stdout
        assert r.stderr.splitlines()[-1] == _late("gc-admin pause", "SIGTERM", 0), r.stderr
        r = epochgc("gc-admin", "pause", "--store", store, "--json", hook="finishing:SIGINT")
        assert r.returncode == 0, r.stderr
        assert len(r.stdout.splitlines()) == 1 and '"changed": false' in r.stdout, r.stdout
        assert r.stderr.splitlines()[-1] == _late("gc-admin pause", "SIGINT", 0), r.stderr
    finally:
        assert epochgc("gc-admin", "start", "--store", store).returncode == 0


def test_gc_admin_reset_and_expire_keep_their_code(cluster: Path) -> None:
    """newuser22 Y3, Y4: `reset` with nothing to remove said so, then a signal said "the
    lease's removal may have been written (its request was under way): ... says" and
    exited 130; with a lease removed, "interrupted" too; `expire` the same ("nothing was
    written yet" after its complete dry run)."""
    store = cluster.parent / "store"
    r = epochgc("gc-admin", "reset", "--store", str(store), hook="finishing:SIGHUP")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "gc-admin: reset: nothing to remove\n", r.stdout
    assert r.stderr.splitlines()[-1] == _late("gc-admin reset", "SIGHUP", 0), r.stderr
    # A released (expired) lease of a round on another host: removed.
    lease = store / "_cluster" / "gc" / "lease.json"
    lease.parent.mkdir(parents=True, exist_ok=True)
    lease.write_text(json.dumps({"round": "y4", "host": "elsewhere", "pid": 1,
                                 "renewed_at": 0, "expires_at": 0}))
    r = epochgc("gc-admin", "reset", "--store", str(store), hook="finishing:SIGTERM")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("gc-admin: reset: removed _cluster/gc/lease.json"), r.stdout
    assert r.stderr.splitlines()[-1] == _late("gc-admin reset", "SIGTERM", 0), r.stderr
    assert not lease.exists()
    r = epochgc("gc-admin", "expire", "--store", str(store), hook="finishing:SIGINT")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("gc-admin: expire (dry run"), r.stdout
    assert r.stderr.splitlines()[-1] == _late("gc-admin expire", "SIGINT", 0), r.stderr


def test_gc_admin_reset_interrupted_says_nothing_was_removed(cluster: Path) -> None:
    """newuser22 Y3: interrupted after it found nothing to remove (its recovery's look at
    the store), its line said the removal "may have been written"."""
    r = epochgc("gc-admin", "reset", "--store", str(cluster.parent / "store"),
                hook="reset-removed:SIGINT")
    assert r.returncode in (-2, 130), (r.stdout, r.stderr)
    assert r.stderr.splitlines()[-1] == (
        "epochgc gc-admin reset: interrupted by SIGINT: nothing was removed: there was no "
        "lease to remove"), r.stderr


def test_produce_of_one_batch_keeps_its_code(cluster: Path) -> None:
    """newuser22 Y4: a signal right after one batch's ack line ("5 of 5 record(s)
    acknowledged") ended the run 130: a script retrying on it sent the records twice."""
    d = str(cluster)
    assert epochgc("topic", "create", "--data-dir", d, "--partitions", "1", "y4"
                   ).returncode == 0
    r = epochgc("produce", "--data-dir", d, "--partition", "y4/0", "--count", "3",
                "--batch", "2", hook="finishing:SIGTERM")
    assert r.returncode == 0, r.stderr
    assert [json.loads(x)["count"] for x in r.stdout.splitlines()] == [2, 1], r.stdout
    assert r.stderr.splitlines()[-1] == _late("produce", "SIGTERM", 0), r.stderr


def test_consume_cut_between_partitions_says_the_lines_written(cluster: Path) -> None:
    """s30a's report: a signal after an earlier partition's line said "interrupted by
    SIGINT: nothing was written yet" with that line on stdout."""
    d = str(cluster)
    r = epochgc("topic", "create", "--data-dir", d, "--partitions", "2", "c2")
    assert r.returncode == 0, r.stderr
    r = epochgc("consume", "--data-dir", d, "--partition", "c2/0", "--partition", "c2/1",
                hook="line:SIGINT")
    assert r.returncode in (-2, 130), (r.stdout, r.stderr)  # by the signal (impl/entry.py)
    assert r.stdout == '{"partition": "c2/0", "records": 0}\n', r.stdout
    assert r.stderr.splitlines()[-1] == (
        "epochgc consume: interrupted by SIGINT: the line(s) of 1 partition(s) were written "
        "(c2/0); the partitions after them were not read"), r.stderr


def test_consume_cut_as_it_closes_says_the_last_partition_was_read(cluster: Path) -> None:
    """review41b B4: a signal once the last partition was read (its line held until the
    connections close) said "the partitions after them were not read"."""
    r = epochgc("consume", "--data-dir", str(cluster), "--partition", "t/0",
                hook="closing:SIGTERM")
    assert r.returncode in (-15, 143), (r.stdout, r.stderr)
    assert r.stderr.splitlines()[-1] == (
        "epochgc consume: interrupted by SIGTERM: partition t/0 was read, its line not "
        "written"), r.stderr


def test_cluster_status_keeps_its_code(cluster: Path) -> None:
    """s30a: `cluster status`'s block (newuser20 W3: 9 of 30 runs, "nothing was written
    yet" after `cluster M: N`)."""
    r = epochgc("cluster", "status", "--data-dir", str(cluster), hook="finishing:SIGHUP")
    assert "cluster M: " in r.stdout, (r.stdout, r.stderr)
    assert r.returncode in (0, 1), r.stderr
    assert r.stderr.splitlines()[-1] == _late("cluster status", "SIGHUP", r.returncode), \
        r.stderr


# The child for W7: consume, with SIGHUP sent to itself from inside asyncio's `call_soon`
# as RpcClient.close cancels its reader task (`self._task.cancel()`, which schedules the
# task's wake-up through `call_soon`). A Python-level handler that raises there cuts the
# cancel halfway: the reader's future is cancelled, its wake-up never scheduled.
W7_CHILD = """
import os, signal, sys

def prof(frame, event, arg):
    back = frame.f_back
    if (event == "call" and frame.f_code.co_name == "call_soon" and back is not None
            and back.f_code.co_name == "close"
            and back.f_code.co_filename.endswith(os.path.join("cluster", "rpc.py"))):
        sys.setprofile(None)
        os.write(2, b"w7: SIGHUP inside call_soon of RpcClient.close\\n")
        os.kill(os.getpid(), signal.SIGHUP)

sys.setprofile(prof)
sys.argv = ["epochgc", *sys.argv[1:]]
from epochgc.impl.entry import main
main()
"""


@pytest.mark.parametrize("argv", [("consume",), ("gc-admin", "advance-epoch")])
def test_a_signal_inside_a_loop_callback_ends_the_command(cluster: Path,
                                                          argv: tuple[str, ...]) -> None:
    """newuser20 W7, reproduced: with a plain `asyncio.run`, the handler's `Interrupted`
    raised inside `call_soon` left the reader task's future cancelled and its wake-up never
    scheduled; asyncio.run's shutdown then cancelled that task and waited for it for good
    (epoll_wait, the connection open; a SIGTERM said "already stopping"). Seen hanging
    with consume reverted to `asyncio.run` in a scratch copy (s30a report). Under
    `signals.run` the handler only records the signal and cancels the main task: it ends by
    the signal (129 to a shell). `gc-admin advance-epoch` (s30a: found by the same child)
    hung the same way with its own handler under `asyncio.run`."""
    r = subprocess.run([sys.executable, "-c", W7_CHILD, *argv, "--data-dir", str(cluster),
                        "--partition", "t/0"], env=ENV, capture_output=True, text=True,
                       timeout=60)
    assert "w7: SIGHUP inside call_soon of RpcClient.close" in r.stderr, r.stderr
    assert r.returncode == by_signal(signal.SIGHUP), r.stderr
    assert r.stderr.splitlines()[-1].startswith(
        f"epochgc {' '.join(argv)}: interrupted by SIGHUP: "), r.stderr


def test_cluster_stop_keeps_its_code(cluster: Path) -> None:
    """Last in the module: it stops the module's cluster (whose own end then finds none)."""
    r = epochgc("cluster", "stop", "--data-dir", str(cluster), hook="finishing:SIGINT")
    assert (r.returncode, r.stdout) == (0, "stopped node(s) 1\n"), (r.stdout, r.stderr)
    assert r.stderr.splitlines()[-1] == _late("cluster stop", "SIGINT", 0), r.stderr


def test_cluster_kill_keeps_its_code(cluster: Path) -> None:
    """newuser22 Y4: `cluster kill`'s line, then a signal: 130. After the stop above, its
    node is not running (the line is written under the same `finishing` as "killed")."""
    r = epochgc("cluster", "kill", "--data-dir", str(cluster), "1", hook="finishing:SIGINT")
    assert (r.returncode, r.stdout) == (0, "node 1 is not running: nothing killed\n"), \
        (r.stdout, r.stderr)
    assert r.stderr.splitlines()[-1] == _late("cluster kill", "SIGINT", 0), r.stderr


def test_every_cluster_client_command_runs_its_loop_under_signals_run() -> None:
    """newuser20 W7: `consume` hit by SIGHUP as its result line appeared never exited (6 of
    ~85 runs): its plain `asyncio.run` let the signal's exception be raised inside one of
    the loop's callbacks, where the loop logs and drops it, and the command waited on an
    open connection; a later SIGTERM said only "already stopping". `signals.run` turns a
    signal into the main task's cancellation (its `finally` closes the connections) and
    raises it once the loop has unwound. The commands that talk to a cluster use it."""
    root = Path(__file__).resolve().parents[2] / "impl"
    for name in ("cluster/cli.py", "cluster/topic_cli.py", "cluster/barrier_cli.py",
                 "gc/admin_cli.py"):
        source = (root / name).read_text()
        assert "asyncio.run(" not in source, name


def test_gc_package_keeps_its_code(tmp_path: Path) -> None:
    """s30g (newuser22 Y4's class, found walking every command): `gc-package`'s lines,
    the package written, were outside `finishing`."""
    out = tmp_path / "pkg"
    r = epochgc("gc-package", "--out", str(out), hook="finishing:SIGTERM")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"wrote {out}"), r.stdout
    assert r.stderr.splitlines()[-1] == _late("gc-package", "SIGTERM", 0), r.stderr


STEPS = "".join(f'{{"op":"fence","term":1,"epoch":{e}}}\n' for e in range(5))


@pytest.mark.parametrize("source", ["file", "stdin"])
def test_replays_last_result_keeps_its_code(tmp_path: Path, source: str) -> None:
    """s30a: replay's last result (newuser20 W3: 17 of 30 runs signalled as it appeared
    ended 130, "the steps after them, if any, were not replayed"). Which step is the last
    is known once the input has ended: its result is written then, under `finishing`."""
    steps = tmp_path / "steps.jsonl"
    steps.write_text(STEPS)
    argv = [sys.executable, "-m", "epochgc", "replay", "-" if source == "stdin" else str(steps)]
    env = dict(ENV, **{HOOK_ENV: "finishing:SIGINT"})
    r = subprocess.run(argv, input=STEPS if source == "stdin" else None, env=env,
                       capture_output=True, text=True, timeout=BOUND_S)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("\n") == 5, r.stdout
    assert r.stderr.splitlines()[-1] == _late("replay", "SIGINT", 0), r.stderr
    # Bad input's code stands too: the results before it, then its error, then the signal.
    r = subprocess.run([*argv[:-1], "-"], input=STEPS + "{\n", env=env, capture_output=True,
                       text=True, timeout=BOUND_S)
    assert r.returncode == 65, r.stderr
    assert r.stdout.count("\n") == 5, r.stdout
    assert "epochgc replay: error: " in r.stderr.splitlines()[-2], r.stderr
    assert r.stderr.splitlines()[-1] == _late("replay", "SIGINT", 65), r.stderr


def test_replay_from_an_open_stdin_answers_each_step_at_once() -> None:
    """review41b B2: with each result held until the next step was replayed, a driver
    that sends one step and waits for its result (a stdin held open) waited for ever. A
    result is held only while the next line or the input's end is already there."""
    argv = [sys.executable, "-m", "epochgc", "replay", "-"]
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=ENV, text=True) as p:
        assert p.stdin is not None and p.stdout is not None
        try:
            for line in STEPS.splitlines(keepends=True)[:2]:
                p.stdin.write(line)
                p.stdin.flush()
                got = _line_within(p.stdout, 60.0)
                assert got is not None, "no result for a step sent, the input held open"
                assert '"step":' in got, got
            p.stdin.close()
            assert p.wait(BOUND_S) == 0, p.stderr.read() if p.stderr else ""
            assert p.stdout.read() == "", "a result written twice"
        finally:
            p.kill()


def test_replay_answers_a_step_whose_next_line_is_not_whole_yet() -> None:
    """review41c C3: the result was held whenever stdin had bytes to read, which a blank
    line, a comment or part of the next line also make: a driver waiting for the result
    waited for ever. Here the pipe holds a step and more blank lines than one read takes
    (io.DEFAULT_BUFFER_SIZE), all before replay reads: once they are read, the next read
    would wait, and the step's result must be out."""
    argv = [sys.executable, "-m", "epochgc", "replay", "-"]
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=ENV, text=True) as p:
        assert p.stdin is not None and p.stdout is not None
        try:
            p.stdin.write(STEPS.splitlines(keepends=True)[0] + "\n" * 20000 + '{"op":')
            p.stdin.flush()
            got = _line_within(p.stdout, 60.0)
            assert got is not None, "no result for a step sent, the input held open"
            assert '"step":1' in got, got
            p.stdin.write('"fence","term":1,"epoch":1}\n')
            p.stdin.close()
            assert p.wait(BOUND_S) == 0, p.stderr.read() if p.stderr else ""
            assert '"step":2' in p.stdout.read()
        finally:
            p.kill()


def _line_within(stream: IO[str], bound_s: float) -> str | None:
    """The next line of `stream`, or None if none came within `bound_s` (a bound on a
    hang, not a timing: the line comes at once or never)."""
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(bound_s)
    return got[0] if got else None


@pytest.mark.parametrize("trace", ["/dev/null", "passwd"])
def test_check_trace_keeps_its_error_code(tmp_path: Path, trace: str) -> None:
    """newuser23 F6: a SIGINT right after check-trace's error line ended it 130 (13 runs
    of 19), a second last line "interrupted by SIGINT: nothing was written yet" after the
    error. The error is its result, written under `finishing`: the code stays 65."""
    if trace == "passwd":
        (tmp_path / trace).write_text("root:x:0:0:root:/root:/bin/bash\n")
        trace = str(tmp_path / trace)
    r = epochgc("check-trace", trace, hook="finishing:SIGINT")
    assert r.returncode == 65, r.stderr
    lines = r.stderr.splitlines()
    assert lines[-2].startswith("epochgc check-trace: error: "), r.stderr
    assert lines[-1] == _late("check-trace", "SIGINT", 65), r.stderr
