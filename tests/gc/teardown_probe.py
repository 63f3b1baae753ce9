"""Run as a process of its own (`python -m tests.gc.teardown_probe DIR [--plain]`): start
a local Spark session as `epochgc gc` does, run a job whose two tasks block, and once both
are inside their Python function (each writes a marker file into DIR), stop Spark as a
command stopping on a signal does (`stop_spark(on_signal=True)`; `--plain`: as before,
`stop_spark()`). Spark's teardown of the running tasks then logs on stderr, unless
silenced. Used by tests/gc/test_spark_teardown.py."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from pathlib import Path
from typing import Any


def main() -> None:
    out = Path(sys.argv[1])
    plain = "--plain" in sys.argv[2:]
    from epochgc.impl.gc.session import spark_session, stop_spark

    sc = spark_session("local[2]", "epochgc-teardown-probe").sparkContext

    def block(it: Any) -> Any:
        import os
        import time as t

        from pyspark import TaskContext

        ctx = TaskContext.get()
        part = ctx.partitionId() if ctx is not None else os.getpid()
        (out / f"in-task-{part}").touch()
        t.sleep(300)  # ended by the stop below, never by running out
        return it

    def job() -> None:
        with contextlib.suppress(Exception):  # the stop fails the job: expected
            sc.parallelize(range(2), 2).mapPartitions(block).collect()

    threading.Thread(target=job, daemon=True).start()
    limit = time.monotonic() + 600  # a hang bound, not a timing assumption
    while len(list(out.glob("in-task-*"))) < 2:
        if time.monotonic() > limit:
            sys.exit("the tasks never started")
        time.sleep(0.1)
    print("probe: stopping", file=sys.stderr, flush=True)
    if plain:
        stop_spark()
    else:
        stop_spark(on_signal=True)
    print("probe: stopped", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
