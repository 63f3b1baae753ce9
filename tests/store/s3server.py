"""A real S3-protocol server on 127.0.0.1 (moto in server mode) for the tests."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

DUMMY_AWS_ENV = {
    # boto3's standard chain reads these; they are dummies for the loopback server only.
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


def set_dummy_aws_env() -> None:
    """Set before Spark starts too: Python workers inherit the JVM's environment."""
    os.environ.update(DUMMY_AWS_ENV)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def moto_server() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    set_dummy_aws_env()
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    with moto_server() as endpoint:
        yield endpoint


_bucket_counter = iter(range(10**6))


@pytest.fixture
def s3_bucket(s3_endpoint: str) -> str:
    """A fresh, empty bucket per test."""
    import boto3

    name = f"epochgc-test-{next(_bucket_counter)}"
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=name)
    return name
