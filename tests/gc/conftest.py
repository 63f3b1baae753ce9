"""One real local SparkSession for the whole test session (Spark start-up is seconds),
shared with the conformance machine (`tests/spark_shared.py`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests import spark_shared

__all__ = ["spark"]


@pytest.fixture(scope="session")
def _spark_process() -> Iterator[None]:
    yield
    spark_shared.stop()


@pytest.fixture
def spark(_spark_process: None) -> Any:
    """The running session: started again if another user of the process's session (the
    conformance machine, once its Spark budget is spent) stopped it."""
    return spark_shared.live_session()
