"""One real local SparkSession for the whole test session (Spark start-up is seconds)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.store.s3server import set_dummy_aws_env

__all__ = ["spark"]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    set_dummy_aws_env()  # before the JVM starts: Python workers inherit its environment
    from epochgc.impl.gc.session import spark_session

    session = spark_session("local[2]", app_name="epochgc-tests")
    yield session
    session.stop()
