"""Checks a command makes before it starts any work (a node, Spark, a round): the extras it
imports, the names it will hand to its nodes, the paths it will write, the store it will
write to. Each failure is one line naming what and where, raised as `Refused` with the exit
code it maps to (impl/exitcodes.py), so the command leaves nothing running. Called first
thing in a command, a refusal needs no cleanup."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import stat
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from urllib.parse import SplitResult, urlsplit

import click

from epochgc.impl.exitcodes import ExitCode
from epochgc.impl.store.base import ObjectStore, StoreError
from epochgc.impl.store.url import StoreSpec

# Module -> the extra that installs it (pyproject.toml [project.optional-dependencies];
# tests/test_extras.py checks every extra a message or a document names against it).
EXTRA_OF = {"pyspark": "spark", "boto3": "s3", "hypothesis": "conform"}
# A command whose own extra installs everything it may import: its message names that one
# too, as the README does (`pip install '.[gc,conform]'`; `[gc]` = spark + s3).
COMMAND_EXTRA = {"gc": "gc"}

# The key a store probe writes and deletes: outside `level_zero/` (GC lists that) and
# outside `_cluster/health/` and `_cluster/gc/` (the reports and GC's own records).
PROBE_PREFIX = "_cluster/preflight/"
# A pushgateway's connect check: a host that drops the SYN holds `gc` this long, refused.
CONNECT_S = 10.0


class Refused(click.ClickException):
    """A preflight refusal: one line (`epochgc CMD: error: ...` on stderr, the shape of
    every command's error, impl/errorline.py);
    `Refused(message, code)` makes the subclass whose class exit code is `code`."""

    exit_code = ExitCode.FAILED

    def __new__(cls, message: str, code: ExitCode = ExitCode.FAILED) -> Refused:
        return super().__new__(_BY_CODE.get(code, cls))

    def __init__(self, message: str, code: ExitCode = ExitCode.FAILED) -> None:
        super().__init__(message)


class _RefusedUsage(Refused):
    exit_code = ExitCode.USAGE


class _RefusedMissing(Refused):
    exit_code = ExitCode.UNAVAILABLE


class _RefusedData(Refused):
    exit_code = ExitCode.DATAERR


_BY_CODE: dict[ExitCode, type[Refused]] = {
    ExitCode.USAGE: _RefusedUsage, ExitCode.UNAVAILABLE: _RefusedMissing,
    ExitCode.DATAERR: _RefusedData}


def require_modules(command: str, modules: Iterable[str]) -> None:
    """Refused (69) naming the extra to install, for the first module that is absent.
    `find_spec` looks without importing: pyspark alone takes seconds to import."""
    for module in modules:
        if not _installed(module):
            extra = EXTRA_OF[module]
            whole = COMMAND_EXTRA.get(command)
            also = (f" (or 'epochgc[{whole}]', everything `epochgc {command}` uses)"
                    if whole and whole != extra else "")
            # The error line names the command (impl/errorline.py): not again here
            # (newuser13 Q9: "Error: epochgc gc: Java not found").
            raise Refused(f"{module} is not installed (this command needs it): "
                          f"pip install 'epochgc[{extra}]'{also}", ExitCode.UNAVAILABLE)


def require_spark(command: str, modules: Iterable[str] = (), *,
                  workers_here: bool = True) -> None:
    """PySpark (and `modules`), and a Java runtime that can run the Spark driver this
    process starts, found as PySpark's launcher finds it (impl/java.py): refused (69), one
    line naming what was looked at, before anything else starts (newuser9 K7). With
    `workers_here` (a local master: Spark's Python workers start on this host), also the
    Python they run (`worker_python_problem`)."""
    require_modules(command, ("pyspark", *modules))
    bad = spark_problem(workers_here=workers_here)
    if bad is not None:
        raise Refused(bad, ExitCode.UNAVAILABLE)


def spark_problem(*, workers_here: bool = True) -> str | None:
    """Why Spark could not start or run its local workers on this host, in one line (None:
    it can). The one set of checks `require_spark` refuses by and `demo --gc-engine auto`
    falls back by (impl/cluster/demo_gc.py), so the two always agree (newuser17 T3b: gc
    failed where demo ran). In the order PySpark meets them: spark-submit, Java, then the
    workers' Python."""
    from epochgc.impl.java import problem

    bad = spark_home_problem()
    if bad is None:
        found = problem()
        bad = found.message if found is not None else None
    if bad is None and workers_here:
        bad = worker_python_problem()
    return bad


# How PySpark finds the spark-submit it launches its JVM by (pyspark/java_gateway.py
# `launch_gateway`, 4.x: `SPARK_HOME = _find_spark_home()`, `command =
# [os.path.join(SPARK_HOME, "./bin/spark-submit")]`), unless PYSPARK_GATEWAY_PORT says a JVM
# runs already; pyspark/find_spark_home.py: `if "SPARK_HOME" in os.environ: return
# os.environ["SPARK_HOME"]`, trusted as it is, set but empty too (then the path is relative:
# `./bin/spark-submit` in the current directory). Unset, PySpark finds its own installation.
SPARK_HOME_ENV = "SPARK_HOME"
_SUBMIT = os.path.join("bin", "spark-submit")


def spark_home_problem() -> str | None:
    """Why PySpark could not run spark-submit as SPARK_HOME names it, or None (unset: PySpark
    uses its own). newuser17 T3b: `SPARK_HOME=/nonexistent` and `SPARK_HOME=` made `gc` fail
    after its checks, exit 1, with "FileNotFoundError: ... './bin/spark-submit'"."""
    if "PYSPARK_GATEWAY_PORT" in os.environ or SPARK_HOME_ENV not in os.environ:
        return None
    home = os.environ[SPARK_HOME_ENV]
    submit = os.path.join(home, "./bin/spark-submit")  # PySpark's own join
    if os.path.isfile(submit) and os.access(submit, os.X_OK):
        return None
    fix = (f"unset {SPARK_HOME_ENV} (PySpark then uses its own installation) or set it to "
           f"a Spark installation (a directory with {_SUBMIT})")
    if not home:
        return (f"{SPARK_HOME_ENV} is set but empty: PySpark would run ./bin/spark-submit "
                f"in the current directory ({os.getcwd()}), which is not an executable "
                f"file; {fix}")
    return (f"{SPARK_HOME_ENV}={home}: {os.path.normpath(submit)} is not an executable "
            f"file (PySpark starts Spark by it); {fix}")


# The Python Spark's workers run: PySpark's SparkContext takes `PYSPARK_PYTHON`, else
# `python3` (pyspark/core/context.py, 4.x: `self.pythonExec = os.environ.get(
# "PYSPARK_PYTHON", "python3")`), and the JVM starts it by that name (a bare name is looked
# up on PATH, as execvp does: java.lang.ProcessBuilder).
WORKER_PYTHON_ENV = "PYSPARK_PYTHON"
WORKER_PYTHON_DEFAULT = "python3"


def worker_python_problem() -> str | None:
    """Why Spark's Python workers on this host could not start (their Python is no
    executable file), or None. newuser13 Q4: `PYSPARK_PYTHON=/nonexist/python` was found
    only by the first task, after the round took its lease and wrote its START, as Java's
    `IOException: error=2, No such file or directory`, naming neither the path nor the
    variable. Only a local master's workers run here: elsewhere the path is the workers'
    hosts', which this one cannot check."""
    import shutil

    given = os.environ.get(WORKER_PYTHON_ENV)
    if given == "":  # PySpark's `.get(..., "python3")` returns "": the JVM runs ""
        return (f"{WORKER_PYTHON_ENV} is set but empty (Spark would run the empty string "
                f"as its workers' Python): unset it or name a Python with PySpark (this "
                f"command runs {sys.executable})")
    exe = given or WORKER_PYTHON_DEFAULT
    if shutil.which(exe) is not None:  # a path is checked as it is, a bare name on PATH
        return None
    what = "is not an executable file" if os.sep in exe else "is not found on PATH"
    where = (f"({WORKER_PYTHON_ENV})" if given else
             f"(the default: {WORKER_PYTHON_ENV} is not set)")
    return (f"Spark's worker Python {exe} {where} {what}; set {WORKER_PYTHON_ENV} to a "
            f"Python with PySpark (this command runs {sys.executable})")


def _installed(module: str) -> bool:
    if module in sys.modules:  # imported already, or blocked (None: import raises)
        return sys.modules[module] is not None
    return importlib.util.find_spec(module) is not None


def store_modules(spec: StoreSpec) -> tuple[str, ...]:
    """What opening the store imports."""
    return ("boto3",) if spec.kind == "s3" else ()


def writable_file(path: str, option: str, *, new: bool = False) -> str:
    """The absolute path of a file the command will create (`new`: never replace) or
    replace at the end of its work: refused (64) now, naming the path and why, if its
    directory is missing, is not a directory or takes no new file, or it names a directory
    (or, with `new`, an existing file), or is empty (impl/pathopt.py: `--list ''` was
    "is a directory", the current one)."""
    if not path:
        raise Refused(f"{option}: the path is empty; give a file's path", ExitCode.USAGE)
    target = os.path.abspath(os.path.expanduser(path))
    parent = os.path.dirname(target)
    if os.path.isdir(target):
        raise Refused(f"{option} {path}: is a directory; give a file's path",
                      ExitCode.USAGE)
    _check_dir(parent, f"{option} {path}: directory {parent}")
    not_regular = special_file(target)
    if not_regular is not None:
        raise Refused(f"{option} {path}: {not_regular} (a regular file or a new path is "
                      "expected; it is never replaced)", ExitCode.USAGE)
    if new and os.path.lexists(target):
        raise Refused(f"{option} {path}: exists (it is never overwritten)", ExitCode.USAGE)
    if os.path.exists(target) and not os.access(target, os.W_OK):
        raise Refused(f"{option} {path}: the file is not writable", ExitCode.USAGE)
    return target


def special_file(path: str) -> str | None:
    """Why `path` may not be replaced by a new regular file (None: it does not exist or is
    a regular file). newuser8 I5: `gc --metrics-file /dev/full`, run as root, replaced the
    device node with the metrics text (a temp file renamed over it); a FIFO and a symlink
    were replaced alike. rename(2) replaces whatever directory entry the new name has
    (POSIX rename(): "If the link named by the new argument exists, it shall be removed"),
    so anything that is not a regular file is refused, a symlink too (not followed: the
    file it names could be anything, and --list/--manifest refuse any existing path)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISREG(st.st_mode):
        return None
    kind = ("a symbolic link" if stat.S_ISLNK(st.st_mode) else
            "a directory" if stat.S_ISDIR(st.st_mode) else
            "a character device" if stat.S_ISCHR(st.st_mode) else
            "a block device" if stat.S_ISBLK(st.st_mode) else
            "a FIFO" if stat.S_ISFIFO(st.st_mode) else
            "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
    return f"is {kind}"


def creatable_path(path: str, option: str) -> None:
    """Refused (64) now if nothing can be made at the local `path`: it exists (never
    overwritten), or its parent is not an existing directory a file can be created in.
    Issue 41 F12: `gc --manifest /proc/m.csv` was refused only by the probe after Spark
    started, exit 1, and left an `error` round record. newuser6 H4: a missing parent was
    made, with every directory above it (Hadoop's `mkdirs`), where `--list` and
    `--metrics-file` refuse one (`writable_file`): a mistyped path was created quietly."""
    target = os.path.abspath(os.path.expanduser(path))
    if os.path.lexists(target):
        raise Refused(f"{option} {path} already exists; refusing to overwrite",
                      ExitCode.USAGE)
    parent = os.path.dirname(target)
    _check_dir(parent, f"{option} {path}: directory {parent}")


def _check_dir(directory: str, what: str) -> None:
    """Refused (64) unless `directory` is a directory a file can be created in. Tried by
    creating and removing one (issue 41 item 5): `os.access` answers yes for root on /proc
    and on a read-only mount, where the write at the end failed after the round."""
    if not os.path.exists(directory):
        raise Refused(f"{what} does not exist", ExitCode.USAGE)
    if not os.path.isdir(directory):
        raise Refused(f"{what} is not a directory", ExitCode.USAGE)
    try:
        fd, probe = tempfile.mkstemp(prefix=".epochgc-probe-", dir=directory)
    except OSError as e:
        raise Refused(f"{what}: cannot create a file in it: {e.strerror or e}",
                      ExitCode.USAGE) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)


def writable_dir(path: str, option: str) -> Path:
    """A directory the command will write into (made, with its parents, if missing):
    refused (64) now if it cannot be made or written."""
    target = Path(path).expanduser().absolute()
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise Refused(f"{option} {path}: cannot create it: {e.strerror or e}",
                      ExitCode.USAGE) from None
    _check_dir(str(target), f"{option} {path}: directory")
    return target


def partition_names(names: Iterable[str], option: str) -> list[str]:
    """The partition names, each `TOPIC/N` with TOPIC a topic name `epochgc topic create`
    accepts and N a decimal number; refused (64) naming the first bad one."""
    from epochgc.impl.controller.statemachine import ControllerCommandError, check_partition_name
    from epochgc.impl.controller.topics import TopicError, check_topic_name

    out: list[str] = []
    for name in names:
        topic, _, n = name.rpartition("/")
        try:
            check_partition_name(name)
            check_topic_name(topic)
        except (ControllerCommandError, TopicError):
            raise Refused(f"{option}: {name!r} is not a partition name: TOPIC/N expected, "
                          "TOPIC a letter or '_' then letters, digits, '_', '.', '-' (at most "
                          "128), N a number", ExitCode.USAGE) from None
        if not n.isascii():
            raise Refused(f"{option}: {name!r}: the partition number is not ASCII digits",
                          ExitCode.USAGE)
        if name in out:
            raise Refused(f"{option}: partition {name!r} is listed twice", ExitCode.USAGE)
        out.append(name)
    if not out:
        raise Refused(f"{option}: no partition named", ExitCode.USAGE)
    return out


def store_writable(spec: StoreSpec, command: str,
                   say: Callable[[str], None] | None = None) -> None:
    """Write one small object into the store and delete it again: refused (1) if the store
    cannot be opened (an S3 bucket that does not exist, an unreachable endpoint) or will
    not take a write (permissions), before anything that needs it starts. An S3 store's
    two requests are bounded as `gc`'s control reads are (`patience.py`) and a wait is
    said through `say` ("waiting for ENDPOINT: no answer yet ..."): newuser11 M1/M2, on
    the ordinary client (60 s read timeout, 10 adaptive attempts) an endpoint that never
    answers held `cluster start` silent for 11 minutes, an unreachable one for 26 s."""
    require_modules(command, store_modules(spec))
    key = f"{PROBE_PREFIX}{uuid.uuid4().hex}"
    with bounded_store(spec, say, f"the preflight write of {key!r}") as store:
        why = probe_write(store, key, b"epochgc preflight: a store the command can write\n")
        if why is not None:
            raise Refused(f"store {spec.describe()}: cannot write to it: {why}",
                          ExitCode.FAILED)


def probe_write(store: ObjectStore, key: str, body: bytes) -> str | None:
    """Write `key` and delete it again: None if the store took both, else why not. A
    delete refused per key is answered in the batch's result, not raised (S3
    DeleteObjects: an `Error` element per key it could not delete, in a 200 answer; the
    API reference's "DeleteObjects", Response Syntax): review41c C5, a store that took the
    write and refused the delete passed, the probe object left behind, and `gc-admin
    expire --apply` then failed at its first removal."""
    try:
        store.put(key, body)
        result = store.delete_batch([key])
    except (StoreError, OSError) as e:
        return str(e)
    if key in result.errors or key in result.changed:
        why = result.errors.get(key, "it changed meanwhile")
        return f"it took {key!r} but did not delete it: {why}"
    return None


@contextlib.contextmanager
def bounded_store(spec: StoreSpec, say: Callable[[str], None] | None,
                  what: str) -> Iterator[ObjectStore]:
    """The store opened for a command's own few requests, refused (1) if it cannot be
    opened; an S3 store's writes bounded and their waits said (`S3Store.bounded_writes`,
    `what` naming them); closed on the way out."""
    from epochgc.impl.store.s3 import S3Store
    from epochgc.impl.store.url import open_control

    try:
        store = open_control(spec, say)
    except (StoreError, OSError) as e:
        raise Refused(f"store {spec.describe()}: cannot open it: {e}", ExitCode.FAILED) from None
    try:
        with (store.bounded_writes(what) if isinstance(store, S3Store)
              else contextlib.nullcontext()):
            yield store
    finally:
        store.close()


def pushgateway_address(value: str, option: str = "--pushgateway") -> str:
    """`value` as prometheus_client's push_to_gateway reads it (a URL, or HOST:PORT taken
    as http://), refused (64) now, naming it, if it names no host, has a bad port or a
    scheme other than http/https, or (reached directly, not through a proxy) its host does
    not resolve (issue 41: `--pushgateway notahost` ran the round, then warned, exit 0).
    Whether the gateway answers is `pushgateway_unreachable`'s: said, never a refusal."""
    url = _gateway_url(value)
    if url.scheme not in ("http", "https"):
        raise Refused(f"{option} {value}: scheme {url.scheme!r} (http or https, or "
                      "HOST:PORT)", ExitCode.USAGE)
    try:
        port = url.port
    except ValueError as e:
        raise Refused(f"{option} {value}: bad port ({e})", ExitCode.USAGE) from None
    if not url.hostname:
        raise Refused(f"{option} {value}: no host", ExitCode.USAGE)
    if _through_proxy(url):
        return value  # the proxy resolves the host, not this machine
    try:
        socket.getaddrinfo(url.hostname, port or _default_port(url), type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as e:
        raise Refused(f"{option} {value}: host {url.hostname} does not resolve ({e})",
                      ExitCode.USAGE) from None
    return value


def pushgateway_unreachable(value: str) -> str | None:
    """Why a TCP connect (closed at once: nothing sent) to the gateway of a checked
    `pushgateway_address` fails now, within `CONNECT_S`; None if it connects, or if the
    push goes through a proxy (the gateway is the proxy's to reach). newuser18 U6: a
    gateway refusing was said only after the round. A warning before the round, not a
    refusal (review41a R4): metrics are not what GC's safety needs, a gateway down for a
    minute must not stop collection, and the push after the round tries again."""
    url = _gateway_url(value)
    if _through_proxy(url) or not url.hostname:
        return None
    port = url.port or _default_port(url)
    try:
        socket.create_connection((url.hostname, port), timeout=CONNECT_S).close()
    except OSError as e:
        why = (f"no answer within {CONNECT_S:g} s" if isinstance(e, TimeoutError)
               else e.strerror or str(e))
        return f"cannot connect to {url.hostname} port {port}: {why}"
    return None


def _gateway_url(value: str) -> SplitResult:
    # prometheus_client.exposition._use_gateway: no http/https scheme -> "http://" + value.
    return urlsplit(value if "://" in value else f"http://{value}")


def _default_port(url: SplitResult) -> int:
    return 443 if url.scheme == "https" else 80


def _through_proxy(url: SplitResult) -> bool:
    """Whether urllib (prometheus_client's push opens the URL with urllib's default
    handlers, ProxyHandler among them) sends this URL through a proxy: the *_proxy
    environment variables, less no_proxy (urllib.request.getproxies, proxy_bypass)."""
    from urllib.request import getproxies, proxy_bypass

    return url.scheme in getproxies() and not proxy_bypass(url.hostname or "")
