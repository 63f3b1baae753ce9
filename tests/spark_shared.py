"""The one local SparkSession of a test process, shared by tests/gc and the conformance
machine: Spark allows one SparkContext per JVM, so both get the same session whatever their
order, and pytest does reorder them (tests that use a parametrized session fixture, such as
`s3_endpoint`, are grouped by parameter across directories).

A user that needs the session calls `live_session()`: a stopped session is started again.
`stop()` ends the process's session; the next `live_session()` starts a new one. (Found in
CI: the conformance machine stopped "its" session once its Spark budget was spent, which was
tests/gc's session too, and 22 Spark tests that ran after it failed with `sc is null`.)
"""

from __future__ import annotations

from typing import Any

from tests.store.s3server import set_dummy_aws_env

__all__ = ["is_live", "live_session", "stop"]

_session: Any = None


def is_live(session: Any) -> bool:
    """True if `session`'s SparkContext has not been stopped (PySpark sets `_jsc` to None)."""
    return session is not None and session.sparkContext._jsc is not None


def live_session() -> Any:
    """The process's running local[2] session, started (or started again) if needed."""
    global _session
    if not is_live(_session):
        set_dummy_aws_env()  # before the JVM starts: Python workers inherit its environment
        from epochgc.impl.gc.session import spark_session

        _session = spark_session("local[2]", app_name="epochgc-tests")
    return _session


def stop() -> None:
    """Stop the process's session if it runs (its JVM's idle threads need not run on)."""
    global _session
    if is_live(_session):
        _session.stop()
    _session = None
