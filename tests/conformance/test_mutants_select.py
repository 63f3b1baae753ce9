"""The mutation check's coverage-based test selection (tests/conformance/mutants_select.py).

A mutant must run every test that can see its edit: the tests that executed a line of the
function it edits, every test when the edit runs at import, plus the tests whose children
died unmeasured; never a test that failed on the unmutated tree; `not covered` when none.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from epochgc.proofs.mutate import Mutant
from tests.conformance.mutants import MUTANTS
from tests.conformance.mutants_select import (
    Edit,
    Index,
    Reason,
    Scope,
    _test_of,
    place,
    select,
)

MODULE = '''\
LIMIT = 3


class Box:
    size = 2

    def grow(self, n: int = 1) -> int:
        total = self.size + n
        if total > LIMIT:
            total = LIMIT
        return total


def outer(x: int) -> int:
    def inner(y: int = x + 1) -> int:
        return y * 2
    return inner()
'''


def _mutant(old: str, new: str, check: str = "") -> Mutant:
    return Mutant("m", "a test mutant", "impl/mod.py", old, new, check=check)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "impl").mkdir()
    (tmp_path / "impl" / "mod.py").write_text(MODULE)
    return tmp_path


def test_an_edit_in_a_function_body_is_placed_in_its_innermost_function(tree: Path) -> None:
    [e] = place(_mutant("            total = LIMIT\n", "            total = LIMIT + 1\n"), tree)
    assert (e.scope, e.first, e.last, e.body) == (Scope.FUNCTION, 10, 10, (8, 11))
    [e] = place(_mutant("        return y * 2\n", "        return y * 3\n"), tree)
    assert (e.scope, e.body) == (Scope.FUNCTION, (16, 16))  # inner's body, not outer's
    # A multi-line edit spans its lines; the trailing newline starts no further line.
    [e] = place(_mutant("        if total > LIMIT:\n            total = LIMIT\n", "\n"), tree)
    assert (e.first, e.last) == (9, 10)


def test_edits_that_run_at_import_are_module_level(tree: Path) -> None:
    for old in ("LIMIT = 3", "    size = 2", "def grow(self, n: int = 1)", "class Box:"):
        [e] = place(_mutant(old, old.replace("3", "4")), tree)
        assert e.scope is Scope.MODULE, old
    # An inner function's default is evaluated when the OUTER function runs: outer's body.
    [e] = place(_mutant("y: int = x + 1", "y: int = x + 2"), tree)
    assert (e.scope, e.body) == (Scope.FUNCTION, (15, 17))
    [e] = place(_mutant("not in the file", "x"), tree)
    assert e.scope is Scope.UNPLACED


def _index(failed: frozenset[str] = frozenset(), opaque: frozenset[str] = frozenset()
           ) -> Index:
    tests = ("tests/a.py::slow_exact", "tests/a.py::fast_exact", "tests/b.py::same_function",
             "tests/c.py::other_function", "tests/d.py::nothing", "tests/e.py::named")
    lines = {"impl/mod.py": {
        8: frozenset({tests[0], tests[1], tests[2], tests[5]}),
        9: frozenset({tests[0], tests[1], tests[2], tests[5]}),
        10: frozenset({tests[0], tests[1], tests[5]}),
        11: frozenset({tests[0], tests[1], tests[2], tests[5]}),
        17: frozenset({tests[3]}),
    }}
    secs = {tests[0]: 9.0, tests[1]: 0.1, tests[2]: 0.5, tests[3]: 0.2, tests[4]: 0.3,
            tests[5]: 5.0}
    return Index(tests, lines, secs, failed, opaque, "d")


def _edit(first: int, last: int, body: tuple[int, int] | None,
          scope: Scope = Scope.FUNCTION) -> Edit:
    return Edit("impl/mod.py", first, last, scope, body)


def test_a_function_edit_selects_every_test_of_that_function_exact_hits_first() -> None:
    sel = select(_mutant("a", "b"), _index(), [_edit(10, 10, (8, 11))])
    assert sel.reason is Reason.LINES and sel.exact == 3
    # Exact-line hits fastest first, then the rest of the function's tests; never a test
    # that did not enter the function.
    assert sel.tests == ("tests/a.py::fast_exact", "tests/e.py::named",
                         "tests/a.py::slow_exact", "tests/b.py::same_function")


def test_the_tests_the_check_names_run_first() -> None:
    sel = select(_mutant("a", "b", check=r"tests/e.py::named"), _index(),
                 [_edit(10, 10, (8, 11))])
    assert sel.tests[0] == "tests/e.py::named"


def test_module_level_and_unplaced_edits_select_every_test_but_the_failed() -> None:
    idx = _index(failed=frozenset({"tests/d.py::nothing"}))
    for e in (_edit(1, 1, None, Scope.MODULE), _edit(0, 0, None, Scope.UNPLACED)):
        sel = select(_mutant("a", "b"), idx, [_edit(17, 17, (15, 17)), e])
        assert sel.reason is Reason.ALL
        assert set(sel.tests) == set(idx.tests) - idx.failed


def test_opaque_tests_are_always_selected_and_failed_ones_never() -> None:
    idx = _index(failed=frozenset({"tests/a.py::fast_exact"}),
                 opaque=frozenset({"tests/d.py::nothing"}))
    sel = select(_mutant("a", "b"), idx, [_edit(10, 10, (8, 11))])
    assert "tests/d.py::nothing" in sel.tests
    assert "tests/a.py::fast_exact" not in sel.tests


def test_an_edit_no_test_executes_is_not_covered() -> None:
    sel = select(_mutant("a", "b"), _index(), [_edit(20, 20, (19, 21))])
    assert sel.reason is Reason.NOT_COVERED and sel.tests == ()


def test_a_coverage_context_names_its_test() -> None:
    assert _test_of("tests/a.py::t[1]") == "tests/a.py::t[1]"
    assert _test_of("tests/a.py::t|") == "tests/a.py::t"  # a child's static context
    assert _test_of("") == ""  # lines run at collection belong to no test


def test_every_counted_mutant_is_placed_in_todays_tree() -> None:
    """Every edit is found exactly once in the original file (an unplaced one would fall
    back to every test: sound, but the run would be hours again)."""
    unplaced = [(m.name, e.path) for m in MUTANTS for e in place(m)
                if e.scope is Scope.UNPLACED]
    assert unplaced == []


def test_an_edit_outside_the_measured_tree_runs_every_test_named_first() -> None:
    """Issue 42: a checker's own seeded bug (tests/, proofs/) has no coverage lines; it is
    never `not covered`, it runs every usable test, its named check's file first."""
    from tests.conformance.mutants_select import Edit, Index, Reason, Scope, select

    m = Mutant("c", "a checker mutant", "tests/x/checker.py", "a", "b",
               check=r"tests/x/test_checker.py::test_it")
    index = Index(("tests/a_test.py::t", "tests/x/test_checker.py::test_it"), {},
                  {"tests/a_test.py::t": 1.0, "tests/x/test_checker.py::test_it": 5.0},
                  frozenset(), frozenset(), "d")
    pick = select(m, index, [Edit("tests/x/checker.py", 3, 3, Scope.FUNCTION, (2, 9))])
    assert pick.reason is Reason.ALL
    assert pick.tests == ("tests/x/test_checker.py::test_it", "tests/a_test.py::t")
