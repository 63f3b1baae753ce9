"""The one mutation driver behind `tox -e mutants` and `tox -e prove-mutants`.

A campaign copies the tree to a temp dir, checks that the unmutated copy passes, then for
each mutant copies again, applies its patch (refusing one that does not apply, naming the
file and the text), runs the check command and classifies the outcome. Mutants run in
parallel worker processes (`jobs`); each run is a subprocess, so a thread per job is enough.

Outcomes: `killed` only when the check fails the way a caught bug fails (the caller's
`classify` decides: an AssertionError-family failure for pytest, a safety row for the
proofs), `survived` when the check passes, `error` when it fails any other way (an import
or syntax error, a ValueError, a timeout). A kill by a check other than the one the mutant
names is reported as a mismatch.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Mutant:
    name: str
    what: str
    path: str
    old: str
    new: str
    extra: tuple[tuple[str, str, str], ...] = ()  # more (path, old, new) edits
    check: str = ""  # regex over the killing failure's "test id: ExcType: message"

    def edits(self) -> tuple[tuple[str, str, str], ...]:
        return ((self.path, self.old, self.new), *self.extra)


class PatchRefused(ValueError):
    """A mutant's edit does not apply exactly once to today's tree."""


def patch(root: Path, m: Mutant) -> None:
    for path, old, new in m.edits():
        f = root / path
        if not f.exists():
            raise PatchRefused(f"mutant {m.name}: patch does not apply: no file {path}")
        text = f.read_text()
        n = text.count(old)
        if n != 1:
            raise PatchRefused(f"mutant {m.name}: patch does not apply to {path}: "
                               f"{n} matches for {old!r}")
        f.write_text(text.replace(old, new))


@dataclass(frozen=True)
class RunResult:
    code: int  # process exit code; -1 on timeout
    out: str
    secs: float
    detail: object = None  # whatever the check left behind (report rows, failure records)


@dataclass(frozen=True)
class Verdict:
    outcome: str  # "killed" | "survived" | "error"
    by: str = ""  # the check that failed (test id, proof row)
    why: str = ""  # its message, or why this is not a kill


@dataclass(frozen=True)
class Outcome:
    mutant: Mutant
    verdict: Verdict
    secs: float

    @property
    def mismatch(self) -> bool:
        v = self.verdict
        return (v.outcome == "killed" and bool(self.mutant.check)
                and re.search(self.mutant.check, f"{v.by}: {v.why}") is None)


def run_command(cmd: Sequence[str], cwd: Path, env: dict[str, str], timeout: float
                ) -> tuple[int, str, float]:
    t = time.monotonic()
    try:
        p = subprocess.run(list(cmd), cwd=cwd, env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, "timeout", time.monotonic() - t
    return p.returncode, p.stdout + p.stderr, time.monotonic() - t


def copy_tree(src: Path, dest: Path, dirs: Iterable[str]) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
    for d in dirs:
        if (src / d).is_dir():
            # Links stay links: epochgc/model is `../model`, so the copy imports the file a
            # mutant patches in the copy's model/, not a second copy of it.
            shutil.copytree(src / d, dest / d, symlinks=True, ignore=ignore)
        else:  # a top-level file (pyproject.toml, for a suite that reads it)
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / d, dest / d)
    (dest / "build").mkdir(exist_ok=True)


Runner = Callable[[Path, "Mutant | None"], RunResult]
Classifier = Callable[[RunResult], Verdict]


def campaign(mutants: Sequence[Mutant], *, src: Path, dirs: Sequence[str], run: Runner,
             classify: Classifier, jobs: int, keep: bool = False, prefix: str = "epochgc-mut-",
             on_result: Callable[[Outcome], None] | None = None
             ) -> tuple[RunResult, list[Outcome]]:
    """Baseline then every mutant; returns the baseline run and the outcomes (input order).

    Every patch is applied (and so refused) before anything runs. The caller checks that
    the baseline passed; when it did not, no mutant is run.
    """
    base = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        roots: dict[str, Path] = {}
        for m in mutants:
            root = base / m.name
            copy_tree(src, root, dirs)
            patch(root, m)  # PatchRefused propagates: a stale mutant is a bug in the list
            roots[m.name] = root
        clean = base / "clean"
        copy_tree(src, clean, dirs)
        baseline = run(clean, None)
        if baseline.code != 0:
            return baseline, []

        def one(m: Mutant) -> Outcome:
            r = run(roots[m.name], m)
            o = Outcome(m, classify(r), r.secs)
            if not keep:
                shutil.rmtree(roots[m.name], ignore_errors=True)
            if on_result is not None:
                on_result(o)
            return o

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return baseline, list(pool.map(one, mutants))
    finally:
        if keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


def format_table(outcomes: Sequence[Outcome], component: Callable[[Mutant], str]) -> str:
    lines = [f"{'mutant':36} {'component':18} {'outcome':8} {'time':>5}  named check -> "
             "actual"]
    for o in outcomes:
        flag = "  MISMATCH" if o.mismatch else ""
        lines.append(f"{o.mutant.name:36} {component(o.mutant):18} {o.verdict.outcome:8} "
                     f"{o.secs:4.0f}s  {o.mutant.check or '-'} -> {o.verdict.by or '-'}"
                     f" {o.verdict.why[:160]}{flag}")
    return "\n".join(lines)
