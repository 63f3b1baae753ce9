"""The wheel, the sdist and the Spark zip each hold every module of the checkout once.

The checkout's folders reach the package through links (epochgc/model -> ../model): a
build that kept a link as a link, or that also packed the folder itself, would ship a
module twice or not at all, while every test in the checkout still passes. Built here with
the project's own build backend (setuptools, as `pip wheel .` and `python -m build` use
it) from a copy of the tree, so the checkout gets no build/ or egg-info.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from epochgc.impl.gc.package import PACKAGES, build_zip
from epochgc.proofs.mutate import copy_tree

ROOT = Path(__file__).resolve().parents[1]
CODE = ("model", "impl", "proofs", "experiments")
# What an sdist needs to build (tests/test*.py: setuptools adds those by default).
SDIST_TREE = ("epochgc", *CODE, "spec", "tests", "pyproject.toml", "README.md", "LICENSE")


def checkout_modules(tops: tuple[str, ...] = CODE) -> list[str]:
    """Every module of the checkout as the package names its file: epochgc/model/keys.py."""
    out = [f"epochgc/{f.name}" for f in (ROOT / "epochgc").glob("*.py")]
    for top in tops:
        out += [f"epochgc/{top}/{f.relative_to(ROOT / top).as_posix()}"
                for f in (ROOT / top).rglob("*.py") if "__pycache__" not in f.parts]
    return sorted(out)


def once(names: list[str]) -> tuple[list[str], list[str]]:
    """The .py entries, sorted, and those that appear more than once."""
    counts = Counter(n for n in names if n.endswith(".py"))
    return sorted(counts), sorted(n for n, c in counts.items() if c > 1)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tree = tmp_path_factory.mktemp("tree")
    copy_tree(ROOT, tree, SDIST_TREE)
    out = tree / "dist"
    out.mkdir()
    for hook in ("build_sdist", "build_wheel"):  # one process each: the backend keeps state
        code = f"import setuptools.build_meta as b, sys; b.{hook}(sys.argv[1])"
        p = subprocess.run([sys.executable, "-c", code, str(out)], cwd=tree,
                           capture_output=True, text=True, check=False)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return next(out.glob("*.tar.gz")), next(out.glob("*.whl"))


def test_the_wheel_holds_each_module_once(built: tuple[Path, Path]) -> None:
    names = zipfile.ZipFile(built[1]).namelist()
    modules, twice = once(names)
    assert twice == []
    assert modules == checkout_modules()
    # Only epochgc/ in site-packages.
    assert {n.split("/")[0] for n in names} == {"epochgc", "epochgc-0.1.0.dist-info"}


def test_the_sdist_holds_each_module_once(built: tuple[Path, Path]) -> None:
    with tarfile.open(built[0]) as t:
        members = t.getmembers()
    top = members[0].name.split("/")[0] + "/"
    # Files, not links: an sdist unpacked anywhere (or on a system without links) builds.
    assert [m.name for m in members if m.issym() or m.islnk()] == []
    names = [m.name.removeprefix(top) for m in members if m.isfile()]
    modules, twice = once(names)
    assert twice == []
    shipped = [n for n in modules if n.startswith("epochgc/")]
    assert shipped == checkout_modules()
    # Nothing of the package also at the top (model/keys.py beside epochgc/model/keys.py).
    assert [n for n in modules if n not in shipped and not n.startswith("tests/")] == []


def test_the_spark_zip_holds_each_module_once(tmp_path: Path) -> None:
    names = zipfile.ZipFile(build_zip(tmp_path / "epochgc.zip")).namelist()
    modules, twice = once(names)
    assert twice == []
    assert len(names) == len(modules)  # nothing but modules
    want = [n for n in checkout_modules(PACKAGES) if n != "epochgc/__main__.py"]
    assert modules == want
