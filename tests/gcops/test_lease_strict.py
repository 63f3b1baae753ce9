"""fix30: a round's lease reader survives hostile lease documents (before: RecursionError,
ValueError or TypeError out of `Lease.acquire`, i.e. out of the round), and what sits at the
lease path without being a lease is named as such, not as "another round (round ?)"."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from epochgc.impl.gc.errors import GcError
from epochgc.impl.gc.lease import LEASE_KEY, Lease
from epochgc.impl.store.local import LocalStore


@pytest.mark.parametrize("doc", [
    b'{"round": ' + b"[" * 1900 + b"]" * 1900 + b"}",
    b'{"round": "x", "expires_at": "soon"}',
    b'{"round": "x", "expires_at": [1]}',
    b'{"round": "x", "expires_at": 1' + b"0" * 400 + b"}",
])
def test_a_hostile_lease_document_is_taken_over_like_an_unreadable_one(
    tmp_path: Path, doc: bytes
) -> None:
    LocalStore(tmp_path).put(LEASE_KEY, doc)
    Lease(lambda: LocalStore(tmp_path), "round-B").acquire()
    assert b"round-B" in LocalStore(tmp_path).get(LEASE_KEY)


def test_a_link_at_the_lease_path_is_named_not_taken_for_a_round(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text("{}")
    (tmp_path / "store" / LEASE_KEY).parent.mkdir(parents=True)
    os.symlink(target, tmp_path / "store" / LEASE_KEY)
    with pytest.raises(GcError, match="not a regular object") as e:
        Lease(lambda: LocalStore(tmp_path / "store"), "round-B").acquire()
    assert LEASE_KEY in str(e.value) and "reset --force" in str(e.value)
    assert target.read_text() == "{}"
