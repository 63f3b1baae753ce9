"""A failed Spark job as one line naming the task's own error, and the GcError it becomes."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

from epochgc.impl.gc.errors import GcError


def interrupt_under(e: BaseException) -> KeyboardInterrupt | None:
    """The KeyboardInterrupt (a signal handler's: `stop.SignalAgain`) that `e` was raised
    while handling, if any: `e` or an exception in its context/cause chain.

    Issue 41 (s28k): a second Ctrl-C raised inside py4j's read of the JVM's answer (the
    driver waits in `collectAndServe` for the whole stage) is caught by py4j's
    `GatewayClient.send_command` (`except KeyboardInterrupt`, py4j 0.10.9.9
    java_gateway.py), which shuts the interrupted socket down through every idle
    connection of the pool ("z" requests) and re-raises; on its way out, PySpark's
    `SCCallSiteSync.__exit__` (pyspark/traceback_utils.py, `rdd.collect`) makes one more
    py4j call, `setCallSite(None)`, on a new connection that the JVM, still acting on
    those shutdowns, may close: py4j's `Py4JNetworkError("Answer from Java side is
    empty")` then replaced the interrupt (Python keeps it only as `__context__`), and the
    round ended as "error: delete phase failed", its second signal never said as
    "again". Under load the race was won often enough to fail CI."""
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, KeyboardInterrupt):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return None


@contextlib.contextmanager
def _spark_errors(phase: str) -> Iterator[None]:
    """Turn a failed Spark job into a GcError carrying the Python error's own last line. A
    failure raised while a signal's KeyboardInterrupt unwound the job's call is that
    interrupt again (`interrupt_under`): the operator's signal, not a failed job."""
    try:
        yield
    except Exception as e:
        if (ki := interrupt_under(e)) is not None:
            raise ki from None
        if type(e).__module__.startswith(("py4j", "pyspark")):
            raise GcError(
                f"{phase} phase failed: {spark_error_line(e)}", deleting=phase == "delete"
            ) from e
        raise


_ERR_LINE = re.compile(r"^([\w.]+(?:Error|Exception|Crash|Interrupt)): (.*)$")
_JAVA_LINE = re.compile(r"^(?::\s*|Caused by:\s*)?([\w.$]+(?:Error|Exception)):\s*(.*)$")


def spark_error_line(e: BaseException) -> str:
    """One line for a Spark error: the last `SomeError: message` line of the Python worker's
    traceback inside it, else the Java cause (the innermost `Caused by`, or the JVM's own
    exception line), never just "An error occurred while calling o130.csv"."""
    found = java = None
    for line in str(e).splitlines():
        m = _ERR_LINE.match(line.strip())
        if m and not m.group(1).startswith(("org.apache", "py4j", "java.")):
            found = f"{m.group(1).rsplit('.', 1)[-1]}: {m.group(2)}"
        j = _JAVA_LINE.match(line.strip())
        if j and not j.group(1).startswith("py4j") and (java is None or "Caused by" in line):
            java = f"{j.group(1).rsplit('.', 1)[-1]}: {j.group(2)}"[:300]
    return found or java or str(e).splitlines()[0][:300]
