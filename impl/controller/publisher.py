"""Writes `_cluster/partitions.json` (revision, partition table and each partition's
creation revision, read together) with the store's atomic put, in exactly the format
`impl.gc.reports` parses."""

from __future__ import annotations

import json

from epochgc.impl.controller.statemachine import ControllerStateMachine
from epochgc.impl.gc.reports import PARTITIONS_KEY
from epochgc.impl.store.base import ObjectStore


def partitions_document(sm: ControllerStateMachine) -> bytes:
    revision, names = sm.table()
    created = {n: sm.partitions[n].creation_revision for n in names}  # R35: the incarnations
    doc = {"revision": revision, "partitions": names, "created": created}
    return json.dumps(doc, sort_keys=True).encode()


def publish_partitions(store: ObjectStore, sm: ControllerStateMachine) -> int:
    doc = partitions_document(sm)
    store.put(PARTITIONS_KEY, doc)
    return int(json.loads(doc)["revision"])
