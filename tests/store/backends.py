"""One store of each kind the GC runs on, for tests that must hold on all of them: a local
directory, moto in server mode and SeaweedFS's S3 gateway (real servers on loopback)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from epochgc.impl.store.base import ObjectStore
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.url import StoreSpec
from tests.store.s3server import new_bucket

BACKENDS = ("local", "moto", "seaweedfs")

Opener = Callable[[], ObjectStore]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def open_store(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    """Opens a fresh store object on one new, empty store (a directory or a bucket)."""
    if backend == "local":
        root = tmp_path / "store"
        root.mkdir()
        return lambda: LocalStore(root)
    endpoint = str(request.getfixturevalue(f"{backend}_endpoint"))
    return StoreSpec("s3", new_bucket(endpoint), "gc", endpoint)
