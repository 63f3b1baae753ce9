"""Run as a process of its own (`python -m tests.gc.interrupt_probe N`): in a local Spark
session started as `epochgc gc` starts it, interrupt a running job's call N times, as a
second Ctrl-C does mid-round, and check that the job's error wrappers give back the
interrupt every time. Used by tests/gc/test_interrupt_replaced.py (issue 41, s28k).

Each time: the job's one task waits for a file; once it has started and the main thread
waits in py4j for the JVM's answer (its frames: `readinto` under `send_command`), SIGINT is
sent to this process and its handler raises `SignalAgain`, as the round's handler does.
Threads polling Spark's status tracker hold idle py4j connections meanwhile, as the round's
progress and watch threads do: py4j's `except KeyboardInterrupt` shuts the interrupted
socket down through them, and PySpark's `SCCallSiteSync.__exit__` makes one more call
(`setCallSite(None)`), which under that shutdown at times failed with
`Py4JNetworkError: Answer from Java side is empty` and replaced the interrupt. Prints one
line per try and `probe: replaced K of N`; exits 1 if any was replaced. Nothing here
depends on timing: every wait is for a condition, bounded by PROBE_LIMIT_S against hangs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from tests.gc.py4j_race_probe import _waiting_for_answer

LIMIT_S = float(os.environ.get("PROBE_LIMIT_S", "300"))  # a hang bound, not a timing one


def _until(cond: Any, what: str) -> None:
    limit = time.monotonic() + LIMIT_S
    while not cond():
        if time.monotonic() > limit:
            print(f"probe: timed out waiting for {what}", file=sys.stderr, flush=True)
            os._exit(2)
        time.sleep(0.005)


def _chain(e: BaseException | None) -> str:
    names = []
    while e is not None and len(names) < 8:
        names.append(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        e = e.__cause__ or e.__context__
    return " <- ".join(names)


def main(tries: int) -> int:
    from epochgc.impl.gc.session import spark_session, stop_spark
    from epochgc.impl.gc.sparkerrors import _spark_errors
    from epochgc.impl.gc.stage import _spark_ended
    from epochgc.impl.gc.stop import SignalAgain

    sc: Any = spark_session("local[1]", "epochgc-interrupt-probe").sparkContext
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            # py4j shut its connection down: the next call opens another
            with contextlib.suppress(Exception):
                sc.statusTracker().getActiveJobsIds()
            done.wait(0.02)

    pollers = [threading.Thread(target=poll, daemon=True) for _ in range(4)]
    for t in pollers:
        t.start()

    def again(_signum: int, _frame: FrameType | None) -> None:
        raise SignalAgain("SIGINT")

    signal.signal(signal.SIGINT, again)
    main_thread = threading.main_thread()
    replaced = 0
    with tempfile.TemporaryDirectory() as d:
        for i in range(tries):
            started, release = Path(d, f"started{i}"), Path(d, f"release{i}")

            def task(it: Any, started: str = str(started), release: str = str(release)) -> Any:
                import os
                import time

                open(started, "w").close()
                limit = time.monotonic() + LIMIT_S
                while not os.path.exists(release) and time.monotonic() < limit:
                    time.sleep(0.01)
                return it

            def interrupt(started: Path = started) -> None:
                _until(started.exists, "the task to start")
                _until(lambda: _waiting_for_answer(main_thread), "the driver's wait")
                os.kill(os.getpid(), signal.SIGINT)

            sender = threading.Thread(target=interrupt, daemon=True)
            sender.start()
            try:
                with _spark_errors("delete"), _spark_ended(sc):
                    sc.parallelize([i], 1).mapPartitions(task).collect()
                print(f"probe: try {i}: the job ended uninterrupted", flush=True)
                replaced += 1
            except SignalAgain:
                print(f"probe: try {i}: SignalAgain", flush=True)
            except BaseException as e:  # the defect: the interrupt replaced
                replaced += 1
                print(f"probe: try {i}: replaced: {_chain(e)}", flush=True)
            finally:
                release.touch()
                sender.join()
                # The job's task ends once released; wait for it, so the next try's task
                # is the only one running.
                _until(lambda: not list(sc.statusTracker().getActiveJobsIds()),
                       "the job to end")
    done.set()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    print(f"probe: replaced {replaced} of {tries}", flush=True)
    stop_spark()
    return 1 if replaced else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20))
