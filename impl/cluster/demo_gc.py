"""The demo's GC rounds: the real PySpark job (`impl.gc.job.run_gc`) on an embedded local
session when pyspark is importable, otherwise the model-based round (`gcround.gc_round`).

Spark takes seconds to start, so the session is built in a background thread while the
cluster boots; rounds are skipped until it is ready (GC simply starts later).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib.util
import time
from dataclasses import dataclass
from typing import Any

from epochgc.impl.cluster.gcround import gc_round
from epochgc.impl.store.base import ObjectStore
from epochgc.impl.store.url import StoreSpec


@dataclass(frozen=True)
class RoundResult:
    M: int | None
    blocked: str | None
    deleted: int  # as the engine counted it
    engine: str


def spark_available() -> bool:
    return importlib.util.find_spec("pyspark") is not None


class DemoGc:
    def __init__(self, spec: StoreSpec, store: ObjectStore, grace_s: float, engine: str) -> None:
        self.spec = spec
        self.store = store
        self.grace_s = grace_s
        if engine == "auto":
            engine = "spark" if spark_available() else "model"
        self.engine = engine
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="spark-boot")
        self._session: concurrent.futures.Future[Any] | None = None
        if engine == "spark":
            self._session = self._pool.submit(_boot_spark)

    def ready(self) -> bool:
        return self._session is None or self._session.done()

    def run_round(self) -> RoundResult:
        """One blocking round (call it from a worker thread)."""
        if self._session is None:
            r = gc_round(self.store, time.time(), grace_s=self.grace_s, max_report_age_s=30.0)
            return RoundResult(r.M, r.blocked, len(r.deleted), "model")
        from epochgc.impl.gc.job import GcOptions, run_gc

        spark = self._session.result()  # raises if Spark failed to start
        opts = GcOptions(grace_s=self.grace_s, allow_short_grace=True, max_report_age_s=30.0)
        s = run_gc(spark, self.spec, opts, clock=time.time)
        if s.refused or s.errors:
            raise RuntimeError(f"GC round incomplete: {s.refused or s.error_samples}")
        return RoundResult(s.M, s.blocked, s.deleted, "spark")

    def close(self) -> None:
        if self._session is not None:
            with contextlib.suppress(Exception):  # never started: nothing to stop
                self._session.result(timeout=120).stop()
        self._pool.shutdown(wait=False)


def _boot_spark() -> Any:
    from epochgc.impl.gc.session import spark_session

    # Two cores on the demo's reference machine: two listing tasks, driver on loopback.
    return spark_session("local[2]", "epochgc-demo")
