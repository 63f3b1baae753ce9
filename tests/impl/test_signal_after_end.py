"""newuser19 V1, V2, V4 (issue 41): a signal at the end of a run, and an inherited ignored
SIGINT.

- V2: a signal once a command's work was complete (its verdict written) turned the run
  into an interrupted one: "interrupted ... nothing was written yet" after check-trace's
  verdict, "the steps after them were not replayed" after replay's last step, exit 130;
  a little later, once finalization had reset the handlers, a silent death by the
  signal. Now, as for `gc`, the result stands and the signal is said in one line.
- V1: one while click's `sys.exit(0)` unwound raised inside impl/entry.py's `except
  SystemExit`: a traceback (or click's "Aborted!"), exit 1.
- V4: a SIGINT ignored when the process started (`cmd &` in a script) stays ignored.

Each command signals itself at a named point (impl/signals.py: `finishing`, `ended`,
`exit`), so nothing here depends on timing."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import click
import pytest

from epochgc.impl import cli
from epochgc.impl.signals import HOOK_ENV
from tests.conformance.test_checktrace import write_trace
from tests.interrupted import by_signal

ROOT = Path(__file__).resolve().parents[2]
VECTOR = ("replay", "--vector", "fence-window-reference")  # 20 steps, exit 0


def _run(cwd: Path, hook: str, *argv: str, ignore_int: bool = False
         ) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{HOOK_ENV: hook})
    return subprocess.run([sys.executable, "-m", "epochgc", *argv], env=env,
                          capture_output=True, text=True, timeout=120, cwd=cwd,
                          preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
                          if ignore_int else None)


def _late(cmd: str, sig: str, code: int) -> str:
    return f"epochgc {cmd}: {sig} after the command ended: its result stands, exit code {code}"


@pytest.mark.parametrize(("hook", "sig"), [
    ("finishing", "SIGINT"),  # as its verdict is written: held, said once it is out
    ("ended", "SIGTERM"),  # its code returned
    ("exit", "SIGHUP"),  # click's sys.exit unwinding (V1: a traceback, exit 1)
])
def test_a_signal_once_check_trace_decided_leaves_its_verdict_and_exit_code(
        tmp_path: Path, hook: str, sig: str) -> None:
    trace = tmp_path / "trace.ndjson"
    write_trace(trace)
    r = _run(tmp_path, f"{hook}:{sig}", "check-trace", str(trace))
    # Old code: exit -2/-15/-1, "epochgc check-trace: interrupted by SIG...: nothing was
    # written yet; N record(s) read, N checked" after the verdict; at `exit`, a traceback
    # ending in "epochgc.impl.signals.Interrupted: SIGHUP", exit 1.
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("trace conforms to the model: "), r.stdout
    assert r.stderr.splitlines()[-1] == _late("check-trace", sig, 0), r.stderr
    assert "Traceback" not in r.stderr and "Aborted!" not in r.stderr, r.stderr


@pytest.mark.parametrize("hook", ["ended", "exit"])
def test_a_signal_after_replays_last_step_leaves_every_result(tmp_path: Path,
                                                              hook: str) -> None:
    r = _run(tmp_path, f"{hook}:SIGINT", *VECTOR)
    # Old code: exit -2, "... the steps after them were not replayed" (there were none).
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("\n") == 20, r.stdout
    assert r.stderr.splitlines()[-1] == _late("replay", "SIGINT", 0), r.stderr


def test_an_errors_exit_code_stands_too(tmp_path: Path) -> None:
    empty = tmp_path / "empty.ndjson"
    empty.write_text("")
    r = _run(tmp_path, "exit:SIGTERM", "check-trace", str(empty))
    # Old code: a traceback (Interrupted raised in impl/entry.py's `except SystemExit`),
    # exit 1 where the command had said 65.
    assert r.returncode == 65, r.stderr
    assert "the trace holds no record" in r.stderr, r.stderr
    assert r.stderr.splitlines()[-1] == _late("check-trace", "SIGTERM", 65), r.stderr


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_while_the_interpreter_finalizes_keeps_a_complete_runs_exit_code(
        tmp_path: Path, sig: str) -> None:
    """V2's silent death: CPython's finalization resets every handler Python installed to
    the default action (`_PySignal_Fini`) before it tears the modules down; a signal then
    ended a complete run by the signal, no line. Sent from a module global's finalizer,
    that is in the modules' teardown (as tests/gc/test_late_signal_at_exit.py does)."""
    code = textwrap.dedent(f'''
        import os, signal, sys

        class LateAtFinalization:
            def __del__(self) -> None:
                os.kill(os.getpid(), signal.{sig})

        held = LateAtFinalization()
        sys.argv = ["epochgc", *{list(VECTOR)!r}]
        from epochgc.impl.entry import main
        main()
    ''')
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    # Old code: returncode -2 / -15, every step written, not a line on stderr.
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stdout.count("\n") == 20, r.stdout


def test_a_sigint_ignored_at_start_stays_ignored(tmp_path: Path) -> None:
    """V4: a script's `epochgc ... &` (bash(1): "asynchronous commands ignore SIGINT")."""
    r = _run(tmp_path, "result:SIGINT", *VECTOR, ignore_int=True)
    # Old code: exit -2, "interrupted by SIGINT: the results of the first 1 step(s) ..."
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("\n") == 20, r.stdout
    assert "interrupted" not in r.stderr, r.stderr
    # SIGTERM still stops it, as before.
    r = _run(tmp_path, "result:SIGTERM", *VECTOR, ignore_int=True)
    assert r.returncode == by_signal(signal.SIGTERM), r.stderr
    assert "epochgc replay: interrupted by SIGTERM: " in r.stderr.splitlines()[-1], r.stderr


def test_the_groups_named_before_their_module_loads_are_the_groups() -> None:
    """impl/cli.py GROUPS (V6: a signal while `cluster`'s module loaded named `epochgc
    cluster`, not `cluster start`) lists exactly the subcommands that are groups."""
    import importlib

    groups = set()
    for name, target in cli.SUBCOMMANDS.items():
        module, attr = target.split(":")
        if isinstance(getattr(importlib.import_module(module), attr), click.Group):
            groups.add(name)
    assert groups == set(cli.GROUPS)


@pytest.mark.skipif(os.environ.get("EPOCHGC_SIGNALS") != "full",
                    reason="EPOCHGC_SIGNALS=full: a cluster start (~4 s); the rule is "
                           "check-trace's `finishing` case above")
@pytest.mark.parametrize("hook", ["finishing:SIGINT", "ended:SIGTERM"])
def test_a_signal_after_cluster_ready_leaves_the_start_done(tmp_path: Path,
                                                            hook: str) -> None:
    """newuser19 V2: a signal just after "cluster ready" exited 130/143 with no line while
    the nodes ran on; a script could not tell it from a start that left none running."""
    from epochgc.impl.cluster.local import LocalCluster
    from tests.impl.cli_cluster import stop

    d = tmp_path / "c"
    r = _run(tmp_path, hook, "cluster", "start", "--data-dir", str(d), "--store",
             str(tmp_path / "store"), "--nodes", "1", "--partitions", "t/0")
    try:
        sig = hook.split(":")[1]
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[-1] == "cluster ready: every partition has a leader"
        assert r.stderr.splitlines()[-1] == _late("cluster start", sig, 0), r.stderr
        assert LocalCluster(str(d)).running() == [1]  # as "cluster ready" said
    finally:
        stop(d)


def _blocked_in_pipe_write(pid: int) -> bool:
    """The process's main thread sleeps in a write to a full pipe (proc(5) wchan, as
    tests/impl/test_stderr_signal_write.py reads it)."""
    try:
        return "pipe_write" in Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return False


def test_a_second_signal_cuts_a_blocked_verdict_and_the_first_decides(tmp_path: Path) -> None:
    """review41a R8: check-trace's verdict goes to a full pipe nobody reads; SIGINT comes as
    it begins (held: `finishing`), then SIGTERM once the write is blocked. The second only
    cuts the write short: the run ends by the first, SIGINT (gc's rule, impl/gc/README.md).
    Sent once the kernel shows the write blocked, not after a sleep."""
    trace = tmp_path / "trace.ndjson"
    write_trace(trace)
    r, w = os.pipe()
    try:
        os.set_blocking(w, False)
        with contextlib.suppress(BlockingIOError):
            while True:  # fill it: the verdict's write blocks
                os.write(w, b"x" * 4096)
        os.set_blocking(w, True)
        env = dict(os.environ, PYTHONPATH=str(ROOT), **{HOOK_ENV: "finishing:SIGINT"})
        p = subprocess.Popen([sys.executable, "-m", "epochgc", "check-trace", str(trace)],
                             stdout=w, stderr=subprocess.PIPE, env=env, text=True,
                             cwd=tmp_path)
        os.close(w)
        w = -1
        try:
            deadline = time.monotonic() + 60
            while not _blocked_in_pipe_write(p.pid) and p.poll() is None:
                assert time.monotonic() < deadline, "the verdict's write never blocked"
                time.sleep(0.01)
            p.send_signal(signal.SIGTERM)
            code = p.wait(timeout=60)
            err = p.stderr.read() if p.stderr else ""
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            if p.stderr:
                p.stderr.close()
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
    # Old code: exit -15, "interrupted by SIGTERM": the held SIGINT was dropped.
    assert code == by_signal(signal.SIGINT), err
    assert "epochgc check-trace: interrupted by SIGINT: " in err.splitlines()[-1], err
