"""A pytest plugin for the mutation driver: records the exception type of every failing test.

    pytest -p proofs.pytest_failrecord  (EPOCHGC_FAILRECORD=path.jsonl)

One JSON line per failure: test id, phase, exception type (with its base classes' names),
whether it is an assertion-family failure (AssertionError and its subclasses: Divergence,
InvariantViolation, ...; an exception group counts only when all its members do), message.
A mutant is killed only by such a failure; an ImportError or ValueError is an error.
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator
from typing import Any

import pytest


def is_assertion(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return all(is_assertion(e) for e in exc.exceptions)
    return isinstance(exc, AssertionError)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]
                              ) -> Generator[None, Any, None]:
    outcome = yield
    rep = outcome.get_result()
    path = os.environ.get("EPOCHGC_FAILRECORD")
    if not path or not rep.failed or call.excinfo is None:
        return
    exc = call.excinfo.value
    rec = {"test": item.nodeid, "when": call.when, "type": type(exc).__name__,
           "mro": [c.__name__ for c in type(exc).__mro__],
           "assertion": is_assertion(exc), "message": str(exc).strip()[:600]}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(rec) + "\n")
