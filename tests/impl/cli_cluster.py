"""A real cluster (broker processes on their disk logs, a local store) shared by a test
module's cases, driven through the `epochgc` command in a child process
(tests/impl/test_produce_large.py, test_frozen_node.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from epochgc.impl.signals import HOOK_ENV

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))
# Hang bounds, generous for a loaded machine (a case never waits them out when it passes).
BOUND_S = float(os.environ.get("EPOCHGC_TEST_BOUND_S", "300"))


def epochgc(*argv: str, timeout: float = BOUND_S, hook: str | None = None
            ) -> subprocess.CompletedProcess[str]:
    """`epochgc ARGV` in a child process; `hook`: its test signal (`HOOK_ENV`, e.g.
    "built:SIGINT": that signal sent to itself at that point)."""
    env = ENV if hook is None else dict(ENV, **{HOOK_ENV: hook})
    return subprocess.run([sys.executable, "-m", "epochgc", *argv], capture_output=True,
                          text=True, timeout=timeout, env=env)


def stop(d: Path) -> None:
    epochgc("cluster", "stop", "--data-dir", str(d))


def module_cluster(factory: pytest.TempPathFactory, name: str, nodes: int,
                   end: Callable[[Path], None] = stop) -> Iterator[Path]:
    """For a module-scoped fixture (one start for the module: a start costs ~4 s): the data
    directory of a cluster of `nodes` node(s) with partition t/0; `end` stops it."""
    tmp = factory.mktemp(name)
    d = tmp / "c"
    r = epochgc("cluster", "start", "--data-dir", str(d), "--store", str(tmp / "store"),
                "--nodes", str(nodes), "--partitions", "t/0")
    assert r.returncode == 0, r.stderr
    try:
        yield d
    finally:
        end(d)
