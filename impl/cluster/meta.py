"""DATA_DIR/cluster.json read and checked in one place: every command that reads it (cluster
start/stop/kill/status, produce, consume, barrier, topic, gc-admin advance-epoch) gets either
a file of the shape `LocalCluster.init` writes or `DamagedClusterFile` naming the file and
what is wrong (newuser10 L7: a missing key was a KeyError traceback, a truncated file
Python's JSON text without the file's name)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from epochgc.impl.cluster.errors import DamagedClusterFile
from epochgc.impl.cluster.owner import ID_PATTERN


@dataclass(frozen=True)
class Field:
    """One field of cluster.json: its name, what it holds (in words), and its check."""

    name: str
    holds: str
    required: bool = True


def _int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _strs(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(a, str) for a in v)


def _ints(v: object) -> list[int] | None:
    """v as a non-empty list of positive ints, else None."""
    if isinstance(v, list) and v and all(_int(i) and i > 0 for i in v):
        return v
    return None


def _int_map(v: object, keys: list[int], lo: int = 1, hi: int = 2**31) -> bool:
    """A map whose values are ints in [lo, hi) and which has every one of `keys`."""
    return (isinstance(v, dict) and all(str(k) in v for k in keys)
            and all(_int(p) and lo <= p < hi for p in v.values()))


# True once every node directory names the cluster's id (impl/cluster/local.py
# `legacy_allowed`, review41c C1): set at creation by this version, or by the start that
# finds an upgraded cluster's nodes all rewritten. Absent: an older version's file.
NAMED = "nodes_name_cluster"


def _checks(meta: dict[str, Any]) -> list[tuple[Field, bool]]:
    ids = _ints(meta.get("ids"))
    v = meta.get
    mint = v("mint_interval")
    return [
        (Field("ids", "a non-empty list of node ids"), ids is not None),
        *((Field(n, "a port (1-65535) for every node id"), _int_map(v(n), ids or [], 1, 65536))
          for n in ("raft", "client", "metrics")),
        (Field("store", "a store URL string"), isinstance(v("store"), str)),
        (Field("partitions", "a list of partition names"), _strs(v("partitions"))),
        (Field("mint_interval", "a number of seconds"),
         isinstance(mint, int | float) and not isinstance(mint, bool)),
        (Field("extra", "a list of node arguments"), _strs(v("extra"))),
        (Field("pids", "a map of node id to pid"), _int_map(v("pids"), [])),
        (Field("s3_endpoint", "a URL string or null", required=False),
         v("s3_endpoint") is None or isinstance(v("s3_endpoint"), str)),
        (Field("log_level", "a log level name", required=False),
         isinstance(v("log_level", ""), str)),
        # The id its store names it by (impl/cluster/owner.py); absent in a cluster made
        # before stores named their cluster (its next start adopts a store naming none).
        (Field("cluster_id", "32 hexadecimal digits", required=False),
         isinstance(v("cluster_id", ""), str) and ID_PATTERN.fullmatch(v("cluster_id", ""))
         is not None),
        (Field(NAMED, "true or false", required=False), isinstance(v(NAMED, False), bool)),
    ]


def load_meta(path: Path) -> dict[str, Any]:
    """cluster.json's contents, checked; {} when there is no file (no cluster yet). Any
    other read failure or shape is DamagedClusterFile: `cluster start` must not start a
    new cluster over a file it cannot read (it would overwrite what the file recorded)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise DamagedClusterFile(path, e.strerror or str(e)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DamagedClusterFile(path, f"not UTF-8 text (byte {e.start})") from None
    try:
        meta = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise DamagedClusterFile(path, f"not valid JSON: {e}") from None
    if not isinstance(meta, dict):
        raise DamagedClusterFile(path, f"not a JSON object (a {type(meta).__name__})")
    for field, ok in _checks(meta):
        if field.name not in meta:
            if field.required:
                raise DamagedClusterFile(path, f"missing field {field.name!r}")
        elif not ok:
            raise DamagedClusterFile(
                path, f"field {field.name!r} is not {field.holds}: {meta[field.name]!r:.60}")
    return meta
