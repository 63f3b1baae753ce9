"""A round under Spark task retries, in its own process (one SparkContext per JVM, and the
test session's is `local[2]` without retries): `local[2,3]` gives each task 3 attempts.

    python -m tests.gc.retried_round STORE FLAG

The store is wrapped so that the first list request after any delete fails once
(`helpers.ListFailsOnceAfterDelete`): that attempt dies after deleting keys, and Spark runs
it again. Prints the round's summary as JSON on stdout (the exception's summary if it
failed).
"""

from __future__ import annotations

import json
import sys

from epochgc.impl.gc.errors import GcError
from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.gc.session import spark_session
from tests.gc.helpers import NOW, ListFailsOnceAfterDelete, local_spec

GRACE = 12 * 3600.0


def main(store: str, flag: str) -> None:
    from pathlib import Path

    spark = spark_session("local[2,3]", app_name="epochgc-retried-round")
    factory = ListFailsOnceAfterDelete(local_spec(Path(store)), flag)
    opts = GcOptions(grace_s=GRACE, tasks=2, page_size=1, delete_batch_size=1,
                     delete_concurrency=1)
    try:
        s = run_gc(spark, factory, opts, clock=lambda: NOW)
    except GcError as e:
        s = e.summary
    finally:
        spark.stop()
    doc = json.loads(s.to_json())
    doc["already_gone"] = getattr(s, "already_gone", None)
    print(json.dumps(doc))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
