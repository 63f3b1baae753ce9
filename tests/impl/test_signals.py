"""impl/signals.py on its own, each in a fresh process (a handler is process-wide):
the first SIGINT/SIGTERM unwinds as `Interrupted` (130/143), a second one does not cut a
cleanup short, a signal inside `deferred()` waits for its end, and `run` turns the
cancellation of an asyncio main task into `Interrupted` even if the task swallowed it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from tests.interrupted import by_signal

ROOT = Path(__file__).resolve().parents[2]


def _py(body: str) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent('''
        import asyncio, os, signal, sys
        from epochgc.impl import signals
        signals.install()
        try:
        {}
        except signals.Interrupted as e:
            print("interrupted", e.name, flush=True)
            sys.exit(e.exit_code)
    ''').format(textwrap.indent(textwrap.dedent(body), "    "))
    return subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          capture_output=True, text=True, timeout=120)


def test_the_first_signal_unwinds_and_a_second_does_not_cut_the_cleanup() -> None:
    r = _py('''
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            print("not reached")
        finally:
            os.kill(os.getpid(), signal.SIGINT)  # the operator insists, mid-cleanup
            print("cleanup done", flush=True)
    ''')
    assert r.returncode == 143, r.stderr
    assert r.stdout.split() == ["cleanup", "done", "interrupted", "SIGTERM"], r.stdout
    assert "already stopping" in r.stderr


def test_a_signal_during_a_deferred_cleanup_is_raised_after_it() -> None:
    r = _py('''
        with signals.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            print("cleanup done", flush=True)
        print("not reached")
    ''')
    assert r.returncode == 130, r.stderr
    assert r.stdout.split() == ["cleanup", "done", "interrupted", "SIGINT"], r.stdout


def test_a_second_signal_while_finishing_ends_it_by_the_first() -> None:
    """review41a R8: a first signal while the last output is written is held; a second
    cuts the write short, and the first decides the exit code (gc's rule)."""
    r = _py('''
        with signals.finishing(0):
            os.kill(os.getpid(), signal.SIGINT)  # held: the output is being written
            print("held", flush=True)
            os.kill(os.getpid(), signal.SIGTERM)  # the second cuts it short
            print("not reached")
    ''')
    # Old code: exit 143, "interrupted SIGTERM": the held SIGINT was dropped.
    assert r.returncode == 130, r.stderr
    assert r.stdout.split() == ["held", "interrupted", "SIGINT"], r.stdout


def test_a_signal_held_by_a_failed_output_ends_that_run_not_the_next() -> None:
    """review41a R7: the output's code raised after a signal was held; the signal stayed
    held and the next in-process run's `finishing` raised it as its own interrupt. Now the
    failed output's run ends by it (its work is not complete), with what failed."""
    r = _py('''
        try:
            with signals.finishing(0):
                os.kill(os.getpid(), signal.SIGINT)  # held
                raise OSError("stdout went away")  # the output fails
        except signals.Interrupted as e:
            print("run1:", e.name, "|", e.detail, "|", repr(e.__cause__), flush=True)
        except OSError as e:
            print("run1:", repr(e), flush=True)
        with signals.finishing(0):
            print("run2: written", flush=True)
        print("run2: complete", flush=True)
    ''')
    # Old code: "run1: OSError('stdout went away')", "run2: written", then run 2 ended by
    # run 1's SIGINT as it completed (exit 130, "interrupted SIGINT").
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "run1: SIGINT | before the command began: nothing was done; its last output "
        "failed: stdout went away | OSError('stdout went away')",
        "run2: written", "run2: complete"], r.stdout


def test_run_cancels_the_main_task_and_raises_interrupted_even_if_it_swallows() -> None:
    r = _py('''
        async def main():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                print("cancelled", flush=True)
            return "swallowed"  # a task that ends normally after the cancel
        print(signals.run(main()))
    ''')
    assert r.returncode == 143, r.stderr
    assert r.stdout.split() == ["cancelled", "interrupted", "SIGTERM"], r.stdout


def test_a_signal_while_the_command_loads_names_the_command(tmp_path: Path) -> None:
    """Issue 41 F12: one early Ctrl-C of `cluster start` printed "epochgc None: interrupted
    by SIGINT": the signal came while the command's module was imported, before click set
    `invoked_subcommand`. The test hook sends it at exactly that point."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), EPOCHGC_TEST_SIGNAL="load:SIGINT")
    r = subprocess.run([sys.executable, "-m", "epochgc", "cluster", "start", "--data-dir",
                        str(tmp_path / "c"), "--store", str(tmp_path / "store")],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == by_signal(signal.SIGINT), r.stderr
    assert "test hook: SIGINT at load" in r.stderr, r.stderr
    # newuser14 R8: and that nothing was done (the command's own code had not begun);
    # newuser19 V6: named `cluster start`, as its later lines are (it said `cluster`)
    assert r.stderr.splitlines()[-1] == ("epochgc cluster start: interrupted by SIGINT: "
                                         "before the command began: nothing was done"), \
        r.stderr
    assert not (tmp_path / "c").exists()  # nothing started


def test_a_stop_raised_where_python_ignores_it_is_raised_again() -> None:
    """newuser3 N6: a Ctrl-C of `chaos` 1 s in was raised inside an import lock's weakref
    callback, where Python only prints "Exception ignored in: ... KeyboardInterrupt"; the
    run went on to "chaos: OK", exit 0. A `__del__` is such a place too: the stop must be
    kept and raised at the command's next point."""
    r = _py('''
        class Held:
            def __del__(self):
                os.kill(os.getpid(), signal.SIGINT)  # its Interrupted is raised in here
        Held()
        print("ran on", flush=True)
        signals.checkpoint("work")
        print("not reached", flush=True)
    ''')
    assert "Exception ignored" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert r.stdout.split() == ["ran", "on", "interrupted", "SIGINT"], (r.stdout, r.stderr)
    assert r.returncode == 130, r.stderr


def test_a_swallowed_stop_is_raised_when_an_event_loop_starts() -> None:
    """The same, for a command whose work runs in `signals.run` (chaos, demo): the loop's
    own handlers would have taken a later Ctrl-C as "already stopping"."""
    r = _py('''
        class Held:
            def __del__(self):
                os.kill(os.getpid(), signal.SIGTERM)
        Held()
        async def main():
            print("not reached", flush=True)
        signals.run(main())
    ''')
    assert "Exception ignored" not in r.stderr, r.stderr
    assert r.stdout.split() == ["interrupted", "SIGTERM"], (r.stdout, r.stderr)
    assert r.returncode == 143, r.stderr


@pytest.mark.parametrize(("sig", "code"), [
    ("SIGINT", by_signal(signal.SIGINT)), ("SIGINT:group", by_signal(signal.SIGINT)),
    ("SIGTERM", by_signal(signal.SIGTERM))])
def test_a_signal_while_the_entry_point_imports_is_one_line(
        tmp_path: Path, sig: str, code: int) -> None:
    """newuser3 N5: Ctrl-C in the first second (`gc`, `gc-admin show`, `conform`) printed a
    KeyboardInterrupt traceback from `from epochgc.impl.cli import main`: the modules were
    still being imported, with Python's own handler. The hook signals the process while
    `impl/signals.py` itself is imported, as the console script pyproject.toml installs
    starts it."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        target = tomllib.load(f)["project"]["scripts"]["epochgc"]
    module, func = target.split(":")
    code_line = f"import sys; from {module} import {func}; sys.exit({func}())"
    env = dict(os.environ, PYTHONPATH=str(ROOT), EPOCHGC_TEST_SIGNAL=f"import:{sig}")
    r = subprocess.run([sys.executable, "-c", code_line, "gc-admin", "show", "--store",
                        str(tmp_path / "store")], env=env, capture_output=True, text=True,
                       timeout=120, start_new_session=True)
    assert "test hook:" in r.stderr and "at import" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == code, r.stderr
    name = sig.split(":")[0]
    # newuser19 V6: the subcommand named, as later lines name it (it said `gc-admin`)
    assert r.stderr.splitlines()[-1] == (f"epochgc gc-admin show: interrupted by {name}: "
                                         "before the command began: nothing was done"), \
        r.stderr


def test_an_interrupted_command_ignores_signals_while_it_exits(tmp_path: Path) -> None:
    """newuser3 N11: a double Ctrl-C of `demo` said "interrupted by SIGINT", then ended by
    the signal (status -2), not 130: the second one came while the interpreter shut down,
    and CPython's finalization resets each handler Python installed to SIG_DFL (after the
    atexit calls; an ignored signal stays ignored). Once the command has cleaned up and
    said so, SIGINT and SIGTERM are ignored: seen by an atexit call registered first (so
    run last), the last Python code before that reset."""
    probe = textwrap.dedent("""
        import atexit, signal, sys
        def said(s):
            h = signal.getsignal(s)
            return getattr(h, "name", getattr(h, "__name__", repr(h)))
        atexit.register(lambda: print("at exit:", said(signal.SIGINT), said(signal.SIGTERM),
                                      file=sys.stderr))
        from epochgc.impl.cli import main
        main(sys.argv[1:], prog_name="epochgc")
    """)
    p = subprocess.run(
        [sys.executable, "-c", probe, "cluster", "start", "--data-dir", str(tmp_path / "c"),
         "--store", str(tmp_path / "store")], capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PYTHONPATH=str(ROOT), EPOCHGC_TEST_SIGNAL="start:SIGINT"))
    assert p.returncode == 130, p.stderr
    assert "epochgc cluster start: interrupted by SIGINT" in p.stderr, p.stderr
    assert "at exit: SIG_IGN SIG_IGN" in p.stderr, p.stderr


def test_a_signal_as_the_main_task_ends_is_not_lost() -> None:
    """newuser5 G5: a SIGINT in the last synchronous stretch of `run`'s main task (after its
    last await: the manifest written, the batch echoed) reached the loop's self-pipe, but the
    loop stopped before it read it (or the handler was removed first): `run` returned as if
    nothing came and `produce` went on to exit 0. Old code: `['done', 'ran', 'on']`, exit 0."""
    r = _py('''
        async def main():
            await asyncio.sleep(0)
            os.kill(os.getpid(), signal.SIGINT)  # delivered now; nothing awaited after it
            return "done"
        print(signals.run(main()), flush=True)
        print("ran on", flush=True)
    ''')
    assert r.stdout.split() == ["interrupted", "SIGINT"], (r.stdout, r.stderr)
    assert r.returncode == 130, r.stderr


def test_a_signal_before_the_main_task_starts_leaves_no_unawaited_coroutine() -> None:
    """newuser5 G5: a SIGINT while `asyncio.run` made its loop, before the main task's first
    step, stopped the command right but left the coroutine `run` was given never awaited:
    `RuntimeWarning: coroutine 'main' was never awaited` at exit (old code)."""
    r = _py('''
        class Policy(asyncio.DefaultEventLoopPolicy):
            def new_event_loop(self):
                loop = super().new_event_loop()
                os.kill(os.getpid(), signal.SIGINT)  # the loop made, the task not started
                return loop
        asyncio.set_event_loop_policy(Policy())
        async def main():
            print("not reached", flush=True)
        signals.run(main())
    ''')
    assert "never awaited" not in r.stderr, r.stderr
    assert r.stdout.split() == ["interrupted", "SIGINT"], (r.stdout, r.stderr)
    assert r.returncode == 130, r.stderr



def test_a_signal_a_worker_thread_takes_wakes_the_sleeping_loop() -> None:
    """A signal the kernel delivers to another thread (a process-directed signal may go to
    any thread that does not block it) does not interrupt the loop's `epoll_wait`: `run`
    must still be woken (Python's wakeup fd) to cancel the main task. Without it the loop
    slept until its next timer (30 s): `['slept', 'interrupted', 'SIGTERM']`."""
    r = _py('''
        import threading, time
        def kill_when_asleep(main_tid):
            # Once the main thread sleeps in epoll_wait (proc(5): /proc/PID/task/TID/wchan,
            # where in the kernel it sleeps), this thread takes the signal itself.
            wchan = f"/proc/self/task/{main_tid}/wchan"
            while "epoll" not in open(wchan).read():
                time.sleep(0.001)
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
        async def main():
            threading.Thread(target=kill_when_asleep, args=(threading.get_native_id(),),
                             daemon=True).start()
            # Ran by a loop that slept until it: the signal was left for its next event.
            asyncio.get_running_loop().call_later(30, lambda: print("slept", flush=True))
            await asyncio.sleep(60)
        signals.run(main())
    ''')
    assert r.stdout.split() == ["interrupted", "SIGTERM"], (r.stdout, r.stderr)
    assert r.returncode == 143, r.stderr


def test_a_signal_of_one_in_process_run_does_not_leak_into_the_next() -> None:
    """A review of impl/signals.py: `_received` (the first signal) outlived its run. Click's
    CliRunner runs several commands in one process, each through the `epochgc` group, which
    calls `install` first: the next run's first signal was taken as a second one ("already
    stopping (cleaning up)") and ignored, the command ran on."""
    r = _py('''
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        except signals.Interrupted as e:
            print("run1:", e.name, flush=True)
        signals.install()  # the next run's group
        print("run2 received:", signals.received(), flush=True)
        os.kill(os.getpid(), signal.SIGINT)
        print("run2: not stopped", flush=True)
    ''')
    # Old code: "run2 received: 15", "run2: not stopped", exit 0, "already stopping".
    assert r.returncode == 130, (r.stdout, r.stderr)
    assert r.stdout.splitlines() == ["run1: SIGTERM", "run2 received: None",
                                     "interrupted SIGINT"], r.stdout
    assert "already stopping" not in r.stderr, r.stderr


def test_a_run_begins_with_nothing_said_done() -> None:
    """review41b B5: `install` forgot the last in-process run's signal, not its words: the
    next run's early signal said the first run's `doing` ("the results of the first 4
    step(s) were written ...") instead of "before the command began"."""
    r = _py('''
        signals.doing("run1 wrote things")
        signals.install()  # the next run's group
        print(signals.done_so_far(), flush=True)
    ''')
    assert r.stdout.splitlines() == ["before the command began: nothing was done"], (
        r.stdout, r.stderr)


def test_a_signal_while_handlers_are_swapped_reaches_the_new_one() -> None:
    """review41b B6: `signals.run` swapped its handlers one `signal.signal` call at a time;
    a SIGINT between two calls ran the handler being replaced (a finished run's, which
    ignored it). `_swap` blocks the signals while they change: it reaches the new one."""
    r = _py('''
        got = []
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, lambda n, f: got.append("old"))

        class Between(dict):  # a SIGINT sent between the two `signal.signal` calls
            def items(self):
                pairs = list(super().items())
                yield pairs[0]
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(1000):  # bytecodes where Python runs a handler
                    pass
                yield from pairs[1:]

        new = lambda n, f: got.append("new")
        signals._swap(Between([(signal.SIGTERM, new), (signal.SIGINT, new)]))
        for _ in range(1000):
            pass
        print(got, flush=True)
    ''')
    assert r.stdout.splitlines() == ["['new']"], (r.stdout, r.stderr)


def test_a_handler_that_raises_mid_swap_leaves_no_handler_unset() -> None:
    """review41c C4 (B6 with another thread): the mask is the calling thread's; a SIGINT
    another thread takes meanwhile is run by the main thread in `signal.signal`'s own check
    before it sets a handler. The handler being replaced raised there, that handler was
    never set (and `signals.run` left a finished run's handler in place). Now every handler
    is set, then the exception is raised."""
    r = _py('''
        import threading

        def old(n, f):
            raise RuntimeError("old ran")

        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, old)
        go = threading.Event()
        sender = threading.Thread(target=lambda: (go.wait(), os.kill(os.getpid(),
                                                                     signal.SIGINT)),
                                  daemon=True)
        sender.start()  # before the swap: its signal mask lets SIGINT in
        calls = []

        import _signal  # signal.signal wraps it (Lib/signal.py)

        def between(frame, event, arg):  # SIGINT taken by the other thread before the
            if event == "c_call" and arg is _signal.signal:  # second handler is set
                calls.append(1)
                if len(calls) == 2:
                    sys.setprofile(None)
                    go.set()
                    sender.join()  # the main thread runs `old` here, in that call's place

        new = lambda n, f: None
        sys.setprofile(between)
        try:
            signals._swap({signal.SIGTERM: new, signal.SIGINT: new})
        except RuntimeError as e:
            print("raised:", e, flush=True)
        sys.setprofile(None)
        print("SIGINT new:", signal.getsignal(signal.SIGINT) is new, flush=True)
    ''')
    assert r.stdout.splitlines() == ["raised: old ran", "SIGINT new: True"], (
        r.stdout, r.stderr)


def test_a_signal_during_a_deferred_cleanup_that_fails_ends_that_run() -> None:
    """A review of impl/signals.py: a signal that came while `deferred()`'s body ran was
    lost when the body raised (the failure propagated, the signal stayed pending), and the
    next `deferred()` to end, in a later run, raised it as its own interrupt. Now the run
    whose cleanup failed ends by its signal, the failure as its cause."""
    r = _py('''
        try:
            with signals.deferred():
                os.kill(os.getpid(), signal.SIGINT)  # pending: the cleanup runs on
                raise OSError("cleanup failed")
        except signals.Interrupted as e:
            print("run1:", e.name, "|", repr(e.__cause__), flush=True)
        except OSError as e:
            print("run1:", repr(e), flush=True)
        with signals.deferred():
            print("run2: cleanup", flush=True)
        print("run2: complete", flush=True)
    ''')
    # Old code: "run1: OSError('cleanup failed')", "run2: cleanup", then run 2 ended by
    # run 1's SIGINT (exit 130).
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stdout.splitlines() == ["run1: SIGINT | OSError('cleanup failed')",
                                     "run2: cleanup", "run2: complete"], r.stdout
