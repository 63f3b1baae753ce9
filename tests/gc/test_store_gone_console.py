"""newuser12 P15 (issue 41): the S3 server died mid-round; `gc` printed ~145 lines of Spark's
ERROR log (Executor "Exception in task" with Python and Java stacks, TaskSetManager
"aborting job") and exited 2 ("blocked") for a round that had deleted keys and then lost its
store. Old code: both tests below failed (no such loggers in the quiet configuration; exit
code 2)."""

from __future__ import annotations

from pathlib import Path

from epochgc.impl.exitcodes import ExitCode
from epochgc.impl.gc.summary import GcSummary

QUIET = Path(__file__).parents[2] / "impl" / "gc" / "log4j2-quiet.properties"


def _properties(path: Path) -> dict[str, str]:
    """log4j2's properties format (java.util.Properties: `key = value`, `#` comments)."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def test_a_failed_task_is_not_logged_by_spark_on_the_quiet_console() -> None:
    props = _properties(QUIET)
    levels = {props[f"logger.{n}.name"]: props[f"logger.{n}.level"]
              for n in {k.split(".")[1] for k in props if k.startswith("logger.")}}
    for name in ("org.apache.spark.executor.Executor",
                 "org.apache.spark.scheduler.TaskSetManager"):
        assert levels.get(name) == "off", (name, levels)
    assert props["rootLogger.level"] == "error"  # Spark's other errors still shown


def test_a_round_stopped_by_the_monitor_that_then_failed_exits_incomplete() -> None:
    failed = GcSummary(interrupted="unhealthy",
                       error="the deletion journal j cannot be read back: connection refused")
    assert failed.exit_code == ExitCode.FAILED
    # A round the monitor stopped, with nothing failing after: still "blocked".
    assert GcSummary(interrupted="unhealthy").exit_code == ExitCode.BLOCKED
