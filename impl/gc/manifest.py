"""Where a manifest goes: any Hadoop file-system URI (`s3a://`, `hdfs://`, `file://`) or a
local path. Only a scheme-less path is made absolute (against the driver's directory); the
"already exists" check asks the target's own file system through Spark's JVM, so it looks
where the executors will write, not at the driver's disk."""

from __future__ import annotations

import os
import re
from typing import Any

from impl.gc.errors import GcError

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def has_scheme(path: str) -> bool:
    return bool(_SCHEME.match(path))


def manifest_target(path: str) -> str:
    """The URI Spark writes to: a URI as given, a plain path made absolute."""
    return path if has_scheme(path) else os.path.abspath(path)


def check_manifest_absent(spark: Any, path: str) -> None:
    """GcError if the manifest target exists (or its file system cannot be asked)."""
    target = manifest_target(path)
    try:
        jvm = spark.sparkContext._jvm
        hpath = jvm.org.apache.hadoop.fs.Path(target)
        fs = hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        exists = bool(fs.exists(hpath))
    except Exception as e:  # py4j wraps every JVM error; the first line names it
        from impl.gc.job import spark_error_line

        raise GcError(f"manifest {target}: cannot check it: {spark_error_line(e)}") from e
    if exists:
        raise GcError(f"manifest path {target} already exists; refusing to overwrite")
