"""pytest plugin for `mutants --suite --select coverage`: per-test coverage contexts.

    coverage run --rcfile=RC -m pytest -p tests.conformance.mutants_covplugin ...

Loaded in the one baseline run under coverage (`tests.conformance.mutants_select collect`).
At each test's start it switches coverage's dynamic context to the test's node id (what
pytest-cov's `--cov-context=test` does), so the data says which test executed which line.
Every child process a test starts is measured too: the child's environment gets the
coverage library and a `sitecustomize` on its PYTHONPATH (appended, even when the test sets
its own) and the test's id as its static context; the child writes a start marker, so a
child that died before saving its data (SIGKILL) is seen, and its test is then treated as
executing every line (`opaque`). Each test's duration goes to a JSON file, for ordering.

Also loaded (without coverage) into each mutant's run, where it stops the session at the
first failure that is a kill (assertion-family or one of `DETECTIONS`), so a mutant's run
ends at its first kill but an error in an unrelated test does not hide a later kill.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Generator
from typing import Any

import pytest

from epochgc.proofs.pytest_failrecord import is_assertion

# Set by the collector (mutants_select.collect) in the baseline run's environment.
CONTEXT_VAR = "EPOCHGC_MUTSEL_CONTEXT"  # the current test id, read by children's rcfile
CHILD_PATH_VAR = "EPOCHGC_MUTSEL_CHILD_PATH"  # coverage lib + sitecustomize, for children
DURATIONS_VAR = "EPOCHGC_MUTSEL_DURATIONS"  # where test durations go (JSON lines)
MARKERS_VAR = "EPOCHGC_MUTSEL_MARKERS"  # where children leave their start markers
STOP_VAR = "EPOCHGC_MUTSEL_STOP_AT_KILL"  # "1": stop the session at the first kill
# Must match mutants.DETECTIONS (kept here so the plugin imports nothing from the runner).
DETECTIONS = frozenset({"StorageCorruption", "Failed"})


def child_env(env: dict[str, str] | None) -> dict[str, str] | None:
    """The environment a child process gets: the caller's (or ours) with the child path
    appended to PYTHONPATH and the coverage variables carried over; None when not
    collecting (the child then gets exactly what the test asked for)."""
    extra = os.environ.get(CHILD_PATH_VAR)
    if not extra:
        return env
    out = dict(os.environ if env is None else env)
    pp = out.get("PYTHONPATH", "")
    if extra not in pp.split(os.pathsep):
        out["PYTHONPATH"] = f"{pp}{os.pathsep}{extra}" if pp else extra
    for k in (CONTEXT_VAR, CHILD_PATH_VAR, MARKERS_VAR, "COVERAGE_PROCESS_START"):
        if k in os.environ:
            out[k] = os.environ[k]
    return out


_REAL_INIT = subprocess.Popen.__init__


def _popen_init(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
    kwargs["env"] = child_env(kwargs.get("env"))
    _REAL_INIT(self, *args, **kwargs)


def install_popen_hook() -> None:
    """Route every child's environment through `child_env` (this process and, from the
    children's sitecustomize, theirs)."""
    subprocess.Popen.__init__ = _popen_init  # type: ignore[method-assign]


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get(CHILD_PATH_VAR):
        install_popen_hook()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None
                            ) -> Generator[None, Any, None]:
    cov = _coverage()
    if cov is not None:
        cov.switch_context(item.nodeid)
    os.environ[CONTEXT_VAR] = item.nodeid
    t = time.monotonic()
    yield
    secs = time.monotonic() - t
    os.environ[CONTEXT_VAR] = ""
    if cov is not None:
        cov.switch_context("")
    path = os.environ.get(DURATIONS_VAR)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"test": item.nodeid, "secs": round(secs, 3)}) + "\n")


def _coverage() -> Any:
    try:
        import coverage
    except ImportError:
        return None
    return coverage.Coverage.current()


def kills(exc: BaseException) -> bool:
    """A failure that counts as a kill: assertion-family, or one of DETECTIONS."""
    names = {c.__name__ for c in type(exc).__mro__}
    return is_assertion(exc) or bool(names & DETECTIONS)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]
                              ) -> Generator[None, Any, None]:
    outcome = yield
    rep = outcome.get_result()
    if (os.environ.get(STOP_VAR) == "1" and rep.failed and call.excinfo is not None
            and kills(call.excinfo.value)):
        item.session.shouldstop = f"killed by {item.nodeid}"
