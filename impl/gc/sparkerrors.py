"""A failed Spark job as one line naming the task's own error, and the GcError it becomes."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

from epochgc.impl.gc.errors import GcError


@contextlib.contextmanager
def _spark_errors(phase: str) -> Iterator[None]:
    """Turn a failed Spark job into a GcError carrying the Python error's own last line."""
    try:
        yield
    except Exception as e:
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
