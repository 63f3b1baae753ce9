"""Test-only hold points for the kill -9 matrix (issue 38: "kill -9 at every step of a
round", systematic, not sampled). Off unless `EPOCHGC_GC_TEST_KILLPOINT` names a directory.

The test writes `<dir>/target` = "<point> <n>". The process (driver or Spark worker) that
reaches `point` for the n-th time in the round (counted across processes by exclusive file
creation) writes its pid to `<dir>/reached` and waits until `<dir>/release` exists; the test
meanwhile kills the process it chose (the driver or that worker) with SIGKILL. Nothing
depends on timing: the kill always lands at that exact step.

Points: `start-written` (driver, after the journal's START), `intent-written` (worker,
after a batch's intent, before its delete request), `batch-deleted` (worker, after the
request, before its `done`), `done-written` (worker, after the `done`), `end-written`
(driver, after END, before the record), `record-written` (driver, after the record),
`lease-releasing` (driver, before it marks its lease released).
"""

from __future__ import annotations

import os
import time

KILLPOINT_ENV = "EPOCHGC_GC_TEST_KILLPOINT"
POINTS = ("start-written", "intent-written", "batch-deleted", "done-written", "end-written",
          "record-written", "lease-releasing")
_HOLD_LIMIT_S = 300.0  # a bound for a test that never releases, not a timing assumption


def reach(point: str) -> None:
    where = os.environ.get(KILLPOINT_ENV)
    if not where:
        return
    try:
        with open(os.path.join(where, "target"), encoding="ascii") as f:
            target, n = f.read().split()
    except (OSError, ValueError):
        return
    if target != point:
        return
    i = 1
    while True:  # the i-th arrival at this point, across processes
        try:
            os.close(os.open(os.path.join(where, f"hit.{point}.{i}"),
                             os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            break
        except FileExistsError:
            i += 1
    if i != int(n):
        return
    with open(os.path.join(where, "reached.tmp"), "w", encoding="ascii") as f:
        f.write(str(os.getpid()))
    os.replace(os.path.join(where, "reached.tmp"), os.path.join(where, "reached"))
    deadline = time.monotonic() + _HOLD_LIMIT_S
    while not os.path.exists(os.path.join(where, "release")) and time.monotonic() < deadline:
        time.sleep(0.01)
