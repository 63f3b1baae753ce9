"""Every extra a message or a document tells a person to install exists in pyproject.toml
(newuser41: the README says `[gc]`, the messages `pip install 'epochgc[spark]'`: a person
cannot tell whether both exist). Derived from the files it guards: each `epochgc[A,B]` /
`.[A,B]` in the documents, the CI scripts and the code, each backquoted `[A]` on a line
about installing, and the module -> extra tables the messages are built from."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from epochgc.impl.gc.cli import _NEEDS
from epochgc.impl.preflight import COMMAND_EXTRA, EXTRA_OF

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
             ["optional-dependencies"])
SKIP = {"build", "node_modules"}


def _ours(parts: tuple[str, ...]) -> bool:
    """Not a virtualenv, cache or tool directory: `.ci/run` makes `.tox-bootstrap` in the
    checkout (pip's and distlib's sources name other extras), tox `.tox`."""
    return not SKIP & set(parts) and not any(
        p.startswith(".") and p != ".ci" for p in parts[:-1])


FILES = sorted(
    p for p in ROOT.rglob("*")
    if p.is_file() and p.suffix in {".md", ".py", ".js", ".ini", ".toml", ""}
    and _ours(p.relative_to(ROOT).parts) and p.name != "test_extras.py"
    and (p.suffix or p.parent.name == ".ci"))
# `epochgc[gc,conform]`, `.[gc]`; a placeholder (`[{extra}]`, `[EXTRA]`) is not a name.
_NAME = r"[a-z][a-z0-9_-]*"
NAMED = re.compile(rf"(?:\bepochgc|(?<![\w)\]])\.)\[({_NAME}(?:,\s*{_NAME})*)\]")
BARE = re.compile(rf"`\[({_NAME})\]`")  # `[s3]` in prose about installing
TOX = re.compile(rf"^extras\s*=\s*({_NAME}(?:\s*,\s*{_NAME})*)\s*$", re.M)  # tox.ini


def named(text: str) -> set[str]:
    found = {n.strip() for rx in (NAMED, TOX) for m in rx.finditer(text)
             for n in m.group(1).split(",")}
    for line in text.splitlines():
        if "pip install" in line or "extra" in line:
            found |= {m.group(1) for m in BARE.finditer(line)}
    return found


def test_every_extra_a_file_names_exists() -> None:
    wrong = {}
    for path in FILES:
        text = path.read_text(encoding="utf-8", errors="replace")
        bad = named(text) - EXTRAS
        if bad:
            wrong[str(path.relative_to(ROOT))] = sorted(bad)
    assert not wrong, f"extras named that pyproject.toml does not define {sorted(EXTRAS)}: {wrong}"


def test_the_messages_name_extras_that_exist() -> None:
    assert set(EXTRA_OF.values()) | set(_NEEDS.values()) | set(COMMAND_EXTRA.values()) <= EXTRAS


def test_the_check_sees_a_wrong_name() -> None:
    """The boundary: a misspelt or made-up extra in either form is found."""
    assert named("pip install 'epochgc[sparks]'") == {"sparks"}
    assert named("pip install '.[gc,conformance]'") == {"gc", "conformance"}
    assert named("extras: `[spark]`, `[s4]`") == {"spark", "s4"}
    assert named("extras = prove, sparky\n") == {"prove", "sparky"}
    assert named("f\"pip install 'epochgc[{extra}]'\" and [EXTRA], x.[0-9], a[1]") == set()
