"""The Spark master URLs `epochgc gc --master` accepts: those the Spark it runs on can
start, so a mistyped one is a usage error (64) before the JVM starts, not a
`PySparkRuntimeError: [JAVA_GATEWAY_EXITED]` after it (issue 41 item 11).

The forms are Spark's own (4.3.0, the pinned pyspark): `SparkContext.createTaskScheduler`
matches `local` and `org.apache.spark.SparkMasterRegex` (its regexes, read from
spark-core_2.13-4.3.0.jar below), and otherwise asks each `ExternalClusterManager` listed
in the jars' `META-INF/services`: spark-yarn's `YarnClusterManager` takes exactly `yarn`,
spark-kubernetes' `KubernetesClusterManager` a URL starting `k8s`. Anything else Spark
refuses with "Could not parse Master URL".
"""

from __future__ import annotations

import re

_FORMS = (
    re.compile(r"local"),
    re.compile(r"local\[([0-9]+|\*)\]"),  # SparkMasterRegex.LOCAL_N_REGEX
    re.compile(r"local\[([0-9]+|\*)\s*,\s*([0-9]+)\]"),  # LOCAL_N_FAILURES_REGEX
    re.compile(r"local-cluster\[\s*([0-9]+)\s*,\s*([0-9]+)\s*,\s*([0-9]+)\s*]"),
    re.compile(r"spark://(.*)"),  # SPARK_REGEX (one or more HOST:PORT, comma-separated)
    re.compile(r"yarn"),  # YarnClusterManager.canCreate
    re.compile(r"k8s.*", re.DOTALL),  # KubernetesClusterManager.canCreate
)

EXPECTED = ("local, local[N], local[*], local[N,F], local-cluster[N,C,M], spark://HOST:PORT, "
            "yarn or k8s://...")


def master_problem(url: str) -> str | None:
    """Why Spark would not take `url` as its master (None: it would)."""
    if any(form.fullmatch(url) for form in _FORMS):
        return None
    return f"--master {url!r}: not a Spark master URL (expected {EXPECTED})"
