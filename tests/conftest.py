"""Session-wide test setup."""

from __future__ import annotations

import signal

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
    # A session started with SIGINT ignored (`pytest ... &` from a non-interactive shell:
    # bash(1), SIGNALS, "asynchronous commands ignore SIGINT and SIGQUIT"; a CI runner
    # may start it so) would pass the SIG_IGN on to every `epochgc` the tests start (exec
    # keeps an ignored signal ignored: POSIX exec, "Signals set to be ignored by the
    # calling process image shall be set to be ignored by the new process image"), and
    # epochgc then keeps it ignored (newuser19 V4): every test that sends one SIGINT
    # would fail. A handler of Python's own is reset to the default action on exec, so
    # the children start with SIGINT's default action, as from a terminal.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_deep(items)
