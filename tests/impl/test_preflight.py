"""Checks before work (issue 41 items 3, 4, 5, 9): each command refuses in one line, with
the table's exit code, before it starts a node, a cluster or Spark, leaving nothing
running and nothing written. A missing extra is made real in a child process the way the
import system defines it: `sys.modules[name] = None` makes `import name` raise ImportError
(Python reference, "The module cache"); the wheel smoke (.ci/wheel-smoke) runs the same
commands in a virtualenv that truly lacks them."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.exitcodes import ExitCode
from epochgc.impl.gc.record import ROUNDS_PREFIX
from epochgc.impl.preflight import PROBE_PREFIX, writable_file
from epochgc.impl.store.base import DeleteResult
from epochgc.impl.store.local import LocalStore
from tests.gc.helpers import NOW, simple_cluster

ROOT = Path(__file__).resolve().parents[2]


def _without(modules: list[str], args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`epochgc ARGS` in a child process where `modules` cannot be imported."""
    code = ("import sys\n"
            f"for m in {modules!r}: sys.modules[m] = None\n"
            "from epochgc.impl.cli import main\n"
            "main(prog_name='epochgc')\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def _one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    return lines[0]


def _no_cluster(data_dir: Path) -> None:
    """Nothing started: no cluster metadata, so no node pid anywhere."""
    meta = data_dir / "cluster.json"
    assert not meta.exists() or not json.loads(meta.read_text()).get("pids"), meta.read_text()


def test_a_bad_partition_name_is_refused_before_any_node(tmp_path: Path) -> None:
    """Old code: waited 60 s, exit 1, three node processes left running, no hint."""
    r = CliRunner().invoke(main, ["cluster", "start", "--data-dir", str(tmp_path / "run"),
                                  "--store", str(tmp_path / "store"),
                                  "--partitions", "t/0,bad name"])
    assert r.exit_code == ExitCode.USAGE, r.output
    line = _one_line(r.output)
    assert "--partitions" in line and "'bad name'" in line and "TOPIC/N" in line
    _no_cluster(tmp_path / "run")


@pytest.mark.parametrize("bad", ["t/x", "/0", "t/0,t/0", "t/٣", "a/b/0", " t/0"])
def test_other_bad_partition_lists_are_refused(tmp_path: Path, bad: str) -> None:
    r = CliRunner().invoke(main, ["cluster", "start", "--data-dir", str(tmp_path / "run"),
                                  "--store", str(tmp_path / "store"), "--partitions", bad])
    assert r.exit_code == ExitCode.USAGE, r.output
    assert "--partitions" in _one_line(r.output)
    _no_cluster(tmp_path / "run")


def test_a_bucket_that_does_not_exist_is_refused_before_any_node(
        tmp_path: Path, moto_endpoint: str) -> None:
    """Old code: "cluster ready" on a bucket that did not exist; every produce failed."""
    r = CliRunner().invoke(main, ["cluster", "start", "--data-dir", str(tmp_path / "run"),
                                  "--store", "s3://no-such-bucket-41/p",
                                  "--s3-endpoint", moto_endpoint])
    assert r.exit_code == ExitCode.FAILED, r.output
    line = _one_line(r.output)
    assert "s3://no-such-bucket-41/p" in line and "cannot write" in line
    assert "NoSuchBucket" in line
    _no_cluster(tmp_path / "run")


def test_the_probe_leaves_no_object(tmp_path: Path, moto_endpoint: str, s3_bucket: str) -> None:
    """A store that passes: the probe object is deleted again (S3 and a directory)."""
    from epochgc.impl.preflight import store_writable
    from epochgc.impl.store.url import open_store, parse_store_url

    for url, endpoint in ((f"s3://{s3_bucket}/p", moto_endpoint), (str(tmp_path), None)):
        spec = parse_store_url(url, endpoint)
        store_writable(spec, "test")
        store = open_store(url, endpoint)
        assert not list(store.list_all(PROBE_PREFIX)), url


def _refuse_deletes(self: LocalStore, keys: list[str]) -> DeleteResult:
    """S3's DeleteObjects answer for keys the caller may not delete: 200, an `Error`
    element per key (AccessDenied), nothing raised (the API reference's "DeleteObjects")."""
    return DeleteResult(requested=len(keys),
                        errors={k: "AccessDenied: Access Denied" for k in keys})


def test_a_store_that_takes_the_write_but_not_the_delete_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """review41c C5: the probe ignored the delete's answer, so such a store passed (and
    kept the probe object); `gc-admin expire --apply` then failed at its first removal."""
    from epochgc.impl.preflight import Refused, store_writable
    from epochgc.impl.store.url import parse_store_url

    monkeypatch.setattr(LocalStore, "delete_batch", _refuse_deletes)
    with pytest.raises(Refused, match="did not delete it: AccessDenied") as e:
        store_writable(parse_store_url(str(tmp_path)), "test")
    assert e.value.exit_code == ExitCode.FAILED


@pytest.fixture(name="s3_endpoint", params=["moto"])
def _moto_only(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue("moto_endpoint"))


def test_s3_without_boto3_names_the_extra(tmp_path: Path) -> None:
    """Old code: the nodes started and failed on `No module named 'boto3'`, no hint."""
    p = _without(["boto3"], ["cluster", "start", "--data-dir", "run",
                             "--store", "s3://bucket/p"], tmp_path)
    assert p.returncode == ExitCode.UNAVAILABLE, p.stdout + p.stderr
    assert "pip install 'epochgc[s3]'" in _one_line(p.stderr)
    _no_cluster(tmp_path / "run")


def test_demo_spark_without_pyspark_refuses_before_the_cluster(tmp_path: Path) -> None:
    """Old code: started the cluster, said "Spark session ready", then an 87-line
    ModuleNotFoundError traceback."""
    p = _without(["pyspark"], ["demo", "--gc-engine", "spark", "--quiet"], tmp_path)
    assert p.returncode == ExitCode.UNAVAILABLE, p.stdout + p.stderr
    assert "pip install 'epochgc[spark]'" in _one_line(p.stderr)
    assert "Traceback" not in p.stderr and p.stdout == ""


def test_gc_without_pyspark_exits_69(tmp_path: Path) -> None:
    """Old code: exit 1 (`gc`'s "incomplete"); the README promised a missing extra's code."""
    simple_cluster(LocalStore(tmp_path / "s", create=True), 50)
    p = _without(["pyspark"], ["gc", "--store", str(tmp_path / "s"), "--dry-run"], tmp_path)
    assert p.returncode == ExitCode.UNAVAILABLE, p.stdout + p.stderr
    # The extra that installs it and, as the README says to install, the GC's own one
    # (newuser41: "README says [gc], messages say pip install 'epochgc[spark]'").
    assert _one_line(p.stderr).endswith(
        "pip install 'epochgc[spark]' (or 'epochgc[gc]', everything `epochgc gc` uses)")


@pytest.mark.parametrize("option", ["--metrics-file", "--list"])
def test_gc_output_paths_are_checked_before_the_round(tmp_path: Path, option: str) -> None:
    """Old code: `--metrics-file /nonexistent/dir/m.prom` was only warned about after the
    round, with its exit code unchanged."""
    simple_cluster(LocalStore(tmp_path / "s", create=True), 50)
    r = CliRunner().invoke(main, ["gc", "--store", str(tmp_path / "s"), "--dry-run", "-q",
                                  option, "/nonexistent/dir/m.prom"])
    assert r.exit_code == ExitCode.USAGE, r.output
    assert _one_line(r.output) == (
        f"epochgc gc: error: {option} /nonexistent/dir/m.prom: directory /nonexistent/dir "
        "does not exist")
    r = CliRunner().invoke(main, ["gc", "--store", str(tmp_path / "s"), "--dry-run", "-q",
                                  option, str(tmp_path)])
    assert r.exit_code == ExitCode.USAGE and "is a directory" in r.output, r.output
    assert not list(LocalStore(tmp_path / "s").list_all(ROUNDS_PREFIX))  # no round ran


def test_chaos_and_cluster_trace_paths_are_checked(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["cluster", "start", "--data-dir", str(tmp_path / "run"),
                                  "--store", str(tmp_path / "store"),
                                  "--trace", "/nonexistent/dir/t.ndjson"])
    assert r.exit_code == ExitCode.USAGE, r.output
    assert "--trace" in _one_line(r.output)
    _no_cluster(tmp_path / "run")


@pytest.mark.parametrize("command", ["produce", "consume"])
def test_produce_and_consume_refuse_a_bad_partition_name_first(
        tmp_path: Path, command: str) -> None:
    r = CliRunner().invoke(main, [command, "--data-dir", str(tmp_path / "none"),
                                  "--partition", "t/0", "--partition", "bad name"])
    assert r.exit_code == ExitCode.USAGE, r.output
    assert "--partition: 'bad name' is not a partition name" in _one_line(r.output)


@pytest.mark.parametrize("option", ["--data-dir", "--store"])
def test_cluster_start_refuses_a_directory_it_cannot_make(tmp_path: Path, option: str) -> None:
    """Old code: exit 1, `Error: FileNotFoundError: [Errno 2] No such file or directory`
    (or NotADirectoryError): a repr naming neither the option nor the table's usage code."""
    (tmp_path / "file").write_text("not a directory")
    dirs = {"--data-dir": str(tmp_path / "run"), "--store": str(tmp_path / "store")}
    dirs[option] = str(tmp_path / "file" / "sub")
    r = CliRunner().invoke(main, ["cluster", "start", "--data-dir", dirs["--data-dir"],
                                  "--store", dirs["--store"], "--partitions", "t/0"])
    assert r.exit_code == ExitCode.USAGE, r.output
    line = _one_line(r.output)
    assert option in line and "NotADirectoryError" not in line, line


@pytest.mark.parametrize("option", ["--metrics-file", "--list"])
def test_gc_output_paths_that_take_no_file_are_refused_before_the_round(
        tmp_path: Path, option: str) -> None:
    """Issue 41 item 5. Old code: `--list /proc/epochgc-list` ran the whole listing, then
    exit 1; `--metrics-file /proc/m.prom` ran the round, warned, exit 0 (`os.access` says
    yes to root there); `--metrics-file FILE/m.prom` said "directory FILE does not exist"."""
    simple_cluster(LocalStore(tmp_path / "s", create=True), 50)
    r = CliRunner().invoke(main, ["gc", "--store", str(tmp_path / "s"), "--dry-run", "-q",
                                  option, "/proc/epochgc-m.prom"])
    assert r.exit_code == ExitCode.USAGE, r.output
    assert _one_line(r.output).startswith(
        f"epochgc gc: error: {option} /proc/epochgc-m.prom: directory /proc: cannot create a "
        "file in it")
    afile = tmp_path / "afile"
    afile.write_text("x")
    r = CliRunner().invoke(main, ["gc", "--store", str(tmp_path / "s"), "--dry-run", "-q",
                                  option, f"{afile}/m.prom"])
    assert r.exit_code == ExitCode.USAGE, r.output
    assert _one_line(r.output) == (
        f"epochgc gc: error: {option} {afile}/m.prom: directory {afile} is not a directory")
    assert not list(LocalStore(tmp_path / "s").list_all(ROUNDS_PREFIX))  # no round ran
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "s"]  # no probe left


def test_conform_out_is_checked_before_the_port_starts(tmp_path: Path) -> None:
    """Issue 41 item 5. Old code: the port ran, then `FileNotFoundError` exit 1; an
    existing --out file was overwritten silently. The port named here does not exist: a
    check made after the port starts would say "cannot start" instead."""
    missing_port = str(tmp_path / "no-such-port")
    r = CliRunner().invoke(main, ["conform", "--out", "/proc/vec.jsonl", "--", missing_port])
    assert r.exit_code == ExitCode.USAGE, r.output
    assert "--out /proc/vec.jsonl: directory /proc: cannot create a file in it" in r.output
    existing = tmp_path / "vec.jsonl"
    existing.write_text("# mine\n")
    r = CliRunner().invoke(main, ["conform", "--out", str(existing), "--", missing_port])
    assert r.exit_code == ExitCode.USAGE, r.output
    assert f"--out {existing}: exists (it is never overwritten)" in r.output
    assert existing.read_text() == "# mine\n"


def test_gc_package_out_is_checked_before_the_build(tmp_path: Path) -> None:
    """Issue 41 item 5. Old code: `FileNotFoundError: ...` exit 1."""
    r = CliRunner().invoke(main, ["gc-package", "--out", "/proc/epochgc-pkg"])
    assert r.exit_code == ExitCode.USAGE, r.output
    assert _one_line(r.output).startswith(
        "epochgc gc-package: error: --out /proc/epochgc-pkg: cannot create it")
    afile = tmp_path / "afile"
    afile.write_text("x")
    r = CliRunner().invoke(main, ["gc-package", "--out", str(afile)])
    assert r.exit_code == ExitCode.USAGE, r.output


def test_gc_admin_on_s3_without_boto3_names_the_extra(tmp_path: Path) -> None:
    """Issue 41 item 9. Old code: `Error: cannot read _cluster/partitions.json: head ...
    failed: No module named 'boto3'`, exit 1."""
    for command in ("show", "pause"):
        p = _without(["boto3"], ["gc-admin", command, "--store", "s3://bucket1/p",
                                 "--s3-endpoint", "http://127.0.0.1:1"], tmp_path)
        assert p.returncode == ExitCode.UNAVAILABLE, p.stdout + p.stderr
        assert "pip install 'epochgc[s3]'" in _one_line(p.stderr)


def test_gc_refuses_a_master_url_spark_cannot_parse_before_spark(tmp_path: Path) -> None:
    """Issue 41 item 11. Old code: Spark started and failed, `PySparkRuntimeError:
    [JAVA_GATEWAY_EXITED]`, exit 1."""
    simple_cluster(LocalStore(tmp_path / "s", create=True), 50)
    r = CliRunner().invoke(main, ["gc", "--store", str(tmp_path / "s"), "--dry-run", "-q",
                                  "--master", "bogus://x"])
    assert r.exit_code == ExitCode.USAGE, r.output
    assert "--master 'bogus://x': not a Spark master URL" in r.output, r.output
    assert not list(LocalStore(tmp_path / "s").list_all(ROUNDS_PREFIX))


def test_the_master_forms_are_sparks() -> None:
    from epochgc.impl.gc.masterurl import master_problem

    for ok in ("local", "local[2]", "local[*]", "local[2, 3]", "local-cluster[2,1,1024]",
               "spark://h:7077", "spark://a:7077,b:7077", "yarn", "k8s://https://h:443"):
        assert master_problem(ok) is None, ok
    for bad in ("bogus://x", "local[0x2]", "locals", "yarn-client", "spark:/h:7077", ""):
        assert master_problem(bad) is not None, bad


def test_gc_manifest_into_a_missing_directory_is_refused_before_the_round(
        tmp_path: Path) -> None:
    """newuser6 H4: `gc --manifest /nonexist/d/m` ran the round (exit 0 after 40 s) and
    created the whole missing path, where `--list` and `--metrics-file` refuse a missing
    directory (64, one line): a mistyped path was made quietly. Now the manifest's parent
    must exist and take a new file, as theirs."""
    simple_cluster(LocalStore(tmp_path / "s", create=True), 50)
    missing = tmp_path / "nonexist" / "d"
    r = CliRunner().invoke(main, ["gc", "--store", str(tmp_path / "s"), "--dry-run", "-q",
                                  "--manifest", str(missing / "m")])
    assert r.exit_code == ExitCode.USAGE, r.output
    assert _one_line(r.output) == (
        f"epochgc gc: error: --manifest {missing / 'm'}: directory {missing} does not exist")
    assert not (tmp_path / "nonexist").exists()
    assert not list(LocalStore(tmp_path / "s").list_all(ROUNDS_PREFIX))  # no round ran


def test_produce_refuses_a_record_size_no_read_page_can_carry(tmp_path: Path) -> None:
    """i41o's follow-up: `--size` had no bound but the batch's (256 MiB), so one record
    could exceed what a read answer may hold (`rpc.ANSWER_LIMIT`, 64 MiB) and never be
    read back. Now at most `rpc.MAX_RECORD_BYTES` (16 MiB), refused with 64 first."""
    from epochgc.impl.cluster.rpc import MAX_RECORD_BYTES

    r = CliRunner().invoke(main, ["produce", "--data-dir", str(tmp_path / "none"),
                                  "--partition", "t/0", "--size", str(MAX_RECORD_BYTES + 1)])
    assert r.exit_code == ExitCode.USAGE and "Invalid value for '--size'" in r.output, r.output


def _special(tmp_path: Path, kind: str) -> Path:
    """A path in `tmp_path` that is not a regular file: a FIFO, a symlink to a regular
    file, or (root only) a character device node like /dev/null's (1, 3)."""
    p = tmp_path / f"{kind}.prom"
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "symlink":
        (tmp_path / "target.prom").write_text("# mine\n")
        p.symlink_to(tmp_path / "target.prom")
    else:
        try:
            os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("making a device node needs root")
    return p


@pytest.mark.parametrize("kind", ["fifo", "symlink", "chardev"])
def test_an_output_path_that_is_not_a_regular_file_is_refused(tmp_path: Path,
                                                               kind: str) -> None:
    """newuser8 I5: `gc --metrics-file /dev/full` replaced the device node (as root) with
    the metrics text, and a FIFO and a symlink alike, exit 0. Old code: writable_file
    returned the path (no refusal), for --metrics-file, --list and cluster --trace."""
    p = _special(tmp_path, kind)
    before = os.lstat(p)
    for option in ("--metrics-file", "--list", "--trace"):
        with pytest.raises(click.ClickException) as e:
            writable_file(str(p), option)
        assert e.value.exit_code == ExitCode.USAGE
        assert e.value.message.startswith(f"{option} {p}: is a "), e.value.message
    assert os.lstat(p).st_mode == before.st_mode  # still what it was
    if kind == "symlink":
        assert (tmp_path / "target.prom").read_text() == "# mine\n"


@pytest.mark.parametrize("option", ["--metrics-file", "--list"])
def test_gc_refuses_a_fifo_output_path_before_the_round(tmp_path: Path, option: str) -> None:
    simple_cluster(LocalStore(tmp_path / "s", create=True), 50)
    fifo = _special(tmp_path, "fifo")
    r = CliRunner().invoke(main, ["gc", "--store", str(tmp_path / "s"), "--dry-run", "-q",
                                  option, str(fifo)])
    assert r.exit_code == ExitCode.USAGE, r.output
    assert _one_line(r.output) == (
        f"epochgc gc: error: {option} {fifo}: is a FIFO (a regular file or a new path is "
        "expected; it "
        "is never replaced)")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert not list(LocalStore(tmp_path / "s").list_all(ROUNDS_PREFIX))  # no round ran


@pytest.mark.parametrize("kind", ["fifo", "symlink", "chardev"])
def test_the_metrics_write_rechecks_the_path_before_replacing_it(tmp_path: Path,
                                                                  kind: str) -> None:
    """What the preflight passed may change during the round: the final write looks
    again. Old code (prometheus_client's write_to_textfile) renamed over it."""
    from epochgc.impl.gc.metrics import export_metrics
    from epochgc.impl.gc.summary import GcSummary

    p = _special(tmp_path, kind)
    before = os.lstat(p)
    with pytest.raises(OSError) as e:
        export_metrics(GcSummary(), str(p))
    assert "is a " in str(e.value) and "not replaced" in str(e.value), e.value
    assert os.lstat(p).st_mode == before.st_mode
    assert sorted(q.name for q in tmp_path.iterdir()) == sorted(
        [p.name] + (["target.prom"] if kind == "symlink" else []))  # no temp file left
    regular = tmp_path / "m.prom"
    regular.write_text("old\n")
    export_metrics(GcSummary(), str(regular))  # a regular file is replaced, as before
    assert "epochgc_gc_" in regular.read_text()


def _no_java_env(**extra: str) -> dict[str, str]:
    """The environment of a machine with no Java: JAVA_HOME unset, PATH only the venv's
    bin (no `java` there: checked)."""
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env.update(PATH=os.path.dirname(sys.executable), PYTHONPATH=str(ROOT), **extra)
    assert not any(os.access(os.path.join(d, "java"), os.X_OK)
                   for d in env["PATH"].split(os.pathsep)), env["PATH"]
    return env


def _gc(tmp_path: Path, env: dict[str, str], *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "epochgc", "gc", "--store",
                           str(tmp_path / "s"), "--now", str(NOW), "--i-know-now-is-ahead",
                           *more], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_gc_without_java_exits_69_before_the_lease_and_the_record(tmp_path: Path) -> None:
    """newuser9 K7. Old code: `epochgc gc: error: PySparkRuntimeError: [JAVA_GATEWAY_EXITED]
    Java gateway process exited before sending its port number.; nothing was deleted`,
    exit 1, and a real round wrote an `error` record into the store."""
    simple_cluster(LocalStore(tmp_path / "s", create=True), 50)
    p = _gc(tmp_path, _no_java_env())
    assert p.returncode == ExitCode.UNAVAILABLE, p.stdout + p.stderr
    line = _one_line(p.stderr)
    assert "Java not found (JAVA_HOME unset, no `java` on PATH)" in line, line
    assert "Spark needs Java 17 or 21" in line, line
    store = LocalStore(tmp_path / "s")
    assert list(store.list_all(ROUNDS_PREFIX)) == []
    assert not (tmp_path / "s" / "_cluster" / "gc" / "lease.json").exists()


def test_gc_and_demo_with_a_wrong_java_home_exit_69(tmp_path: Path) -> None:
    """newuser9 K7: JAVA_HOME=/nonexist gave the same JAVA_GATEWAY_EXITED line, exit 1."""
    simple_cluster(LocalStore(tmp_path / "s", create=True), 50)
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAVA_HOME=str(tmp_path / "nonexist"))
    p = _gc(tmp_path, env, "--dry-run")
    assert p.returncode == ExitCode.UNAVAILABLE, p.stdout + p.stderr
    assert f"{tmp_path}/nonexist/bin/java (JAVA_HOME={tmp_path}/nonexist) is not an " \
        "executable file" in _one_line(p.stderr), p.stderr
    d = subprocess.run([sys.executable, "-m", "epochgc", "demo", "--gc-engine", "spark"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                       check=False)
    assert d.returncode == ExitCode.UNAVAILABLE, d.stderr
    assert "Spark needs Java 17 or 21" in _one_line(d.stderr), d.stderr


def test_gc_with_a_bad_pyspark_python_exits_69_before_the_lease_and_the_record(
        tmp_path: Path) -> None:
    """newuser13 Q4. Old code: a real round took the lease, wrote its START and journal,
    then failed at its first task: `delete phase failed: IOException: error=2, No such
    file or directory`, exit 1 (a dry run: `listing phase failed`, 16 s), naming neither
    the path nor the variable."""
    simple_cluster(LocalStore(tmp_path / "s", create=True), 50)
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYSPARK_PYTHON=str(tmp_path / "nonexist"))
    p = _gc(tmp_path, env)
    assert p.returncode == ExitCode.UNAVAILABLE, p.stdout + p.stderr
    assert f"Spark's worker Python {tmp_path}/nonexist (PYSPARK_PYTHON) is not an " \
        "executable file" in _one_line(p.stderr), p.stderr
    store = LocalStore(tmp_path / "s")
    assert list(store.list_all("_cluster/gc/")) == []  # no lease, no START, no record


def test_the_worker_python_is_checked_as_pyspark_starts_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PYSPARK_PYTHON as a path (a directory is no executable), as a name on PATH, unset
    (`python3` on PATH); a cluster master's workers are elsewhere: not checked here."""
    from epochgc.impl.preflight import Refused, require_spark, worker_python_problem

    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    assert worker_python_problem() is None
    monkeypatch.setenv("PYSPARK_PYTHON", str(tmp_path))
    assert worker_python_problem() == (
        f"Spark's worker Python {tmp_path} (PYSPARK_PYTHON) is not an executable file; set "
        f"PYSPARK_PYTHON to a Python with PySpark (this command runs {sys.executable})")
    with pytest.raises(Refused) as e:
        require_spark("gc")
    assert e.value.exit_code == ExitCode.UNAVAILABLE
    require_spark("gc", workers_here=False)  # a cluster's workers: their hosts' path
    monkeypatch.setenv("PYSPARK_PYTHON", "no-such-python-here")
    assert "no-such-python-here (PYSPARK_PYTHON) is not found on PATH" in (
        worker_python_problem() or "")
    monkeypatch.delenv("PYSPARK_PYTHON")
    monkeypatch.setenv("PATH", str(tmp_path))  # no python3 there
    assert "python3 (the default: PYSPARK_PYTHON is not set) is not found on PATH" in (
        worker_python_problem() or "")


def test_a_java_older_than_sparks_classes_is_refused(tmp_path: Path) -> None:
    """A JAVA_HOME whose java answers as Java 11 (none is installed here: an executable that
    answers `-version` exactly as OpenJDK 11 does stands in for it; what is checked is what
    the command does with that answer): refused, naming the version."""
    java = tmp_path / "jdk11" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text('#!/bin/sh\necho \'openjdk version "11.0.2" 2019-01-15\' >&2\n')
    java.chmod(0o755)
    simple_cluster(LocalStore(tmp_path / "s", create=True), 50)
    p = _gc(tmp_path, dict(os.environ, PYTHONPATH=str(ROOT), JAVA_HOME=str(tmp_path / "jdk11")),
            "--dry-run")
    assert p.returncode == ExitCode.UNAVAILABLE, p.stdout + p.stderr
    assert "is Java 11 (openjdk version \"11.0.2\" 2019-01-15): Spark needs Java 17 or 21" \
        in _one_line(p.stderr), p.stderr


@pytest.mark.parametrize("java", ["/usr/lib/jvm/java-17-openjdk-amd64/bin/java",
                                  "/usr/lib/jvm/temurin-25-jdk-amd64/bin/java"])
def test_the_installed_javas_pass(java: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's real runtimes (17, and Temurin 25, which the tester ran a round on)
    are not refused: the version is read from their own `-version`."""
    from epochgc.impl import java as javacheck

    if not os.access(java, os.X_OK):
        pytest.skip(f"{java} is not installed here")
    monkeypatch.setenv("JAVA_HOME", os.path.dirname(os.path.dirname(java)))
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    assert javacheck.problem() is None
    assert (javacheck.major_version('java version "1.8.0_491"'),
            javacheck.major_version('openjdk version "25.0.1" 2025-10-21 LTS')) == (8, 25)


@pytest.mark.parametrize("master", ["local[0]", "local[99999999999999999999]", "local[0,2]",
                                    "local-cluster[0,1,1024]", "local-cluster[1,1,2147483648]"])
def test_gc_refuses_masters_spark_would_refuse_before_spark(tmp_path: Path, master: str) -> None:
    """newuser9 K1. Old code: Spark started and failed: `local[0]` "SparkException: Asked to
    run locally with 0 threads", a 20-digit N "NumberFormatException: For input string",
    each twice with its Java stack, exit 1; `local-cluster[0,1,1024]` waited for ever
    (K2: no worker, so no executor)."""
    simple_cluster(LocalStore(tmp_path / "s", create=True), 50)
    r = CliRunner().invoke(main, ["gc", "--store", str(tmp_path / "s"), "--dry-run", "-q",
                                  "--now", str(NOW), "--i-know-now-is-ahead",
                                  "--master", master])
    assert r.exit_code == ExitCode.USAGE, r.output
    assert f"--master {master!r}: " in r.output, r.output
    assert not list(LocalStore(tmp_path / "s").list_all(ROUNDS_PREFIX))


@pytest.mark.spark
def test_a_master_spark_refuses_at_start_up_is_one_line_without_its_log(
        tmp_path: Path) -> None:
    """newuser9 K1: a master that passes the URL check but that Spark refuses as it starts
    (here a local cluster whose workers have less memory than an executor asks: Spark's
    `createTaskScheduler` throws at once) printed Spark's `ERROR SparkContext: Error
    initializing SparkContext.` with its Java stack, then the whole Py4J message with the
    same stack as the "one line". Now: one line, the innermost cause, exit 1."""
    simple_cluster(LocalStore(tmp_path / "s", create=True), 50)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = _gc(tmp_path, env, "--dry-run", "--master", "local-cluster[1,1,100]")
    assert p.returncode == ExitCode.FAILED, p.stderr[-3000:]
    noise = [line for line in p.stderr.splitlines()
             if " ERROR " in line or line.startswith("\tat ") or "Traceback" in line]
    assert noise == [], p.stderr[-3000:]
    assert p.stderr.splitlines()[-1] == (
        "epochgc gc: error: cannot start Spark on local-cluster[1,1,100]: SparkException: "
        "Asked to launch cluster with 100 MiB/worker but requested 1024 MiB/executor; "
        "nothing was deleted"), p.stderr[-3000:]


def test_a_standalone_master_that_never_answered_is_named_by_sparks_reason() -> None:
    """newuser9 K1, `--master spark://127.0.0.1:1` (Spark gives up after 3 x 20 s, too slow
    for the suite): the start-up fails with "Cannot call methods on a stopped
    SparkContext", which says nothing; Spark's own ERROR line before it says why. The
    exception's text is the Py4J form the tester saw (its stack cut)."""
    from epochgc.impl.gc.session import start_failure

    e = RuntimeError(
        "An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.\n"
        ": java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext.\n"
        "This stopped SparkContext was created at:\n\n"
        "org.apache.spark.api.java.JavaSparkContext.<init>(JavaSparkContext.scala:58)\n")
    log = ["26/11/30 03:12:10 ERROR StandaloneSchedulerBackend: Application has been killed. "
           "Reason: All masters are unresponsive! Giving up.\n",
           "26/11/30 03:12:10 ERROR SparkContext: Error initializing SparkContext.\n",
           "java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext.\n",
           "\tat org.apache.spark.SparkContext.assertNotStopped(SparkContext.scala:124)\n"]
    assert start_failure(e, log) == ("Application has been killed. Reason: All masters are "
                                     "unresponsive! Giving up.")
    assert start_failure(e, []) == ("IllegalStateException: Cannot call methods on a stopped "
                                    "SparkContext.")


def test_produce_and_status_on_an_s3_cluster_without_boto3_exit_69(
        tmp_path: Path, moto_endpoint: str) -> None:
    """newuser9 K8: with the base install (no boto3) against a running cluster whose store
    is S3, `produce` said "object store unreachable (put ... failed: No module named
    'boto3'); nothing acknowledged" and `cluster status` "cluster M: none (... No module
    named 'boto3')", exit 1, where `cluster start` and `gc-admin` give 69 naming the
    extra. The cluster runs (started with boto3); the two commands run without it."""
    from tests.store.s3server import new_bucket

    bucket = new_bucket(moto_endpoint)
    run = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-m", "epochgc", "cluster", "start", "--data-dir",
                    str(run), "--store", f"s3://{bucket}/p", "--s3-endpoint", moto_endpoint,
                    "--nodes", "1", "--partitions", "t/0"], env=env, check=True,
                   capture_output=True, timeout=300)
    try:
        for args in (["produce", "--data-dir", str(run), "--partition", "t/0", "--count", "5"],
                     ["cluster", "status", "--data-dir", str(run)]):
            p = _without(["boto3"], args, tmp_path)
            assert p.returncode == ExitCode.UNAVAILABLE, (args, p.stdout + p.stderr)
            line = _one_line(p.stderr)
            assert ("boto3 is not installed (this command needs it): pip install "
                    "'epochgc[s3]'") in line, line
        assert not (run / "acked.jsonl").exists() or not (run / "acked.jsonl").read_text()
    finally:
        subprocess.run([sys.executable, "-m", "epochgc", "cluster", "stop", "--data-dir",
                        str(run)], env=env, check=False, capture_output=True, timeout=300)


def test_conform_vectors_replays_without_hypothesis(tmp_path: Path) -> None:
    """newuser9 K8: `conform --vectors` (no generated programs: it only replays the spec's
    files) exited 69 in the base install, which has no Hypothesis."""
    p = _without(["hypothesis"], ["conform", "--vectors", "--", sys.executable, "-m",
                                  "epochgc.model.port"], tmp_path)
    assert p.returncode == ExitCode.OK, p.stdout + p.stderr
    assert "agreed" in p.stdout + p.stderr, p.stdout + p.stderr
    # Generated programs still need it: 69, naming the extra and --vectors.
    g = _without(["hypothesis"], ["conform", "--", sys.executable, "-m", "epochgc.model.port"],
                 tmp_path)
    assert g.returncode == ExitCode.UNAVAILABLE, g.stdout + g.stderr
    assert "pip install 'epochgc[conform]' (or pass --vectors" in _one_line(g.stderr)


def test_gc_package_never_overwrites_a_package_unless_forced(tmp_path: Path) -> None:
    """newuser13 Q9: a second `gc-package --out pkg` replaced both files silently, where
    --list, --manifest and conform's --out refuse an existing target. Now 64 naming them,
    nothing touched; --force replaces them. Other files in --out (a `dist` of wheels) are
    no reason to refuse."""
    out = tmp_path / "pkg"
    out.mkdir()
    (out / "other.whl").write_text("w")
    assert CliRunner().invoke(main, ["gc-package", "--out", str(out)]).exit_code == 0
    zipped = out / "epochgc.zip"
    zipped.write_bytes(b"mine")
    r = CliRunner().invoke(main, ["gc-package", "--out", str(out)])
    assert r.exit_code == ExitCode.USAGE, r.output
    assert (f"--out {out}: epochgc.zip and epochgc_gc_submit.py already there; refusing to "
            "overwrite (--force replaces them)") in _one_line(r.output)
    assert zipped.read_bytes() == b"mine"
    r = CliRunner().invoke(main, ["gc-package", "--out", str(out), "--force"])
    assert r.exit_code == 0, r.output
    assert zipped.read_bytes() != b"mine" and (out / "other.whl").read_text() == "w"


def test_an_empty_pyspark_python_is_refused_as_spark_reads_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """newuser17 T3: `PYSPARK_PYTHON=` passed the check (read as unset: python3 on PATH), but
    PySpark's `os.environ.get("PYSPARK_PYTHON", "python3")` returns "" and the JVM runs the
    empty string: the round failed 15 s later, exit 1, the variable not named."""
    from epochgc.impl.preflight import worker_python_problem

    monkeypatch.setenv("PYSPARK_PYTHON", "")
    assert worker_python_problem() == (
        "PYSPARK_PYTHON is set but empty (Spark would run the empty string as its workers' "
        f"Python): unset it or name a Python with PySpark (this command runs {sys.executable})")


@pytest.mark.parametrize("home", ["", "nonexistent"])
def test_gc_with_a_wrong_spark_home_exits_69_naming_it_before_spark(
        tmp_path: Path, home: str) -> None:
    """newuser17 T3b: `SPARK_HOME=/nonexistent` or `SPARK_HOME=` (PySpark trusts a set
    SPARK_HOME as it is): gc exited 1 with "FileNotFoundError: ... './bin/spark-submit'"
    after its checks. Now 69 before Spark, naming SPARK_HOME and the path looked for."""
    simple_cluster(LocalStore(tmp_path / "s", create=True), 5)
    value = str(tmp_path / home) if home else ""
    env = dict(os.environ, PYTHONPATH=str(ROOT), SPARK_HOME=value)
    env.pop("PYSPARK_GATEWAY_PORT", None)
    p = _gc(tmp_path, env)
    assert p.returncode == ExitCode.UNAVAILABLE, p.stdout + p.stderr
    line = _one_line(p.stderr)
    if home:
        assert f"SPARK_HOME={value}: {value}/bin/spark-submit is not an executable file" \
            in line, line
    else:
        assert "SPARK_HOME is set but empty: PySpark would run ./bin/spark-submit in the " \
            f"current directory ({tmp_path})" in line, line
    assert list(LocalStore(tmp_path / "s").list_all("_cluster/gc/")) == []


def test_spark_home_is_checked_as_pyspark_finds_spark_submit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset: PySpark's own installation (not checked); a directory with an executable
    bin/spark-submit: fine; one without: named."""
    from epochgc.impl.preflight import spark_home_problem

    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    assert spark_home_problem() is None
    submit = tmp_path / "bin" / "spark-submit"
    submit.parent.mkdir()
    submit.write_text("#!/bin/sh\n")
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    assert "is not an executable file" in (spark_home_problem() or "")
    submit.chmod(0o755)
    assert spark_home_problem() is None
