"""The code executors need, as one zip for `spark-submit --py-files` / `addPyFile`.

Built from the installed `epochgc.impl` and `epochgc.model` packages (not from a checkout),
so it works for `pip install epochgc` too. Entries are sorted and dated 1980-01-01: the same
code gives the same bytes. Executors still need Python (same minor version), pyspark's
Python side, and the extras (`boto3` for S3) installed.
"""

from __future__ import annotations

import importlib
import os
import tempfile
import zipfile
from pathlib import Path

PACKAGES = ("impl", "model")  # under `epochgc`, with the package's own __init__.py
ENTRY_SCRIPT = "epochgc_gc_submit.py"


def build_zip(out: str | Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # A temporary name of its own (mkstemp: created O_EXCL, never an existing file), not a
    # fixed `epochgc.zip.tmp` that replaced or removed a file of the user's of that name and
    # that two runs into one directory fought over (newuser15 S1).
    fd, name = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    tmp = Path(name)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # as an ordinary new file: Spark's user reads it
        root = Path(importlib.import_module("epochgc").__file__ or "")
        with os.fdopen(fd, "wb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as z:
            _add(z, "epochgc/__init__.py", root)
            for pkg_name in PACKAGES:
                pkg = Path(importlib.import_module(f"epochgc.{pkg_name}").__file__ or "").parent
                for src in sorted(pkg.rglob("*.py")):
                    if "__pycache__" in src.parts:
                        continue
                    _add(z, f"epochgc/{pkg_name}/{src.relative_to(pkg).as_posix()}", src)
        tmp.replace(out)  # atomic: a half-written zip is never shipped
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return out


def _add(z: zipfile.ZipFile, name: str, f: Path) -> None:
    info = zipfile.ZipInfo(name)  # dated 1980-01-01: the same code gives the same bytes
    info.compress_type = zipfile.ZIP_DEFLATED
    z.writestr(info, f.read_bytes())


def write_entry_script(out: str | Path) -> Path:
    """The spark-submit main file: the same command as `epochgc gc`, options also from
    `spark.epochgc.*` conf (see impl/gc/submit.py)."""
    out = Path(out)
    src = Path(importlib.import_module("epochgc.impl.gc.submit").__file__ or "")
    out.write_bytes(src.read_bytes())
    return out
