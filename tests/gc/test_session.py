"""The GC job's own Spark session (`impl/gc/session.py`)."""

from __future__ import annotations

from typing import Any

import pytest

from epochgc.impl.gc.session import LOCAL_JIT

pytestmark = pytest.mark.spark


def test_a_local_sessions_jvm_runs_the_quick_compiler_only(spark: Any) -> None:
    # Issue 29's throughput: on a local master the JVM shares the cores with the Python
    # workers that do the work, and its optimizing compiler took 0.7-1.2 s of CPU per
    # 100k-key round. The option must reach the JVM that runs, not only the conf.
    bean = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert LOCAL_JIT in list(bean.getInputArguments())
    options = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions")
    assert LOCAL_JIT in options and "log4j2.configurationFile" in options
