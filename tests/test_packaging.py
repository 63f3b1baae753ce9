"""The wheel's package list (pyproject.toml) against the folders, and the links that make
the checkout's folders `epochgc.*`: a subpackage missing from the list would be left out of
the wheel while every test in a checkout still passes."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

from epochgc.proofs.mutate import copy_tree

ROOT = Path(__file__).resolve().parents[1]
CODE = ("model", "impl", "proofs", "experiments")
LINKED = (*CODE, "spec")  # epochgc/<name> -> ../<name>


def test_every_subpackage_is_in_the_wheel() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = {p for p in config["packages"] if not p.startswith("epochgc.spec")}
    found = {"epochgc"} | {
        "epochgc." + ".".join(init.parent.relative_to(ROOT).parts)
        for top in CODE for init in (ROOT / top).rglob("__init__.py")
        if "__pycache__" not in init.parts}
    assert listed == found
    # The links carry the mapping; a package-dir remapping would be a second one to know.
    assert "package-dir" not in config


def test_the_shipped_folders_are_relative_links_in_the_package() -> None:
    """`epochgc/model` is `../model` (relative: a clone or a copy of the tree links to its
    own folders), and epochgc/ holds nothing else but its two modules."""
    pkg = ROOT / "epochgc"
    for name in LINKED:
        assert (pkg / name).is_symlink(), f"epochgc/{name} is not a link"
        assert os.readlink(pkg / name) == f"../{name}"
    assert sorted(p.name for p in pkg.iterdir() if p.name != "__pycache__") == sorted(
        ["__init__.py", "__main__.py", *LINKED])


def test_the_checkout_imports_the_same_names() -> None:
    import epochgc.model.keys

    f = Path(epochgc.model.keys.__file__)
    assert f == ROOT / "epochgc" / "model" / "keys.py"
    assert f.resolve() == ROOT / "model" / "keys.py"
    assert Path(epochgc.data_path("spec", "vectors")).resolve() == ROOT / "spec" / "vectors"
    assert str(ROOT) == epochgc.IMPORT_ROOT


def test_a_copy_of_the_tree_imports_the_file_patched_in_the_copy(tmp_path: Path) -> None:
    """The mutation runners patch model/..., impl/... in a copy and run it: the copy must
    import those files, not copies of them made through the links."""
    copy_tree(ROOT, tmp_path, ["epochgc", "model"])
    assert (tmp_path / "epochgc" / "model").is_symlink()
    with open(tmp_path / "model" / "keys.py", "a") as f:
        f.write("\nPATCHED_IN_THE_COPY = True\n")
    code = "import epochgc.model.keys as k; print(k.PATCHED_IN_THE_COPY, k.__file__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=True, env=dict(os.environ, PYTHONPATH=str(tmp_path)))
    assert out.stdout.split() == ["True", str(tmp_path / "epochgc" / "model" / "keys.py")]


def test_the_package_holds_only_its_own_subpackages() -> None:
    """`epochgc` is its folder and nothing else: the repository root once was on its path,
    so `epochgc.tests` and `epochgc.epochgc.epochgc...` imported, and walking the package
    (pkgutil.walk_packages, as an editable install's tools do) never ended."""
    import importlib.util
    import pkgutil

    import epochgc

    assert [str(Path(p)) for p in epochgc.__path__] == [str(ROOT / "epochgc")]
    for alias in ("epochgc.epochgc", "epochgc.tests", "epochgc.benchmarks"):
        assert importlib.util.find_spec(alias) is None, alias
    assert sorted(m.name for m in pkgutil.iter_modules(epochgc.__path__)) == sorted(
        ["__main__", *CODE])
