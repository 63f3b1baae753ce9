"""Session-wide test setup."""

from __future__ import annotations

import pytest

from tests.deep_cases import mark_deep
from tests.store.backends import backend, open_store
from tests.store.blackhole import hole, release
from tests.store.s3server import (
    moto_endpoint,
    moto_store_bucket,
    s3_bucket,
    s3_endpoint,
    s3_server_name,
    seaweedfs_endpoint,
    set_dummy_aws_env,
)

# Fixtures for every test directory.
__all__ = [
    "backend",
    "hole",
    "moto_endpoint",
    "moto_store_bucket",
    "open_store",
    "release",
    "s3_bucket",
    "s3_endpoint",
    "s3_server_name",
    "seaweedfs_endpoint",
]


def pytest_configure(config: pytest.Config) -> None:
    # Every S3 endpoint in the tests is a loopback server: use dummy credentials for the
    # whole session, set before any test starts a Spark JVM (its Python workers inherit
    # the environment at start-up, whichever suite starts it first), and so that no test
    # can ever reach a developer's real credentials.
    set_dummy_aws_env()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_deep(items)
