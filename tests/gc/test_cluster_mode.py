"""Cluster-mode boundaries that do not need a cluster (issue 12 item 5): manifest URIs,
the existence check on the target's own file system, shipping the code."""

from __future__ import annotations

import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import pyarrow.csv as pacsv
import pytest

from epochgc.impl.gc.errors import GcError
from epochgc.impl.gc.job import run_gc
from epochgc.impl.gc.options import GcOptions
from epochgc.impl.gc.package import build_zip
from epochgc.model.keys import format_key
from tests.gc.helpers import CountingFactory, local_spec, put_local, simple_cluster

pytestmark = pytest.mark.spark

GRACE = 3600.0


def _store(root: Path) -> tuple[Any, set[str]]:
    spec = local_spec(root)
    now = time.time()  # real time: report freshness also uses the files' mtimes
    simple_cluster(spec(), 10, now=now)
    keys = {format_key(p, 3, "old") for p in (1, 2)}
    for k in keys:
        put_local(root, k, age=2 * GRACE, now=now)
    return spec, keys


def _csv_keys(directory: Path) -> set[str]:
    parts = sorted(directory.glob("part-*.csv"))
    return {k for p in parts for k in pacsv.read_csv(p).column("key").to_pylist()}


def test_manifest_uri_is_not_made_a_local_path(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`os.path.abspath("file:///x/m.csv")` is `$PWD/file:/x/m.csv`: a URI is used as is."""
    spec, keys = _store(tmp_path / "store")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    target = tmp_path / "out" / "m.csv"
    s = run_gc(spark, spec, GcOptions(grace_s=GRACE, dry_run=True, manifest=target.as_uri()))
    assert s.exit_code == 0 and s.eligible == len(keys)
    assert _csv_keys(target) == keys
    assert list(cwd.iterdir()) == []  # nothing written under the driver's directory


def test_existing_manifest_uri_is_refused_before_listing(spark: Any, tmp_path: Path) -> None:
    spec, _ = _store(tmp_path / "store")
    target = tmp_path / "exists.csv"
    target.mkdir()
    counting = CountingFactory(spec, str(tmp_path / "calls"))
    with pytest.raises(GcError, match="already exists"):
        run_gc(spark, counting, GcOptions(grace_s=GRACE, manifest=target.as_uri()))
    # Refused before any listing of the data (and any delete).
    assert [c for c in counting.calls() if c[0].startswith("level_zero/")] == []


def test_unknown_manifest_scheme_is_a_clear_error(spark: Any, tmp_path: Path) -> None:
    spec, _ = _store(tmp_path / "store")
    with pytest.raises(GcError, match=r"manifest nosuchfs://b/m\.csv: cannot check it"):
        run_gc(spark, spec, GcOptions(grace_s=GRACE, manifest="nosuchfs://b/m.csv"))


def test_package_zip_holds_the_code_executors_import(tmp_path: Path) -> None:
    z = build_zip(tmp_path / "epochgc.zip")
    names = set(zipfile.ZipFile(z).namelist())
    for module in ("__init__.py", "impl/gc/scan.py", "impl/gc/delete.py", "impl/store/s3.py",
                   "model/keys.py"):
        assert f"epochgc/{module}" in names
    # One import namespace on the executors too: nothing outside epochgc/.
    assert all(n.startswith("epochgc/") for n in names)
    assert not [n for n in names if "__pycache__" in n]
    # The zip alone imports: a fresh interpreter with only the zip on its path.
    code = "import epochgc.impl.gc.scan as m; print(m.__file__)"
    out = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path[:0] = [{str(z)!r}]; "
                          + code], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.startswith(str(z)), out.stdout
