"""mypy over the `epochgc` package as it installs: the checkout keeps model/, impl/, ...
at the top level (epochgc/__init__.py maps them at import time, which mypy cannot follow),
so a tree of links under build/typecheck/ gives mypy the installed layout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("model", "impl", "proofs")


def main() -> int:
    farm = ROOT / "build" / "typecheck"
    shutil.rmtree(farm, ignore_errors=True)
    pkg = farm / "epochgc"
    pkg.mkdir(parents=True)
    os.symlink(ROOT / "epochgc" / "__init__.py", pkg / "__init__.py")
    for name in PACKAGES:
        os.symlink(ROOT / name, pkg / name, target_is_directory=True)
    cmd = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
           "-p", "epochgc", *sys.argv[1:]]
    env = dict(os.environ, MYPYPATH=str(farm))
    return subprocess.run(cmd, cwd=farm, env=env, check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main())
