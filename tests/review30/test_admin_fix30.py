"""fix30: what the review30 tests of the admin state and the lease do not pin: a pause
reason too long for the reader is cut (and says so) rather than lost, whatever its
characters; documents a strict reader refuses read as paused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from epochgc.impl.gc.admin import (
    _MAX_BYTES,
    ADMIN_KEY,
    MAX_REASON_BYTES,
    read_admin_state,
    write_admin_state,
)
from epochgc.impl.store.local import LocalStore

from tests.gc.helpers import NOW


@pytest.mark.parametrize("char", ["é", "\x01", "\U0001f600", "\udc80"])
def test_any_long_reason_is_cut_and_reads_back(tmp_path: Path, char: str) -> None:
    store = LocalStore(tmp_path, create=True)
    written = write_admin_state(store, True, "incident 7: " + char * 5000, NOW)
    assert len(store.get(ADMIN_KEY)) <= _MAX_BYTES
    assert len(json.dumps(written.reason, ensure_ascii=False).encode()) <= MAX_REASON_BYTES
    state = read_admin_state(store)
    assert state == written, state
    assert state.reason.startswith("incident 7: ") and state.reason.endswith(" [cut]")


@pytest.mark.parametrize("doc", [
    b'{"paused": false, "at": NaN}',
    b'{"paused": false, "at": 1e400}',
    b'{"paused": false, "x": {"a": 1, "a": 2}}',
])
def test_strictly_refused_documents_read_as_paused(tmp_path: Path, doc: bytes) -> None:
    store = LocalStore(tmp_path, create=True)
    store.put(ADMIN_KEY, doc)
    state = read_admin_state(store)
    assert state.paused and "malformed" in state.reason and ADMIN_KEY in state.reason, state
