"""The code executors need, as one zip for `spark-submit --py-files` / `addPyFile`.

Built from the installed `impl` and `model` packages (not from a checkout), so it works for
`pip install epochgc` too. Entries are sorted and dated 1980-01-01: the same code gives the
same bytes. Executors still need Python (same minor version), pyspark's Python side, and
the extras (`boto3` for S3) installed.
"""

from __future__ import annotations

import importlib
import zipfile
from pathlib import Path

PACKAGES = ("impl", "model")
ENTRY_SCRIPT = "epochgc_gc_submit.py"


def build_zip(out: str | Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name in PACKAGES:
            pkg = Path(importlib.import_module(name).__file__ or "").parent
            for f in sorted(pkg.rglob("*.py")):
                if "__pycache__" in f.parts:
                    continue
                info = zipfile.ZipInfo(f"{name}/{f.relative_to(pkg).as_posix()}")
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, f.read_bytes())
    tmp.replace(out)  # atomic: a half-written zip is never shipped
    return out


def write_entry_script(out: str | Path) -> Path:
    """The spark-submit main file: the same command as `epochgc gc`, options also from
    `spark.epochgc.*` conf (see impl/gc/submit.py)."""
    out = Path(out)
    src = Path(importlib.import_module("impl.gc.submit").__file__ or "")
    out.write_bytes(src.read_bytes())
    return out
