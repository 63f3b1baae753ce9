"""Real S3-protocol servers on 127.0.0.1 for the tests: moto in server mode and SeaweedFS's
S3 gateway (issue 26). Every test that takes `s3_endpoint` or `s3_bucket` runs once per
server; a server that cannot start fails the test, it is never skipped."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from epochgc.impl.ports import free_ports

DUMMY_AWS_ENV = {
    # boto3's standard chain reads these; they are dummies for the loopback server only.
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


def set_dummy_aws_env() -> None:
    """Set before Spark starts too: Python workers inherit the JVM's environment. No session
    token: SeaweedFS takes one for one of its own STS tokens and refuses the request."""
    os.environ.update(DUMMY_AWS_ENV)
    os.environ.pop("AWS_SESSION_TOKEN", None)


def free_port() -> int:
    return free_ports(1)[0]


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


S3_SERVERS = ("moto", "seaweedfs")


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    with moto_server() as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def seaweedfs_endpoint() -> Iterator[str]:
    from tests.gc.seaweedfs import seaweedfs_server

    set_dummy_aws_env()
    with seaweedfs_server() as weed:
        yield weed.endpoint


@pytest.fixture(scope="session", params=S3_SERVERS)
def s3_endpoint(request: pytest.FixtureRequest) -> str:
    """Each server's endpoint in turn (pytest groups the tests by server)."""
    return str(request.getfixturevalue(f"{request.param}_endpoint"))


@pytest.fixture
def s3_server_name(request: pytest.FixtureRequest, s3_endpoint: str) -> str:
    """Which server this test runs against, for the few places where they differ."""
    return str(request.node.callspec.params["s3_endpoint"])


_bucket_counter = iter(range(10**6))


def new_bucket(endpoint: str) -> str:
    """A fresh, empty bucket on the server at `endpoint`."""
    import boto3

    name = f"epochgc-test-{next(_bucket_counter)}"
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=name)
    return name


@pytest.fixture
def s3_bucket(s3_endpoint: str) -> str:
    """A fresh, empty bucket per test."""
    return new_bucket(s3_endpoint)


@pytest.fixture
def moto_store_bucket(moto_endpoint: str) -> str:
    """A fresh moto bucket holding a store under `p1/` with a small cluster (M = 5)."""
    from epochgc.impl.store.s3 import S3Store
    from tests.gc.helpers import simple_cluster

    b = new_bucket(moto_endpoint)
    direct = S3Store(b, "p1", endpoint_url=moto_endpoint)
    try:
        simple_cluster(direct, 5)
    finally:
        direct.close()
    return b
