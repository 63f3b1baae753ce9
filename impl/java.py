"""The Java runtime a Spark driver this process starts would run on, found as PySpark finds
it, and whether it can run Spark (newuser9 K7: with no Java, `gc` said `PySparkRuntimeError:
[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number.`, exit 1,
and a real round wrote an `error` record).

How PySpark starts the JVM (pyspark/java_gateway.py `launch_gateway`, 4.3.0): unless
PYSPARK_GATEWAY_PORT is set (a JVM already runs: spark-submit started this process), it runs
`$SPARK_HOME/bin/spark-submit`, whose `bin/spark-class` picks the runner:
`if [ -n "${JAVA_HOME}" ]; then RUNNER="${JAVA_HOME}/bin/java"`, else `java` if
`command -v java` finds one, else it fails with "JAVA_HOME is not set".

Which Java: Spark 4's classes are Java 17 class files (major version 61 in
`pyspark/jars/spark-core_2.13-4.3.0.jar`, `org/apache/spark/SparkContext.class`; JVMS
section 4.1, "major_version"), so an older JVM cannot load them; Spark's overview page
("Spark runs on Java 17/21, ...") names 17 and 21.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

MIN_JAVA = 17  # the class-file version of the installed Spark's jars (see above)
SUPPORTED = "Java 17 or 21"
# `java -version` starts a JVM: a bound for a hang, not a timing assumption. A runtime that
# does not answer in it is not refused (a loaded machine); Spark then tries it.
VERSION_TIMEOUT_S = 60.0

# `java -version` prints to stderr, e.g. `openjdk version "17.0.15" 2025-04-15` or
# `java version "1.8.0_491"` (before Java 9 the feature number came after "1.").
_VERSION = re.compile(r'version "(?:1\.)?(\d+)[^"]*"')


@dataclass(frozen=True)
class JavaProblem:
    """Why Spark cannot start: what was looked at, in words."""

    message: str


def runner() -> tuple[str | None, str]:
    """The java executable spark-class would run (None: none found) and where it was looked
    for, in words."""
    home = os.environ.get("JAVA_HOME")
    if home:
        return os.path.join(home, "bin", "java"), f"JAVA_HOME={home}"
    found = shutil.which("java")
    return found, "JAVA_HOME unset, `java` on PATH" if found else "JAVA_HOME unset"


def major_version(version_output: str) -> int | None:
    """The feature version `java -version` printed (8 for "1.8.0_491"), None if none."""
    m = _VERSION.search(version_output)
    return int(m.group(1)) if m else None


@functools.cache
def _version(java: str) -> tuple[int, str]:
    """`java -version`'s exit code and output, once per executable and process (a command
    run in-process many times, as the tests do, pays for one JVM start)."""
    done = subprocess.run([java, "-version"], capture_output=True, text=True,
                          errors="replace", timeout=VERSION_TIMEOUT_S, check=False,
                          stdin=subprocess.DEVNULL)
    return done.returncode, (done.stderr or done.stdout).strip()


def problem() -> JavaProblem | None:
    """Why this process could not start Spark's JVM (None: it can, or it need not: a JVM is
    already there). Runs `java -version` once."""
    if "PYSPARK_GATEWAY_PORT" in os.environ:  # spark-submit's JVM started this process
        return None
    java, where = runner()
    need = f"Spark needs {SUPPORTED}"
    if java is None:
        return JavaProblem(f"Java not found ({where}, no `java` on PATH): {need}; install "
                           "one or set JAVA_HOME to it")
    if not (os.path.isfile(java) and os.access(java, os.X_OK)):
        return JavaProblem(f"Java not found: {java} ({where}) is not an executable file: "
                           f"{need}; set JAVA_HOME to a Java installation")
    try:
        code, said = _version(java)
    except subprocess.TimeoutExpired:
        return None  # not known: not refused
    except OSError as e:
        return JavaProblem(f"cannot run {java} ({where}): {e.strerror or e}: {need}")
    first = said.splitlines()[0] if said else "no output"
    if code != 0:
        return JavaProblem(f"`{java} -version` ({where}) failed (exit {code}: {first}): "
                           f"{need}")
    version = major_version(said)
    if version is not None and version < MIN_JAVA:
        return JavaProblem(f"{java} ({where}) is Java {version} ({first}): {need}; set "
                           "JAVA_HOME to a newer one")
    return None
