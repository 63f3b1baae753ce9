"""`epochgc gc` on a real Spark standalone cluster on loopback (issue 12 item 5).

The test starts a master and one worker (`spark-class ...Master/Worker`, from pyspark's
bundled Spark), runs two rounds and stops them. The executors' Python is a "remote" one:
the same site-packages (pyspark, boto3, click...) but not this project (no `.pth` import
hooks, no PYTHONPATH), as on a worker machine where only the dependencies are installed.
So a round only works if the job ships its own code.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from epochgc.impl.store.local import LocalStore
from epochgc.model.keys import format_key
from tests.gc.helpers import put_local, simple_cluster
from tests.store.s3server import free_port

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SPARK_HOME = Path(__import__("pyspark").__file__).parent
BIN = SPARK_HOME / "bin"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_DAEMON_MEMORY="256m",
        SPARK_NO_DAEMONIZE="1",
    )
    env.pop("PYSPARK_GATEWAY_PORT", None)
    return env


def _remote_python(directory: Path) -> Path:
    """A Python that sees the site-packages but not this project: no `.pth` import hooks
    (`-S`), and no PYTHONPATH entry holding the checkout (what a driver on this machine
    would hand its executors); entries Spark adds (`--py-files`, pyspark) stay."""
    site = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    script = directory / "remote-python"
    script.write_text(
        f"#!{sys.executable} -S\n"
        "import os, sys\n"
        "keep = [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep)\n"
        "        if p and not os.path.isfile(os.path.join(p, 'impl', 'gc', 'job.py'))]\n"
        f"os.environ['PYTHONPATH'] = os.pathsep.join(keep + {site!r})\n"
        f"os.execv({sys.executable!r}, [{sys.executable!r}, '-S', *sys.argv[1:]])\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    base = tmp_path_factory.mktemp("standalone")
    port, ui, wui = free_port(), free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    logs = [open(base / "master.log", "wb"), open(base / "worker.log", "wb")]  # noqa: SIM115
    spark_class = str(BIN / "spark-class")
    master = subprocess.Popen(
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
         "--port", str(port), "--webui-port", str(ui)],
        env=_env(), stdout=logs[0], stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    worker = subprocess.Popen(
        [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
         "--cores", "2", "--memory", "1g", "--webui-port", str(wui),
         "--work-dir", str(base / "work"), url],
        env=_env(), stdout=logs[1], stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
                    if json.load(r).get("aliveworkers", 0) >= 1:
                        break
            except (OSError, ValueError):
                # Not up yet: refused, or (on a loaded host, 1 start in a CI run) an HTML page
                # served at /json/ while the master's UI was still being set up.
                pass
            if time.monotonic() > deadline or master.poll() is not None:
                pytest.fail("standalone master/worker did not start: " + _tail(base))
            time.sleep(0.5)
        yield url, base
    finally:
        for p in (worker, master):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)  # our own process group only
        for p in (worker, master):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for f in logs:
            f.close()


def _tail(base: Path) -> str:
    return "\n".join(
        p.read_text(errors="replace")[-2000:] for p in (base / "master.log", base / "worker.log")
    )


def _store(root: Path) -> set[str]:
    """A store whose reports are fresh now and whose old objects are past the 12h grace."""
    now = time.time()
    simple_cluster(LocalStore(root, create=True), 10, now=now)
    keys = {format_key(p, e, "old") for p in (0, 500, 999) for e in (2, 10)}
    for k in keys:
        put_local(root, k, age=13 * 3600, now=now)
    put_local(root, format_key(1, 11, "live"), age=13 * 3600, now=now)
    return keys


def _run(cmd: list[str], env: dict[str, str], base: Path) -> dict[str, object]:
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240, cwd=base)
    assert p.returncode == 0, f"{cmd}\nstdout: {p.stdout[-2000:]}\nstderr: {p.stderr[-4000:]}"
    return dict(json.loads(p.stdout.strip().splitlines()[-1]))


def test_spark_submit_with_the_package_and_spark_conf(cluster: tuple[str, Path]) -> None:
    url, base = cluster
    root = base / "store-a"
    keys = _store(root)
    dist = base / "dist"
    subprocess.run(
        [sys.executable, "-m", "epochgc.impl.cli", "gc-package", "--out", str(dist)], check=True
    )
    remote = _remote_python(base)
    # Driver and executors both run the remote Python: the zip is all the code they get;
    # every option comes from spark.epochgc.* conf.
    cmd = [
        str(BIN / "spark-submit"), "--master", url, "--driver-memory", "512m",
        "--conf", "spark.executor.memory=512m",
        "--conf", f"spark.pyspark.python={remote}",
        "--conf", f"spark.epochgc.store={root}",
        "--conf", "spark.epochgc.json=true",
        "--conf", "spark.epochgc.quiet=true",
        "--conf", "spark.epochgc.tasks=4",
        "--py-files", str(dist / "epochgc.zip"), str(dist / "epochgc_gc_submit.py"),
    ]  # fmt: skip
    out = _run(cmd, _env(), base)
    assert (out["M"], out["deleted"], out["errors"]) == (10, len(keys), 0), out
    assert not any((root / k).exists() for k in keys)
    assert (root / format_key(1, 11, "live")).exists()


def test_master_url_without_spark_submit_ships_the_code(cluster: tuple[str, Path]) -> None:
    url, base = cluster
    root = base / "store-b"
    keys = _store(root)
    env = _env()
    env["PYSPARK_PYTHON"] = str(_remote_python(base))  # executors only; driver: this Python
    cmd = [sys.executable, "-m", "epochgc.impl.gc", "--master", url, "--store", str(root), "--json",
           "-q", "--tasks", "4"]  # fmt: skip
    out = _run(cmd, env, base)
    assert (out["deleted"], out["errors"]) == (len(keys), 0), out
    assert not any((root / k).exists() for k in keys)


