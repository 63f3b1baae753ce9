"""Writes `_cluster/partitions.json` (revision and partition table read together) with the
store's atomic put, in exactly the format `impl.gc.reports` parses."""

from __future__ import annotations

import json

from impl.controller.statemachine import ControllerStateMachine
from impl.gc.reports import PARTITIONS_KEY
from impl.store.base import ObjectStore


def partitions_document(sm: ControllerStateMachine) -> bytes:
    revision, names = sm.table()
    return json.dumps({"revision": revision, "partitions": names}, sort_keys=True).encode()


def publish_partitions(store: ObjectStore, sm: ControllerStateMachine) -> int:
    doc = partitions_document(sm)
    store.put(PARTITIONS_KEY, doc)
    return int(json.loads(doc)["revision"])
