"""The wheel's package list (pyproject.toml) against the folders: a subpackage missing from
the list would be left out of the wheel while every test in a checkout still passes."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAPPED = ("model", "impl", "proofs", "experiments")


def test_every_subpackage_is_in_the_wheel() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = {p for p in config["packages"] if not p.startswith("epochgc.spec")}
    found = {"epochgc"} | {
        "epochgc." + ".".join(init.parent.relative_to(ROOT).parts)
        for top in MAPPED for init in (ROOT / top).rglob("__init__.py")
        if "__pycache__" not in init.parts}
    assert listed == found
    dirs = config["package-dir"]
    assert all(dirs[f"epochgc.{top}"] == top for top in MAPPED)


def test_the_checkout_imports_the_same_names() -> None:
    import epochgc.model.keys

    assert Path(epochgc.model.keys.__file__).parent == ROOT / "model"
    assert Path(epochgc.data_path("spec", "vectors")).is_dir()
    assert str(ROOT) == epochgc.IMPORT_ROOT
