"""Where a manifest goes: any Hadoop file-system URI (`s3a://`, `hdfs://`, `file://`) or a
local path. Only a scheme-less path is made absolute (against the driver's directory); the
"already exists" check asks the target's own file system through Spark's JVM, so it looks
where the executors will write, not at the driver's disk."""

from __future__ import annotations

import os
import re
import uuid
from typing import Any
from urllib.parse import urlsplit

from epochgc.impl.gc.errors import GcError

DATA_PREFIX = "level_zero/"  # where the L0 objects are: a manifest there would be listed

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def has_scheme(path: str) -> bool:
    return bool(_SCHEME.match(path))


def manifest_target(path: str) -> str:
    """The URI Spark writes to: a URI as given, a plain path made absolute."""
    return path if has_scheme(path) else os.path.abspath(path)


def check_manifest_outside_data(path: str, store: Any) -> None:
    """GcError if the manifest would land under the store's data prefix, where every later
    round would list its files as malformed keys (issue 29: one inside
    `STORE/level_zero/data/005/` was accepted). `store`: a StoreSpec (others are not
    checked: their location is not known here)."""
    problem = inside_data_problem(path, store, "manifest")
    if problem is not None:
        raise GcError(problem)


def inside_data_problem(path: str, store: Any, what: str) -> str | None:
    """Why a file the command writes at `path` may not go there: under the store's data
    prefix, where every later round lists it as a malformed key and a real round ends
    incomplete until it is removed by hand (newuser9 K5: a dry run's `--list` and
    `--metrics-file` were accepted there, which the manifest is not). The one check for
    the manifest, `--list`, `--metrics-file` and `cluster start --trace`. `store`: a
    StoreSpec (None or another: not checked, its location is not known)."""
    kind, location = getattr(store, "kind", None), getattr(store, "location", None)
    if not isinstance(location, str):
        return None
    target = manifest_target(path)
    parts = urlsplit(target)
    if kind == "file" and parts.scheme in ("", "file"):
        where = os.path.realpath(parts.path if parts.scheme else target)
        data = os.path.realpath(os.path.join(location, DATA_PREFIX))
        inside = where == data.rstrip("/") or where.startswith(data.rstrip("/") + "/")
    elif kind == "s3" and parts.scheme in ("s3", "s3a", "s3n"):
        prefix = str(getattr(store, "prefix", "") or "").strip("/")
        data = "/".join(p for p in (prefix, DATA_PREFIX.rstrip("/")) if p)
        key = parts.path.lstrip("/")
        inside = parts.netloc == location and (key == data or key.startswith(data + "/"))
    else:
        return None
    if not inside:
        return None
    return (f"{what} {target} is inside the store's data prefix ({DATA_PREFIX}); "
            "refusing: later rounds would list its files")


def check_manifest_absent(spark: Any, path: str) -> None:
    """GcError if the manifest target exists, or cannot be written (its parent is a file,
    not writable, or its file system cannot be asked): probed by creating and deleting a
    file beside it, before anything is listed or deleted (issue 29: a target whose parent
    was a regular file passed, and the round lost its manifest after deleting)."""
    target = manifest_target(path)
    try:
        jvm = spark.sparkContext._jvm
        hpath = jvm.org.apache.hadoop.fs.Path(target)
        fs = hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        exists = bool(fs.exists(hpath))
    except Exception as e:  # py4j wraps every JVM error; the first line names it
        from epochgc.impl.gc.sparkerrors import spark_error_line

        raise GcError(f"manifest {target}: cannot check it: {spark_error_line(e)}") from e
    if exists:
        raise GcError(f"manifest path {target} already exists; refusing to overwrite")
    try:
        parent = hpath.getParent()
        if parent is not None and fs.exists(parent) and not fs.getFileStatus(parent).isDirectory():
            raise GcError(f"manifest {target}: its parent {parent.toString()} is not a directory")
        probe = jvm.org.apache.hadoop.fs.Path(parent, f".epochgc-probe-{uuid.uuid4().hex}")
        fs.create(probe, False).close()
        fs.delete(probe, False)
    except GcError:
        raise
    except Exception as e:
        from epochgc.impl.gc.sparkerrors import spark_error_line

        raise GcError(f"manifest {target}: cannot be written: {spark_error_line(e)}") from e
