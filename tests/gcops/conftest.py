"""The shared local SparkSession of tests/gc (one per test session)."""

from tests.gc.conftest import _spark_process, spark

__all__ = ["_spark_process", "spark"]
