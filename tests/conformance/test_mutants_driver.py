"""The mutation driver classifies outcomes right (cheap, default run): an assertion failure
kills, a ValueError or SyntaxError does not (error), a passing check survives, a patch that
does not apply is refused naming file and text, and every harness mutant still applies."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from epochgc.proofs.mutate import Mutant, PatchRefused, campaign, patch
from tests.conformance.mutants import (
    EQUIVALENTS,
    MUTANTS,
    ROOT,
    SURVIVORS,
    classify,
    run_tests,
)


def _tree(root: Path) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "mod.py").write_text("def f() -> int:\n    return 1\n")
    (root / "t").mkdir()
    (root / "t" / "test_f.py").write_text(
        "from pkg.mod import f\n\n\ndef test_f() -> None:\n    assert f() == 1\n")
    # The driver loads the failure recorder as `epochgc.proofs.pytest_failrecord`.
    (root / "epochgc" / "proofs").mkdir(parents=True)
    (root / "epochgc" / "__init__.py").write_text("")
    (root / "epochgc" / "proofs" / "__init__.py").write_text("")
    shutil.copy(ROOT / "proofs" / "pytest_failrecord.py", root / "epochgc" / "proofs")


def _run(tmp: Path, mutants: list[Mutant]):  # type: ignore[no-untyped-def]
    return campaign(mutants, src=tmp, dirs=("pkg", "t", "epochgc"), jobs=2,
                    run=lambda root, m: run_tests(root, m, 120, tests=["t/test_f.py"]),
                    classify=classify)


def test_driver_kills_only_on_an_assertion(tmp_path: Path) -> None:
    _tree(tmp_path)
    old = "    return 1\n"
    ms = [Mutant("wrong-value", "", "pkg/mod.py", old, "    return 2\n", check="test_f"),
          Mutant("value-error", "", "pkg/mod.py", old, "    raise ValueError('x')\n"),
          Mutant("syntax-error", "", "pkg/mod.py", old, "    return (\n"),
          Mutant("equivalent", "", "pkg/mod.py", old, "    return 0 + 1\n"),
          Mutant("other-check", "", "pkg/mod.py", old, "    return 3\n", check="nowhere")]
    baseline, outcomes = _run(tmp_path, ms)
    assert baseline.code == 0
    got = {o.mutant.name: o for o in outcomes}
    assert got["wrong-value"].verdict.outcome == "killed"
    assert "AssertionError" in got["wrong-value"].verdict.why
    assert not got["wrong-value"].mismatch
    assert got["value-error"].verdict.outcome == "error"
    assert "ValueError" in got["value-error"].verdict.why
    assert got["syntax-error"].verdict.outcome == "error"
    assert got["equivalent"].verdict.outcome == "survived"
    assert got["other-check"].verdict.outcome == "killed" and got["other-check"].mismatch


def test_a_patch_that_does_not_apply_is_refused(tmp_path: Path) -> None:
    _tree(tmp_path)
    stale = Mutant("stale", "", "pkg/mod.py", "    return 42\n", "    return 2\n")
    with pytest.raises(PatchRefused, match=r"pkg/mod\.py.*return 42"):
        _run(tmp_path, [stale])
    with pytest.raises(PatchRefused, match=r"no file pkg/gone\.py"):
        _run(tmp_path, [Mutant("gone", "", "pkg/gone.py", "a", "b")])


def test_mutant_list_is_big_spread_and_named() -> None:
    assert len({m.name for m in MUTANTS}) == len(MUTANTS) >= 25
    assert all(m.check for m in MUTANTS)
    dirs = {m.path.split("/")[1] for m in MUTANTS}
    assert {"raft", "partition", "broker", "gc", "controller", "cluster"} <= dirs


ALL = MUTANTS + SURVIVORS + EQUIVALENTS


@pytest.mark.parametrize("m", ALL, ids=[m.name for m in ALL])
def test_every_mutant_patch_applies_once(m: Mutant, tmp_path: Path) -> None:
    for path, _old, _new in m.edits():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text((ROOT / path).read_text())
    patch(tmp_path, m)


def test_a_detection_that_is_not_an_assertion_kills() -> None:
    """The disk fuzzers' StorageCorruption and pytest's Failed ("DID NOT RAISE") are a
    check's verdict: kills; a ValueError is not."""
    from epochgc.proofs.mutate import RunResult

    def rec(t: str, mro: list[str]) -> dict[str, object]:
        return {"test": "tests/x.py::t", "type": t, "mro": mro, "assertion": False,
                "message": "m"}

    corrupt = rec("StorageCorruption", ["StorageCorruption", "StorageError", "Exception"])
    failed = rec("Failed", ["Failed", "OutcomeException", "BaseException"])
    other = rec("ValueError", ["ValueError", "Exception"])
    assert classify(RunResult(1, "", 0.0, [corrupt])).outcome == "killed"
    assert classify(RunResult(1, "", 0.0, [failed])).outcome == "killed"
    assert classify(RunResult(1, "", 0.0, [other])).outcome == "error"


def test_the_suite_copy_lists_each_directory_once_and_every_link_target() -> None:
    # The layout change put "spec" in DIRS while SUITE_DIRS still added it: copy_tree then
    # failed on the second copy and `tox -e mutants-suite-select` ran no mutant at all.
    from tests.conformance.mutants import DIRS, SUITE_DIRS
    for dirs in (DIRS, SUITE_DIRS):
        assert len(dirs) == len(set(dirs)), sorted(d for d in dirs if dirs.count(d) > 1)
    links = [p for p in (ROOT / "epochgc").iterdir() if p.is_symlink()]
    assert links
    for link in links:
        target = (link.parent / link.readlink()).resolve().relative_to(ROOT.resolve())
        assert target.parts[0] in SUITE_DIRS, f"epochgc/{link.name} -> {target} not copied"
        assert target.parts[0] in DIRS or link.name == "experiments", link.name


def test_a_name_that_is_no_mutant_is_refused_not_a_green_run_of_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # `python -m tests.conformance.mutants no-such-mutant` ran the baseline, then no
    # mutant, and said "mutants killed: 0/0" with exit 0.
    from tests.conformance.mutants import main

    with pytest.raises(SystemExit) as e:
        main(["no-such-mutant"])
    assert e.value.code == 2 and "no such mutant: no-such-mutant" in capsys.readouterr().err
