"""Docs that cannot drift (issue 41 item 11), each check derived from the files it guards:
every vector file is in spec/VECTORS.md's table with its own variant; rule, invariant and
transition ranges cited match spec/SPEC.md; the Node port's variant list matches
model/variants.py (and its own code); every `.md` a document cites exists; and the README's
command blocks run, verbatim, against this checkout. Old docs: 16 of 36 vector files listed,
R1-R35 (SPEC has R38), "all nine" variants and R1-R24 in ports/node/README.md, a
`REFERENCE.md` that is not in the repository, and a "Running it" block that failed at
`epochgc topic delete u`."""

from __future__ import annotations

import itertools
import os
import re
import shlex
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import click
import pytest

from epochgc.impl.cli import main
from epochgc.model.variants import SAFE_VARIANTS, VARIANTS

ROOT = Path(__file__).resolve().parents[1]
SPEC = (ROOT / "spec" / "SPEC.md").read_text(encoding="utf-8")
VECTORS_MD = (ROOT / "spec" / "VECTORS.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")
NODE_README = (ROOT / "ports" / "node" / "README.md").read_text(encoding="utf-8")
DOCS = sorted(p for p in ROOT.rglob("*.md")
              if not {".tox", "build", "node_modules", ".git"} & set(p.relative_to(ROOT).parts))

_HEADER = re.compile(r"#\s*variant\s*:(.*)")
_RANGE = re.compile(r"\b([RIT])(\d+)[a-z]?-\1(\d+)\b")


def _defined(kind: str) -> list[int]:
    """The numbers SPEC defines: a rule is a `- **RN**` item; invariants and transition
    invariants are named wherever SPEC states them."""
    if kind == "R":
        return sorted({int(n) for n in re.findall(r"^- \*\*R(\d+)[a-z]?\*\*", SPEC, re.M)})
    return sorted({int(n) for n in re.findall(rf"\b{kind}(\d+)\b", SPEC)})


def _vector_files() -> dict[str, str]:
    """Every shipped vector file (relative to spec/vectors) and the variant its header names."""
    out = {}
    for f in sorted((ROOT / "spec" / "vectors").rglob("*.jsonl")):
        m = _HEADER.match(f.read_text(encoding="utf-8").splitlines()[0])
        out[f.relative_to(ROOT / "spec" / "vectors").as_posix()] = m.group(1).strip() if m else ""
    return out


def _table_rows() -> dict[str, str]:
    section = VECTORS_MD.partition("## Shipped vectors")[2].partition("\n## ")[0]
    return {m.group(1): m.group(2).strip()
            for m in re.finditer(r"^\| `([^`]+\.jsonl)` \| ([^|]+) \|", section, re.M)}


def test_every_vector_file_is_listed_with_its_variant() -> None:
    files, rows = _vector_files(), _table_rows()
    missing = sorted(set(files) - set(rows))
    assert not missing, ("spec/VECTORS.md's table lacks: " + ", ".join(missing)
                         + " (one row each: | `FILE` | VARIANT | what it shows |)")
    assert not set(rows) - set(files), f"listed but absent: {sorted(set(rows) - set(files))}"
    wrong = {f: (rows[f], files[f]) for f in files if files[f] and rows[f] != files[f]}
    assert not wrong, f"variant column differs from the file's header: {wrong}"


def test_rule_ranges_cited_exist_and_full_ranges_are_complete() -> None:
    """Every `Ra-Rb` (and I, T) any document cites is within what SPEC defines; a range from
    1 in the README (the whole set) ends at SPEC's last."""
    last = {k: _defined(k)[-1] for k in "RIT"}
    for doc in DOCS:
        for m in _RANGE.finditer(doc.read_text(encoding="utf-8")):
            kind, lo, hi = m.group(1), int(m.group(2)), int(m.group(3))
            assert lo < hi <= last[kind], (
                f"{doc.relative_to(ROOT)}: {m.group(0)} (SPEC: {kind}1-{kind}{last[kind]})")
    whole = {(m.group(1), int(m.group(3))) for m in _RANGE.finditer(README) if m.group(2) == "1"}
    assert whole == {(k, last[k]) for k in "RIT"}, (whole, last)


_ONES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
         "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
         "eighteen", "nineteen")
_TENS = {2: "twenty", 3: "thirty", 4: "forty"}


def _in_words(n: int) -> str:
    """0-49 in English words, as the READMEs write a count ("All twenty")."""
    if n < 20:
        return _ONES[n]
    tens, ones = divmod(n, 10)
    return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")


def test_node_readme_names_every_variant_and_the_rules_its_vectors_use() -> None:
    section = NODE_README.partition("## Variants")[2].partition("\n## ")[0]
    named = set(re.findall(r"`([a-z][a-z-]*)`", section))
    assert named == set(VARIANTS), (sorted(set(VARIANTS) - named), sorted(named - set(VARIANTS)))
    count = re.search(r"All (\w+)", section)
    assert count is None or count.group(1).lower() in (_in_words(len(VARIANTS)),
                                                       str(len(VARIANTS)))
    js = (ROOT / "ports" / "node" / "epochgc.js").read_text(encoding="utf-8")
    array = re.search(r"const VARIANTS = Object\.freeze\(\[(.*?)\]\)", js, re.S)
    assert array and set(re.findall(r"'([a-z-]+)'", array.group(1))) == set(VARIANTS)
    # The port passes every shipped vector: the rules the vectors' table cites are its rules.
    cover = {n for m in _RANGE.finditer(NODE_README.partition("\n\n")[2].partition("\n\n")[0])
             if m.group(1) == "R" for n in range(int(m.group(2)), int(m.group(3)) + 1)}
    table = VECTORS_MD.partition("## Shipped vectors")[2].partition("\n## ")[0]
    used = {int(n) for n in re.findall(r"\bR(\d+)", table)}
    used |= {n for m in _RANGE.finditer(table)
             if m.group(1) == "R" for n in range(int(m.group(2)), int(m.group(3)) + 1)}
    assert used <= cover, (
        f"rules the vectors exercise but the port's README omits: {sorted(used - cover)}")


def test_readme_proofs_name_the_safe_variants() -> None:
    proofs = README.partition("## Proofs")[2].partition("\n## ")[0]
    first = proofs.partition(" variants")[0]
    assert set(re.findall(r"`([a-z-]+)`", first)) == set(SAFE_VARIANTS), first


def test_every_markdown_file_cited_exists() -> None:
    """A path resolves from the document's folder or the root; a bare name (`SPEC.md` in
    the folder table) names a file somewhere in the repository."""
    names = {p.name for p in DOCS}
    for doc in DOCS:
        for name in re.findall(r"`([A-Za-z0-9_./-]+\.md)`", doc.read_text(encoding="utf-8")):
            assert ((doc.parent / name).exists() or (ROOT / name).exists()
                    or ("/" not in name and name in names)), (
                f"{doc.relative_to(ROOT)} cites {name}, which is not in the repository")


def _blocks(heading: str) -> list[str]:
    section = README.partition(f"## {heading}\n")[2].partition("\n## ")[0]
    return re.findall(r"^```\n(.*?)^```", section, re.M | re.S)


def _commands() -> list[list[str]]:
    """Every `epochgc ...` command of the README's blocks, as argv (shell syntax around it,
    `until ...; do`, `$(...)`, comments, left out)."""
    out = []
    for block in re.findall(r"^```\n(.*?)^```", README, re.M | re.S):
        for line in block.splitlines():
            m = re.search(r"(?:^|until |; )epochgc ([^;#]*?)(?:\s*(?:[;#>]|$))", line)
            if m and "$(" not in m.group(1):
                out.append(shlex.split(m.group(1)))
    return out


def _rest(ctx: click.Context) -> list[str]:
    """The tokens a group left for its subcommand (click 8 keeps the name apart)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return [*ctx.protected_args, *ctx.args]


def test_every_readme_command_parses() -> None:
    """Cheap, in the default suite: each command names a real subcommand and options it
    takes (the full run below is `tox -e docs`)."""
    cmds = _commands()
    assert len(cmds) >= 15, cmds
    for argv in (a for a in cmds if "--help" not in a):
        cmd: click.Command = main
        ctx = main.make_context("epochgc", list(argv), resilient_parsing=False)
        args = _rest(ctx)
        while isinstance(cmd, click.Group) and args:
            sub = cmd.get_command(ctx, args[0])
            assert sub is not None, (argv, args[0])
            cmd, ctx = sub, sub.make_context(args[0], args[1:], parent=ctx)
            args = _rest(ctx)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("EPOCHGC_DOCS_RUN"),
                    reason="tox -e docs (EPOCHGC_DOCS_RUN=1): ~2 min, two Spark start-ups")
def test_the_readme_command_blocks_run(tmp_path: Path) -> None:
    """The tour and "Running it", verbatim, in a fresh directory: `epochgc` is this
    checkout's CLI. Only the tour's `demo` line is left out (tests/impl/test_demo.py runs
    the demo; 20 s of it here would add nothing)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "epochgc"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m epochgc.impl.cli "$@"\n')
    shim.chmod(0o755)
    port = bin_dir / "epochgc-model-port"  # the wheel's second console script
    port.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c '
                    f'"from epochgc.model.port_main import main; main()"\n')
    port.chmod(0o755)
    tour, running = _blocks("Five-minute tour"), _blocks("Running it")
    assert len(tour) == 1 and len(running) == 1
    tour_lines = [line for line in tour[0].splitlines() if not line.startswith("epochgc demo ")]
    assert len(tour_lines) == len(tour[0].splitlines()) - 1
    # A fresh cluster for "Running it": its data directory and its store (beside it: a
    # store is one cluster's, and the tour's cluster named itself in this one).
    script = "\n".join(["set -eu", *tour_lines, "rm -rf run store", running[0]])
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", PYTHONPATH=str(ROOT))
    p = subprocess.run(["bash", "-c", script], cwd=tmp_path / "bin", env=env,
                       capture_output=True, text=True, timeout=600, check=False)
    stop = subprocess.run([str(shim), "cluster", "stop", "--data-dir", "run"],
                          cwd=tmp_path / "bin", env=env, capture_output=True, check=False)
    assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-3000:], stop.returncode)


def test_the_tour_runs_only_the_epochgc_commands() -> None:
    """newuser9 K10: the tour ran `python -c 'import epochgc; ...'` and `python -m
    epochgc.model.port`, which fail after the README's own `pipx install` (the package's
    Python is not on PATH) or where only `python3` exists. Every command of the tour is
    one the package installs (pyproject's [project.scripts])."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    [tour] = _blocks("Five-minute tour")
    for line in tour.splitlines():
        code = line.partition("#")[0].strip()
        if not code:
            continue
        words = shlex.split(code)
        ported = [w for a, w in itertools.pairwise(words) if a == "--"]  # conform's port
        assert all(w in scripts for w in ported), f"not an installed command: {line}"
        assert not [w for w in words if re.search(r"(^|\W)python[0-9.]*($|\W)", w)], line
