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


# Spark reads each number with Scala's `String.toInt` (a java.lang.Integer: at most
# 2**31 - 1, else NumberFormatException), and refuses a local master with fewer than one
# thread ("Asked to run locally with 0 threads", `SparkContext.createTaskScheduler`,
# 4.3.0). newuser9 K1: `local[0]` and `local[<20 digits>]` passed this check and failed in
# the JVM, exit 1 with two Java stack traces.
INT_MAX = 2**31 - 1


def master_problem(url: str) -> str | None:
    """Why Spark would not take `url` as its master (None: it would)."""
    for form in _FORMS:
        m = form.fullmatch(url)
        if m is None:
            continue
        if form.pattern.startswith(("local", "local-cluster")):
            return _numbers_problem(url, form.pattern.startswith("local-cluster"),
                                    [g for g in m.groups()])
        return None
    return f"--master {url!r}: not a Spark master URL (expected {EXPECTED})"


def _numbers_problem(url: str, cluster: bool, groups: list[str]) -> str | None:
    numbers = [int(g) for g in groups if g is not None and g != "*"]
    if any(n > INT_MAX for n in numbers):
        return f"--master {url!r}: a number above {INT_MAX:,} (Spark reads each as an int)"
    if not cluster and groups and groups[0] not in ("*", None) and int(groups[0]) == 0:
        return f"--master {url!r}: 0 threads (a local master needs at least 1)"
    if cluster and (int(groups[0]) == 0 or int(groups[1]) == 0):
        # Spark would start and wait for ever: no executor can register (newuser9 K2).
        what = "0 workers" if int(groups[0]) == 0 else "0 cores per worker"
        return (f"--master {url!r}: {what}: no executor could ever run a task (expected "
                "local-cluster[WORKERS,CORES,MEMORY_MIB], each at least 1)")
    return None
