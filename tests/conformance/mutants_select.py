"""Coverage-based test selection for `mutants --suite --select coverage` (issue 31).

    python -m tests.conformance.mutants_select collect [--covlib DIR] [--out build/mutsel]
    python -m tests.conformance.mutants_select show NAME ...

`collect` runs the non-Spark CI suite ONCE, unmutated, in a copy of the tree, under
coverage.py with one context per test (`mutants_covplugin`), children included, and writes
an index: for every line of impl/ the tests that executed it, each test's duration, the
tests that failed (never selected), and the tests whose children died unmeasured (`opaque`:
taken to execute every line). A mutant then runs only the tests that can see its edit:

- an edit inside a function body selects every test that executed any line of the innermost
  function containing it (function granularity: coverage's line events for multi-line
  statements, `else:` lines and inserted lines do not have to line up with the edit);
- an edit outside every function body (module level, a class body, a `def` line, its
  decorators or default arguments, an import) runs when the module is imported, which every
  test session does at collection: it selects every test;
- an edit whose old text is not found exactly once in the original file also selects every
  test (it cannot be placed);
- plus every opaque test.

Order (a mutant's run stops at its first kill): tests whose file the mutant's check names,
then the tests that executed the edited lines themselves, then the rest, each group fastest
first. A mutant whose selection is empty is `not covered`: a survivor, reported as such.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from epochgc.proofs.mutate import Mutant, copy_tree
from tests.conformance import mutants_covplugin as plugin

ROOT = Path(__file__).resolve().parents[2]
# Where the index maps lines to tests. A mutant editing anything else (issue 42: a
# checker's own bugs in tests/ or proofs/) runs every test, its named check first.
MEASURED = "impl"
DEFAULT_OUT = ROOT / "build" / "mutsel"
# Where coverage.py is when the running environment has none: `pip install --target DIR
# coverage` (a private copy; the tox environment `mutants-suite-select` installs it instead).
FALLBACK_COVLIB = Path("/tmp/epochgc-covlib")


def default_covlib() -> Path:
    """The directory holding the `coverage` package: the running environment's, if it has
    one, else FALLBACK_COVLIB."""
    try:
        import coverage
    except ImportError:
        return FALLBACK_COVLIB
    return Path(coverage.__file__).resolve().parents[1]


class Scope(Enum):
    """Where an edit sits in its module."""

    FUNCTION = "function"  # inside a function body: runs only when the function runs
    MODULE = "module"  # runs at import (module level, class body, def line, defaults)
    UNPLACED = "unplaced"  # the old text is not in the original file exactly once


@dataclass(frozen=True)
class Edit:
    """One edit of a mutant, placed in the original file."""

    path: str
    first: int  # first and last line of the old text (1-based, inclusive)
    last: int
    scope: Scope
    body: tuple[int, int] | None  # the innermost enclosing function body's line span


@dataclass(frozen=True)
class Index:
    """Which tests executed which impl/ lines in the unmutated baseline run."""

    tests: tuple[str, ...]  # every test of the baseline, in run order
    lines: dict[str, dict[int, frozenset[str]]]  # relative path -> line -> test ids
    secs: dict[str, float]
    failed: frozenset[str]  # failed in the baseline: never selected
    opaque: frozenset[str]  # a child died unmeasured: taken to execute every line
    digest: str  # of the measured sources the index was taken on


class Reason(Enum):
    LINES = "covering tests"
    ALL = "every test (edit runs at import)"
    NOT_COVERED = "not covered"


@dataclass(frozen=True)
class Selection:
    """The tests a mutant runs, in order, and why."""

    tests: tuple[str, ...]
    reason: Reason
    exact: int  # how many executed the edited lines themselves


def _function_bodies(tree: ast.AST) -> list[tuple[int, int]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            end = node.end_lineno if node.end_lineno is not None else node.body[-1].lineno
            out.append((node.body[0].lineno, end))
    return out


def place(m: Mutant, root: Path = ROOT) -> list[Edit]:
    """Every edit of `m` placed in the ORIGINAL file (the line numbers the index uses):
    its old text's line span, and whether that span lies inside one function body (the
    innermost one containing all of it) or runs at import."""
    out = []
    for path, old, _new in m.edits():
        text = (root / path).read_text()
        if text.count(old) != 1:
            out.append(Edit(path, 0, 0, Scope.UNPLACED, None))
            continue
        start = text.index(old)
        first = text.count("\n", 0, start) + 1
        # A trailing newline ends the old text's last line; it does not start another.
        last = first + old.rstrip("\n").count("\n")
        bodies = [b for b in _function_bodies(ast.parse(text)) if b[0] <= first and last <= b[1]]
        if not bodies:
            out.append(Edit(path, first, last, Scope.MODULE, None))
            continue
        body = max(bodies)  # innermost: the latest start among those containing the span
        out.append(Edit(path, first, last, Scope.FUNCTION, body))
    return out


def named_files(m: Mutant) -> list[str]:
    """The test files the mutant's check names (its most likely killers)."""
    return re.findall(r"tests/[\w/]+\.py", m.check)


def select(m: Mutant, index: Index, edits: Sequence[Edit]) -> Selection:
    """The tests `m` runs, ordered named-check first, then exact-line hits, then the rest,
    each group fastest first; failed-in-baseline tests never. See the module docstring."""
    usable = [t for t in index.tests if t not in index.failed]
    exact: set[str] = set()
    sound: set[str] = set(index.opaque)
    everything = False
    for e in edits:
        if (e.scope is not Scope.FUNCTION or e.body is None
                or not e.path.startswith(f"{MEASURED}/")):
            everything = True
            continue
        by_line = index.lines.get(e.path, {})
        for line, tests in by_line.items():
            if e.first <= line <= e.last:
                exact |= tests
            if e.body[0] <= line <= e.body[1]:
                sound |= tests
    chosen = set(usable) if everything else (sound | exact) - index.failed
    if not chosen:
        return Selection((), Reason.NOT_COVERED, 0)
    named = tuple(named_files(m))
    order = {t: i for i, t in enumerate(index.tests)}

    def key(t: str) -> tuple[int, float, int]:
        group = 0 if t.startswith(named) and named else (1 if t in exact else 2)
        return (group, index.secs.get(t, 0.0), order.get(t, 0))

    return Selection(tuple(sorted(chosen, key=key)),
                     Reason.ALL if everything else Reason.LINES, len(exact & chosen))


def digest(root: Path) -> str:
    """A hash of the measured sources (an index is valid only for the tree it was taken on)."""
    h = hashlib.sha256()
    for f in sorted((root / MEASURED).rglob("*.py")):
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def save_index(index: Index, path: Path) -> None:
    tests = list(index.tests)
    pos = {t: i for i, t in enumerate(tests)}
    data = {
        "digest": index.digest, "tests": tests,
        "secs": index.secs, "failed": sorted(index.failed), "opaque": sorted(index.opaque),
        "lines": {f: {str(n): sorted(pos[t] for t in ts) for n, ts in sorted(lines.items())}
                  for f, lines in sorted(index.lines.items())},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def load_index(path: Path) -> Index:
    """The index `collect` wrote; a clear error when there is none."""
    if not path.exists():
        raise SystemExit(f"no coverage index at {path}: run "
                         "`python -m tests.conformance.mutants_select collect` first")
    data = json.loads(path.read_text())
    tests = tuple(data["tests"])
    lines = {f: {int(n): frozenset(tests[i] for i in ids) for n, ids in by.items()}
             for f, by in data["lines"].items()}
    return Index(tests, lines, {k: float(v) for k, v in data["secs"].items()},
                 frozenset(data["failed"]), frozenset(data["opaque"]), data["digest"])


# The child processes' start-up hook: measure the child with the test's id as its static
# context, leave a marker (pid, context) so a child killed before saving is seen, and pass
# the same environment to the child's own children.
SITECUSTOMIZE = '''\
import json, os, subprocess
if os.environ.get("COVERAGE_PROCESS_START"):
    _markers = os.environ.get("EPOCHGC_MUTSEL_MARKERS")
    if _markers:
        with open(os.path.join(_markers, str(os.getpid()) + ".json"), "w") as _f:
            json.dump({"pid": os.getpid(), "context": os.environ.get("@CTX@", "")}, _f)
    import coverage
    coverage.process_startup()
    _real = subprocess.Popen.__init__
    _keys = ("@CTX@", "@PATH@", "COVERAGE_PROCESS_START", "EPOCHGC_MUTSEL_MARKERS")
    def _init(self, *a, **kw):
        env = kw.get("env")
        if env is not None:
            env = dict(env)
            extra = os.environ["@PATH@"]
            pp = env.get("PYTHONPATH", "")
            if extra not in pp.split(os.pathsep):
                env["PYTHONPATH"] = pp + os.pathsep + extra if pp else extra
            for k in _keys:
                if k in os.environ:
                    env[k] = os.environ[k]
            kw["env"] = env
        _real(self, *a, **kw)
    subprocess.Popen.__init__ = _init
'''.replace("@CTX@", plugin.CONTEXT_VAR).replace("@PATH@", plugin.CHILD_PATH_VAR)


def _suite_paths(root: Path) -> list[str]:
    from tests.conformance.mutants import suite_tests
    return [str(root / t) for t in suite_tests(None, "all", [])]


def collect(out: Path, covlib: Path, marks: str = "not spark",
            tests: Iterable[str] | None = None, timeout: float = 7200.0) -> Index:
    """Run the suite once under coverage in a copy of the tree; write and return the index."""
    from tests.conformance.mutants import SUITE_DIRS, _git_dir
    if not (covlib / "coverage").is_dir():
        raise SystemExit(f"coverage.py not found in {covlib}: "
                         f"`pip install --target {covlib} coverage`")
    shutil.rmtree(out, ignore_errors=True)
    (out / "cov").mkdir(parents=True)
    (out / "markers").mkdir()
    site = out / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    base = Path(tempfile.mkdtemp(prefix="epochgc-mutsel-"))
    try:
        root = base / "clean"
        copy_tree(ROOT, root, SUITE_DIRS)
        rc = out / "coveragerc"
        rc.write_text(
            "[run]\n"
            f"data_file = {out / 'cov' / '.coverage'}\n"
            "parallel = true\n"
            f"source = {root / MEASURED}\n"
            f"context = ${{{plugin.CONTEXT_VAR}-}}\n"
            "sigterm = true\n")
        record = out / "failures.jsonl"
        env = dict(os.environ)
        env.update(PYTHONPATH=f"{root}{os.pathsep}{covlib}", EPOCHGC_CONFORMANCE_PROFILE="ci",
                   EPOCHGC_CONFORMANCE_SPARK="0", PYTHONHASHSEED="0",
                   EPOCHGC_FAILRECORD=str(record), GIT_DIR=_git_dir(),
                   COVERAGE_PROCESS_START=str(rc), **{plugin.MARKERS_VAR: str(out / "markers")})
        env[plugin.CONTEXT_VAR] = ""
        env[plugin.CHILD_PATH_VAR] = f"{covlib}{os.pathsep}{site}"
        env[plugin.DURATIONS_VAR] = str(out / "durations.jsonl")
        paths = list(tests) if tests is not None else _suite_paths(root)
        cmd = [sys.executable, "-m", "coverage", "run", f"--rcfile={rc}", "-m", "pytest",
               "-q", "-p", "no:cacheprovider", "-p", "epochgc.proofs.pytest_failrecord",
               "-p", "tests.conformance.mutants_covplugin", "--rootdir", str(root),
               "-o", "addopts=", "-c", str(ROOT / "pyproject.toml"), "-m", marks, *paths]
        t = time.monotonic()
        with open(out / "pytest.log", "w") as log:
            p = subprocess.run(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
                               timeout=timeout)
        secs = time.monotonic() - t
        subprocess.run([sys.executable, "-m", "coverage", "combine", f"--rcfile={rc}",
                        "--keep", "-q"], cwd=root, env=env, check=True)
        index = build_index(out, root, covlib)
        save_index(index, out / "index.json")
        (out / "baseline.json").write_text(json.dumps(
            {"exit": p.returncode, "secs": round(secs, 1), "tests": len(index.tests),
             "failed": sorted(index.failed), "opaque": sorted(index.opaque)}, indent=1))
        return index
    finally:
        shutil.rmtree(base, ignore_errors=True)


def build_index(out: Path, root: Path, covlib: Path) -> Index:
    """Read the combined coverage data, the durations, the failures and the child markers."""
    sys.path.insert(0, str(covlib))
    from coverage import CoverageData  # the collector's private copy of coverage.py

    secs: dict[str, float] = {}
    order: list[str] = []
    for line in (out / "durations.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["test"] not in secs:
            order.append(r["test"])
        secs[r["test"]] = secs.get(r["test"], 0.0) + float(r["secs"])
    rec = out / "failures.jsonl"
    failed = frozenset(json.loads(x)["test"] for x in rec.read_text().splitlines()
                       if x.strip()) if rec.exists() else frozenset()
    data = CoverageData(basename=str(out / "cov" / ".coverage"))
    data.read()
    lines: dict[str, dict[int, frozenset[str]]] = {}
    for f in data.measured_files():
        rel = str(Path(f).relative_to(root))
        by = data.contexts_by_lineno(f)
        lines[rel] = {n: frozenset(_test_of(c) for c in cs if _test_of(c))
                      for n, cs in by.items()}
    # A child that left a start marker but no data file died before saving (SIGKILL).
    # Data files are named .coverage.HOST.pidPID.RANDOM; one that does not read (a child
    # killed mid-save, or under a file size limit) is not saved.
    saved = {m.group(1) for p in (out / "cov").glob(".coverage.*")
             if (m := re.search(r"\.pid(\d+)\.", p.name)) and _readable(p)}
    opaque = set()
    for mk in (out / "markers").glob("*.json"):
        r = json.loads(mk.read_text())
        if str(r["pid"]) not in saved and r["context"]:
            opaque.add(r["context"])
    return Index(tuple(order), lines, secs, failed, frozenset(opaque), digest(root))


def _readable(path: Path) -> bool:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            db.execute("select count(*) from line_bits").fetchone()
    except sqlite3.Error:
        return False
    return True


def _test_of(context: str) -> str:
    """The test id in a coverage context ("static|dynamic", either may be empty)."""
    return next((p for p in context.split("|") if "::" in p), "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="run the suite once under coverage; write the index")
    c.add_argument("--out", type=Path, default=DEFAULT_OUT)
    c.add_argument("--covlib", type=Path, default=None,
                   help="directory holding the coverage package (default: this environment's)")
    c.add_argument("--marks", default="not spark")
    c.add_argument("tests", nargs="*", help="test paths (default: the whole suite)")
    s = sub.add_parser("show", help="print each named mutant's selection")
    s.add_argument("--index", type=Path, default=DEFAULT_OUT / "index.json")
    s.add_argument("names", nargs="*")
    args = ap.parse_args(argv)
    if args.cmd == "collect":
        idx = collect(args.out, args.covlib or default_covlib(), args.marks, args.tests or None)
        print(f"index: {len(idx.tests)} tests, {len(idx.failed)} failed, "
              f"{len(idx.opaque)} opaque, {sum(len(v) for v in idx.lines.values())} lines")
        return 0
    from tests.conformance.mutants import MUTANTS
    index = load_index(args.index)
    for m in MUTANTS:
        if args.names and m.name not in args.names:
            continue
        sel = select(m, index, place(m))
        print(f"{m.name:40} {sel.reason.value:34} {len(sel.tests):5} tests "
              f"({sel.exact} on the edited lines); first: {sel.tests[:1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
