"""Only `_cluster/health/NODE.json` is a node's report (issue 31): a well-formed report in a
subdirectory (an archive, an operator's copy) is never counted, so a partition reported only
there still blocks the round instead of letting an old M through."""

from __future__ import annotations

import json
import os
from pathlib import Path

from epochgc.impl.gc.reports import HEALTH_PREFIX, read_cluster_view
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import NOW, write_health, write_partitions


def test_a_report_in_a_subdirectory_does_not_count(tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path), create=True)
    write_partitions(store, 100, ["t/0", "t/1"])
    write_health(store, "n1", NOW - 10, [("t/0", 40)])  # t/1 unreported: blocks
    archived = {"node": "n2", "written_at": NOW - 10,
                "replicas": [{"partition": "t/1", "term": 1, "inactive_epoch": 50,
                              "created": 0}]}
    key = f"{HEALTH_PREFIX}archive/n2.json"
    store.put(key, json.dumps(archived).encode())
    os.utime(tmp_path / key, (NOW - 10, NOW - 10))
    got = read_cluster_view(store, NOW, 300).gc_epoch()
    assert got.M is None and got.blocked is not None and "t/1" in got.blocked, got
