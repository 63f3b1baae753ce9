"""newuser16 S11: `demo` when Spark cannot run. `--gc-engine auto` picked Spark because
PySpark imports (no Java check), said "Spark session ready" for a JVM that had exited, and
ended in a 119-line traceback (exit 1); a Spark round that failed (PYSPARK_PYTHON=/bin/false)
ended in a 127-line one. Now auto runs the checks `--gc-engine spark` refuses by and falls
back to the model's round saying why; a Spark that fails to start falls back (auto) or is one
line, exit 69 (spark); a failed Spark round is one line, exit 1; "Spark session started" is
said only of a session that started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from epochgc.impl.cluster.demo_gc import DemoGc
from epochgc.impl.exitcodes import ExitCode
from epochgc.impl.java import runner
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.url import parse_store_url

pytest.importorskip("pyspark")

ROOT = Path(__file__).resolve().parents[2]
_BOUND_S = 300.0  # a start-up that never resolves fails the test; never reached otherwise


def _gc(tmp_path: Path, engine: str) -> DemoGc:
    root = tmp_path / "store"
    return DemoGc(parse_store_url(str(root)), LocalStore(root, create=True), 0.0, engine,
                  scratch_in=tmp_path)


def test_auto_without_java_runs_the_models_round_saying_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tester's JAVA_HOME=/nonexistent. Old code: engine "spark" (a JVM that never
    started, a traceback at the end)."""
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nonexistent"))
    gc = _gc(tmp_path, "auto")
    try:
        assert gc.engine == "model", gc.engine
        assert gc.fallback is not None and "Java not found" in gc.fallback, gc.fallback
        assert str(tmp_path / "nonexistent") in gc.fallback
        assert gc.ready() and gc.settle() is None  # said once, with the engine, by the demo
    finally:
        gc.close()


@pytest.mark.parametrize(("name", "value", "said"), [
    ("PYSPARK_PYTHON", "", "PYSPARK_PYTHON is set but empty"),
    ("SPARK_HOME", "", "SPARK_HOME is set but empty"),
    ("SPARK_HOME", "/nonexistent", "SPARK_HOME=/nonexistent: /nonexistent/bin/spark-submit")])
def test_auto_falls_back_as_gc_refuses_for_sparks_environment(
        monkeypatch: pytest.MonkeyPatch, name: str, value: str, said: str) -> None:
    """newuser17 T3/T3b: with `PYSPARK_PYTHON=` auto picked Spark and failed (exit 1); with a
    wrong SPARK_HOME gc failed while demo ran. The engine choice alone (no Spark start): the
    model's round, saying the variable."""
    from epochgc.impl.cluster.demo_gc import auto_engine

    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.setenv(name, value)
    engine, why = auto_engine()
    assert engine == "model" and why is not None and said in why, (engine, why)


@pytest.fixture
def java_that_stops_at_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A JAVA_HOME whose `java` answers `-version` as the real one does (so the preflight
    passes) and exits 1 when Spark's launcher runs it: PySpark's real gateway start-up then
    fails with JAVA_GATEWAY_EXITED, the tester's failure after the checks."""
    real, _ = runner()
    if real is None:
        pytest.skip("no Java here")
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f'#!/bin/sh\ncase "$1" in -version) exec {real} "$@";; esac\n'
                    'echo "this Java stops at start" >&2\nexit 1\n')
    java.chmod(0o755)
    # Restored after the test: a Spark start-up points it at its scratch directory
    # (`session.spark_scratch`), which `close` removes; the next test's JVM must not use it.
    # (setenv, not delenv: pytest records no undo for deleting an absent variable).
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path))
    return str(home)


# Spark's start-up runs in a fresh interpreter: in the suite's process an earlier test's
# Spark session may be alive, and PySpark's `getOrCreate` would hand it over instead of
# starting the JVM this test breaks (the fresh-clone CI saw "Spark session started").
_START_UP = """
import json, sys, time
from pathlib import Path
from epochgc.impl.cluster.demo_gc import DemoGc, GcFailed
from epochgc.impl.store.local import LocalStore
from epochgc.impl.store.url import parse_store_url
tmp, engine, bound = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
root = tmp / "store"
gc = DemoGc(parse_store_url(str(root)), LocalStore(root, create=True), 0.0, engine,
            scratch_in=tmp)
out = {"engine_before": gc.engine}
try:
    limit = time.monotonic() + bound
    while not gc.ready():
        assert time.monotonic() < limit, "Spark's start-up never resolved"
        time.sleep(0.05)
    try:
        out["said"] = gc.settle()
        out["engine_after"] = gc.engine
        out["said_again"] = gc.settle()
    except GcFailed as e:
        out["failed"] = str(e)
        out["exit_code"] = int(e.exit_code)
finally:
    gc.close()
print(json.dumps(out))
"""


def _start_up(tmp_path: Path, engine: str, java_home: str) -> dict[str, object]:
    env = dict(os.environ, JAVA_HOME=java_home, SPARK_LOCAL_DIRS=str(tmp_path),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT),
                                                         os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, "-c", _START_UP, str(tmp_path), engine,
                        str(_BOUND_S)], env=env, capture_output=True, text=True,
                       timeout=_BOUND_S + 60)
    assert r.returncode == 0, r.stderr[-3000:]
    return dict(json.loads(r.stdout.splitlines()[-1]))


def test_auto_when_spark_does_not_start_falls_back_saying_why(
        tmp_path: Path, java_that_stops_at_start: str) -> None:
    """Old code: "Spark session ready", then every round raised the start-up's GcError."""
    out = _start_up(tmp_path, "auto", java_that_stops_at_start)
    assert out["engine_before"] == "spark", out  # the checks pass: Java answers -version
    said = str(out.get("said"))
    assert said.startswith("Spark did not start: "), out
    assert "JAVA_GATEWAY_EXITED" in said and "the model's round instead" in said, out
    assert out["engine_after"] == "model" and out["said_again"] is None, out  # said once


def test_spark_when_spark_does_not_start_is_one_error_69(
        tmp_path: Path, java_that_stops_at_start: str) -> None:
    out = _start_up(tmp_path, "spark", java_that_stops_at_start)
    assert out.get("exit_code") == ExitCode.UNAVAILABLE, out
    assert str(out.get("failed")).startswith("Spark did not start: "), out


# --- the tester's commands (a whole demo each, 10-20 s: tox -e demo-engines) ---

def _demo(tmp_path: Path, engine: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "epochgc", "demo", "--seconds", "8", "--gc-engine", engine],
        cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT), **env),
        capture_output=True, text=True, timeout=600)


def test_demo_auto_without_java(tmp_path: Path) -> None:
    """Old code: rc 1, "Spark session ready", a 119-line traceback."""
    p = _demo(tmp_path, "auto", JAVA_HOME="/nonexistent")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "GC engine: model (Java not found: /nonexistent/bin/java" in p.stderr, p.stderr
    assert "Spark session" not in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert "GC (model, " in p.stdout, p.stdout


def test_demo_spark_whose_rounds_fail_is_one_line(tmp_path: Path) -> None:
    """PYSPARK_PYTHON=/bin/false: the workers cannot start. Old code: rc 1, three
    tracebacks (127 lines)."""
    p = _demo(tmp_path, "spark", PYSPARK_PYTHON="/bin/false")
    assert p.returncode == 1, p.stderr[-3000:]
    assert "Traceback" not in p.stderr, p.stderr
    last = p.stderr.splitlines()[-1]
    assert last.startswith("epochgc demo: error: a Spark GC round failed: "), last
    assert "removed " in last and "stopped 3 broker process(es)" in last, last
