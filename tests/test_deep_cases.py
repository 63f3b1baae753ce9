"""Each case tests/deep_cases.py leaves to a tox environment exists (a pattern that matched
nothing would keep nothing out of CI, silently) and that environment sets its variable."""

from __future__ import annotations

import configparser
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deep_cases import DEEP

ROOT = Path(__file__).resolve().parents[1]


def test_every_deep_pattern_names_collected_tests_and_its_env_runs_them(
        request: pytest.FixtureRequest) -> None:
    # The suite this run collected (CI's whole suite), else a collection of it.
    ids = [i.nodeid for i in request.session.items]
    if not all(any(re.search(d.pattern, i) for i in ids) for d in DEEP):
        out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                              "--collect-only", "-q", "tests"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
        ids = [x for x in out.splitlines() if "::" in x]
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    for d in DEEP:
        assert [i for i in ids if re.search(d.pattern, i)], f"{d.pattern} matches no test"
        env = tox[f"testenv:{d.env}"]
        assert f"{d.var} = {d.value}" in env.get("setenv", ""), f"tox -e {d.env} sets no {d.var}"
