"""The process's one SparkSession survives its other user stopping it (found in CI: the
conformance machine stopped the session tests/gc shared once its Spark budget was spent,
and every Spark test after it failed with `sc is null`)."""

from __future__ import annotations

from typing import Any

import pytest

from tests import spark_shared


@pytest.mark.spark
def test_a_session_the_conformance_machine_stopped_is_started_again(spark: Any) -> None:
    from tests.conformance import machine

    assert machine.shared_spark() is spark  # one session per process, whoever asks first
    machine._stop_spark()  # what the machine does once its budget is spent
    assert not spark_shared.is_live(spark)
    again = spark_shared.live_session()  # what the `spark` fixture returns to the next test
    assert spark_shared.is_live(again)
    assert again.sparkContext.parallelize([1, 2, 3], 2).sum() == 6
