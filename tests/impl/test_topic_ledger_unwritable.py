"""`topic create` / `delete` whose ledger (DATA_DIR/topics-asked.json, kept until the
outcome is seen) cannot be written (newuser25 H6): `epochgc topic create: error:
run/topics-asked.json.lock: Permission denied`, exit 1, a relative path and not a word of
whether anything was sent; `produce` in the same place says 64, the absolute path and
"nothing was sent". As root, a permission cannot be taken away: a directory where the
lock file goes fails the same open(2) (EISDIR). No node runs: nothing could be sent."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.impl.cli import main
from epochgc.impl.cluster import asked
from tests.impl.test_cluster_restart import made_cluster


@pytest.mark.parametrize("op", [["create", "x", "--partitions", "1"], ["delete", "t"]])
def test_an_unwritable_ledger_is_refused_unsent(tmp_path: Path, op: list[str]) -> None:
    lc = made_cluster(tmp_path, 1, ["t/0"])
    (lc.dir / asked.LOCK).mkdir()
    r = CliRunner().invoke(main, ["topic", op[0], "--data-dir", str(lc.dir), *op[1:]])
    assert r.exit_code == 64, r.output
    [line] = r.output.splitlines()
    assert line.startswith(f"epochgc topic {op[0]}: error: {lc.dir / asked.LOCK}: Is a "
                           "directory; nothing was sent"), line
