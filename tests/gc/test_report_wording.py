"""Damaged cluster documents are named in JSON's and UTF-8's words (newuser5 G7): a
`partitions.json` of bytes `\\xff\\xfe` said "not valid JSON: Expecting value" (json.loads
took the bytes for UTF-16), a report of `\\xff` "'utf-8' codec can't decode byte 0xff in
position 0", a report `null` "must be a JSON object, got NoneType"."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochgc.impl.gc.errors import ReportError
from epochgc.impl.gc.reports import HEALTH_PREFIX, PARTITIONS_KEY, read_cluster_view
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import NOW, simple_cluster


@pytest.mark.parametrize(("key", "data", "says"), [
    (PARTITIONS_KEY, b"\xff\xfe", "not UTF-8 (invalid start byte at byte 0)"),
    (HEALTH_PREFIX + "n1.json", b"\xff", "not UTF-8 (invalid start byte at byte 0)"),
    (HEALTH_PREFIX + "n1.json", b"null", "must be a JSON object, got null"),
    (HEALTH_PREFIX + "n1.json", b"[1]", "must be a JSON object, got array"),
])
def test_a_damaged_document_is_named_in_json_words(tmp_path: Path, key: str, data: bytes,
                                                    says: str) -> None:
    store = LocalStore(tmp_path / "s", create=True)
    simple_cluster(store, 100)
    store.put(key, data)
    with pytest.raises(ReportError) as e:
        read_cluster_view(store, NOW, 3600.0)
    text = str(e.value)
    assert key in text and says in text, text
    for python in ("Expecting value", "codec", "NoneType", "list"):
        assert python not in text, text
